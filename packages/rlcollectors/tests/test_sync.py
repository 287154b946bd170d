"""SyncDataCollector: batch layout, frame counts, trajectory ids, equality with env.rollout, lifecycle."""

from __future__ import annotations

import multiprocessing
import re
import sys

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule, TensorDictModuleBase
from torch import nn

from rlbatched import ParallelEnv, SerialEnv
from rlcollectors import SyncDataCollector
from rlmocks import ContinuousActionVecMockEnv, CountingBatchedEnv, CountingEnv, NestedCountingEnv
from rlmodules import Actor

TRAJ_IDS = ("collector", "traj_ids")
pytestmark = pytest.mark.filterwarnings("error")


class OnesPolicy(TensorDictModuleBase):
    """Always increments CountingEnv: its trajectories last max_steps + 1 frames."""

    in_keys = []
    out_keys = ["action"]

    def __init__(self, action_spec):
        super().__init__()
        self.action_spec = action_spec

    def forward(self, tensordict):
        return tensordict.set("action", self.action_spec.zero() + 1)


def _ones_collector(max_steps=3, batch_size=(), **kwargs):
    env = CountingEnv(max_steps, batch_size=list(batch_size))
    return SyncDataCollector(env, OnesPolicy(env.action_spec), **kwargs)


def _assert_same(actual, expected):
    assert set(actual.keys(True, True)) == set(expected.keys(True, True))
    assert actual.batch_size == expected.batch_size
    assert (actual == expected).all()


def _linear_policy(env):
    torch.manual_seed(0)
    obs, act = env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1]
    return Actor(nn.Linear(obs, act))


@pytest.mark.parametrize("batch_size", [(), (2,), (2, 3)])
def test_batches_have_frames_per_batch_frames_and_a_time_dim(batch_size):
    collector = _ones_collector(batch_size=batch_size, frames_per_batch=24, total_frames=48)
    batch = next(iter(collector))
    numel = torch.Size(batch_size).numel()
    assert batch.shape == (*batch_size, 24 // numel)
    assert batch.names[-1] == "time"
    assert batch.get(TRAJ_IDS).shape == batch.shape
    assert {
        "observation",
        "action",
        ("next", "observation"),
        ("next", "reward"),
        ("next", "done"),
    } <= set(batch.keys(True))
    collector.shutdown()


def test_collection_stops_once_total_frames_are_collected():
    with pytest.warns(UserWarning, match="5 additional frames will be collected"):
        collector = _ones_collector(frames_per_batch=10, total_frames=25)
    batches = list(collector)
    assert [b.numel() for b in batches] == [10, 10, 10]
    assert collector.frames == 30
    assert list(collector) == []
    collector.shutdown()


def test_batch_equals_env_rollout_with_same_policy_and_seed():
    env = ContinuousActionVecMockEnv()
    policy = _linear_policy(env)
    env.set_seed(7)
    torch.manual_seed(7)  # the mock's reset draws from torch's generator
    expected = env.rollout(50, policy, break_when_any_done=False)

    collector = SyncDataCollector(
        ContinuousActionVecMockEnv(), policy, frames_per_batch=50, total_frames=50
    )
    collector.set_seed(7)
    torch.manual_seed(7)
    batch = next(iter(collector))
    _assert_same(batch.exclude("collector"), expected)
    collector.shutdown()


def test_random_policy_batch_equals_random_rollout_with_same_seeds():
    env = ContinuousActionVecMockEnv()
    env.set_seed(3)
    torch.manual_seed(3)
    expected = env.rollout(20, break_when_any_done=False)

    collector = SyncDataCollector(
        ContinuousActionVecMockEnv(), frames_per_batch=20, total_frames=20
    )
    collector.set_seed(3)
    torch.manual_seed(3)
    _assert_same(next(iter(collector)).exclude("collector"), expected)
    collector.shutdown()


def test_consecutive_batches_continue_the_same_rollout():
    env = ContinuousActionVecMockEnv()
    policy = _linear_policy(env)
    env.set_seed(1)
    torch.manual_seed(1)
    expected = env.rollout(30, policy, break_when_any_done=False)

    collector = SyncDataCollector(
        ContinuousActionVecMockEnv(), policy, frames_per_batch=10, total_frames=30
    )
    collector.set_seed(1)
    torch.manual_seed(1)
    batches = torch.cat(list(collector), 0)
    _assert_same(batches.exclude("collector"), expected)
    collector.shutdown()


def test_trajectory_ids_change_after_each_done():
    collector = _ones_collector(max_steps=3, frames_per_batch=10, total_frames=20)
    first, second = list(collector)
    assert first.get(TRAJ_IDS).tolist() == [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
    assert second.get(TRAJ_IDS).tolist() == [2, 2, 3, 3, 3, 3, 4, 4, 4, 4]
    assert first["observation"].squeeze(-1).tolist() == [0, 1, 2, 3, 0, 1, 2, 3, 0, 1]
    collector.shutdown()


def test_trajectory_ids_are_per_env_and_fresh_ids_follow_the_largest():
    env = CountingBatchedEnv(max_steps=torch.tensor([5, 2]), batch_size=[2])
    collector = SyncDataCollector(
        env, OnesPolicy(env.action_spec), frames_per_batch=16, total_frames=16
    )
    ids = next(iter(collector)).get(TRAJ_IDS)
    # env 1 ends a trajectory every 3 frames, env 0 every 6; simultaneous ends are numbered in env order
    assert ids[0].tolist() == [0, 0, 0, 0, 0, 0, 3, 3]
    assert ids[1].tolist() == [1, 1, 1, 2, 2, 2, 4, 4]
    collector.shutdown()


def test_nested_done_keys_end_trajectories():
    env = NestedCountingEnv(max_steps=2, nested_dim=3)

    def policy(td):
        return td.set(("data", "action"), env.full_action_spec["data", "action"].zero() + 1)

    collector = SyncDataCollector(env, policy, frames_per_batch=6, total_frames=6)
    batch = next(iter(collector))
    assert batch.get(TRAJ_IDS).tolist() == [0, 0, 0, 1, 1, 1]
    assert batch["data"].shape == (6, 3)
    collector.shutdown()


def test_reset_at_each_iter_starts_every_batch_from_a_reset():
    collector = _ones_collector(
        max_steps=10, frames_per_batch=4, total_frames=8, reset_at_each_iter=True
    )
    first, second = list(collector)
    assert first["observation"].squeeze(-1).tolist() == [0, 1, 2, 3]
    assert second["observation"].squeeze(-1).tolist() == [0, 1, 2, 3]
    assert second.get(TRAJ_IDS).tolist() == [1, 1, 1, 1]
    collector.shutdown()


def test_max_frames_per_traj_truncates_trajectories():
    collector = _ones_collector(
        max_steps=100, frames_per_batch=10, total_frames=10, max_frames_per_traj=4
    )
    batch = next(iter(collector))
    assert (
        batch["next", "truncated"].squeeze(-1).tolist()
        == [False, False, False, True] * 2 + [False] * 2
    )
    assert batch.get(TRAJ_IDS).tolist() == [0] * 4 + [1] * 4 + [2] * 2
    collector.shutdown()


def test_split_trajs_pads_trajectories_and_marks_valid_frames():
    collector = _ones_collector(max_steps=3, frames_per_batch=10, total_frames=10, split_trajs=True)
    batch = next(iter(collector))
    assert batch.shape == (3, 4)
    assert batch["collector", "mask"].sum(-1).tolist() == [4, 4, 2]
    assert batch["observation"].squeeze(-1).tolist() == [[0, 1, 2, 3], [0, 1, 2, 3], [0, 1, 0, 0]]
    collector.shutdown()


def test_same_seed_gives_same_batches_and_set_seed_returns_env_seed():
    def collect(seed):
        collector = SyncDataCollector(
            ContinuousActionVecMockEnv(), frames_per_batch=8, total_frames=16
        )
        out_seed = collector.set_seed(seed)
        torch.manual_seed(seed)
        batches = torch.cat(list(collector))
        collector.shutdown()
        return out_seed, batches

    seed_a, a = collect(5)
    seed_b, b = collect(5)
    assert seed_a == seed_b == ContinuousActionVecMockEnv().set_seed(5)
    _assert_same(a, b)


def test_default_batches_are_copies_and_return_same_td_reuses_the_buffer():
    collector = _ones_collector(frames_per_batch=4, total_frames=8)
    first, second = list(collector)
    assert first.get(TRAJ_IDS).data_ptr() != second.get(TRAJ_IDS).data_ptr()
    collector.shutdown()
    collector = _ones_collector(frames_per_batch=4, total_frames=8, return_same_td=True)
    first, second = list(collector)
    assert first is second
    collector.shutdown()


def test_policy_returning_a_new_tensordict_is_merged():
    env = CountingEnv(3)
    collector = SyncDataCollector(
        env,
        lambda td: td.clone().set("action", env.action_spec.zero() + 1),
        frames_per_batch=5,
        total_frames=5,
    )
    assert (next(iter(collector))["action"] == 1).all()
    collector.shutdown()


def test_collects_from_a_serial_env_built_by_a_factory():
    collector = SyncDataCollector(
        lambda n: SerialEnv(n, lambda: CountingEnv(3)),
        create_env_kwargs={"n": 2},
        frames_per_batch=8,
        total_frames=8,
    )
    batch = next(iter(collector))
    assert batch.shape == (2, 4)
    assert batch.get(TRAJ_IDS)[:, 0].tolist() == [0, 1]
    collector.shutdown()
    assert collector.env.is_closed


def test_parallel_env_batches_equal_serial_env_batches():
    start = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    factories = [lambda: CountingEnv(3), lambda: CountingEnv(4)]

    def policy(td):
        return td.set("action", torch.ones(2, 1, dtype=torch.int8))

    batches = []
    for env in (SerialEnv(2, factories), ParallelEnv(2, factories, mp_start_method=start)):
        collector = SyncDataCollector(env, policy, frames_per_batch=20, total_frames=40)
        batches.append(torch.cat(list(collector), -1))
        collector.shutdown()
        assert env.is_closed
    serial, parallel = batches
    _assert_same(parallel, serial)
    assert serial.get(TRAJ_IDS)[1].tolist() == [1] * 5 + [3] * 5 + [5] * 5 + [7] * 5


def test_update_policy_weights_copies_given_weights_into_policy():
    env = ContinuousActionVecMockEnv()
    policy = _linear_policy(env)
    collector = SyncDataCollector(env, policy, frames_per_batch=4, total_frames=4)
    collector.update_policy_weights_()  # runs the very policy given: nothing to copy
    other = nn.Linear(policy.module.in_features, policy.module.out_features)
    collector.update_policy_weights_(
        TensorDict.from_module(TensorDictModule(other, ["observation"], ["action"]))
    )
    torch.testing.assert_close(policy.module.weight, other.weight)
    collector.shutdown()


def test_progress_bar_counts_frames(capsys):
    pytest.importorskip("tqdm")
    collector = _ones_collector(frames_per_batch=5, total_frames=10, progress_bar=True)
    assert len(list(collector)) == 2
    assert "10/10" in capsys.readouterr().err
    collector.shutdown()


def test_iterating_after_shutdown_raises():
    collector = _ones_collector(frames_per_batch=5, total_frames=10)
    collector.shutdown()
    collector.shutdown()  # idempotent
    assert collector.env.is_closed
    with pytest.raises(RuntimeError, match=re.escape("SyncDataCollector was shut down")):
        iter(collector)


def test_shutdown_during_iteration_stops_the_generator():
    collector = _ones_collector(frames_per_batch=5, total_frames=20)
    batches = iter(collector)
    next(batches)
    collector.shutdown()
    with pytest.raises(RuntimeError, match=re.escape("SyncDataCollector was shut down")):
        next(batches)


def test_frames_per_batch_must_divide_between_envs_and_the_env_is_closed():
    env = CountingEnv(batch_size=[2])
    with pytest.raises(
        ValueError, match=re.escape("frames_per_batch=5 is not a multiple of the number of envs 2")
    ):
        SyncDataCollector(env, frames_per_batch=5, total_frames=10)
    assert env.is_closed


@pytest.mark.parametrize("frames_per_batch", [0, -4, 2.5])
def test_frames_per_batch_must_be_a_positive_int(frames_per_batch):
    with pytest.raises(
        ValueError,
        match=re.escape(f"frames_per_batch must be a positive int, got {frames_per_batch}."),
    ):
        SyncDataCollector(CountingEnv(), frames_per_batch=frames_per_batch)


def test_non_env_factory_raises_type_error():
    with pytest.raises(
        TypeError,
        match=re.escape("create_env_fn must be an EnvBase or a callable returning one, got dict."),
    ):
        SyncDataCollector(dict, frames_per_batch=5)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")
def test_policy_on_cuda_env_on_cpu_stores_on_cpu():
    env = ContinuousActionVecMockEnv()
    policy = _linear_policy(env)
    collector = SyncDataCollector(
        env, policy, frames_per_batch=8, total_frames=8, policy_device="cuda"
    )
    assert collector.policy is not policy
    assert next(collector.policy.parameters()).device.type == "cuda"
    batch = next(iter(collector))
    assert batch["action"].device.type == "cpu"
    with torch.no_grad():
        policy.module.weight.zero_()
    collector.update_policy_weights_()
    assert (collector.policy.module.weight == 0).all()
    collector.shutdown()


def test_batches_whose_keys_change_get_a_new_buffer():
    env = CountingEnv(3)
    calls = {"n": 0}

    def policy(td):
        calls["n"] += 1
        td.set("action", env.action_spec.zero() + 1)
        if calls["n"] > 4:
            td.set("extra", torch.zeros(2))
        return td

    collector = SyncDataCollector(
        env, policy, frames_per_batch=4, total_frames=8, return_same_td=True
    )
    first = next(iter(collector))
    assert "extra" not in first.keys()
    second = next(iter(collector))
    assert second is not first
    assert second["extra"].shape == (4, 2)
    assert second.get(TRAJ_IDS).tolist() == [1, 1, 1, 1]
    collector.shutdown()


def test_progress_bar_without_tqdm_names_the_extra_and_its_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # `import tqdm` now fails, as if absent
    collector = SyncDataCollector(
        CountingEnv(), None, frames_per_batch=4, total_frames=8, progress_bar=True
    )
    with pytest.raises(
        ImportError, match=r"rlcollectors\[progress\]\); install it with: pip install"
    ):
        next(iter(collector))
    collector.shutdown()

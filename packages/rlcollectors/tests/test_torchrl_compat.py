"""torchrl 0.4 arguments and methods of SyncDataCollector and MultiSyncDataCollector.

init_random_frames, postproc, reset_when_done, exploration_type / exploration_mode,
set_truncated, reset, next, iterator, state_dict / load_state_dict and
frames_per_batch_worker. MultiSync cases start workers with fork where offered (fast);
``test_multi_sync_options_cross_spawn`` runs the features that cross the process
boundary under spawn.
"""

from __future__ import annotations

import multiprocessing
import re
from collections.abc import Iterator

import pytest
import torch
from tensordict.nn import TensorDictModuleBase
from torch import nn

from rlcollectors import MultiSyncDataCollector, SyncDataCollector
from rlmocks import CountingEnv, NestedCountingEnv
from rlmodules import ExplorationType, exploration_type
from rltransforms import RewardScaling, TransformedEnv

TRAJ_IDS = ("collector", "traj_ids")
pytestmark = pytest.mark.filterwarnings("error")
FAST_START = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


class OnesPolicy(TensorDictModuleBase):
    """Always increments CountingEnv; counts its calls."""

    in_keys = []
    out_keys = ["action"]

    def __init__(self, action_spec):
        super().__init__()
        self.action_spec = action_spec
        self.calls = 0

    def forward(self, tensordict):
        self.calls += 1
        return tensordict.set("action", self.action_spec.zero() + 1)


class ModeIsOnePolicy(TensorDictModuleBase):
    """Action 1 under ExplorationType.MODE, 0 otherwise; records the types it ran under."""

    in_keys = []
    out_keys = ["action"]

    def __init__(self, action_spec):
        super().__init__()
        self.action_spec = action_spec
        self.seen = set()

    def forward(self, tensordict):
        mode = exploration_type()
        self.seen.add(mode)
        return tensordict.set("action", self.action_spec.zero() + int(mode == ExplorationType.MODE))


class KwargsCountingEnv(CountingEnv):
    """A CountingEnv whose reset takes the start value as a keyword argument."""

    def _reset(self, tensordict, start=None):
        out = super()._reset(tensordict)
        if start is not None:
            self.count.fill_(start)
            out.set("observation", self.count.clone())
        return out


def _truncating_env(max_steps=100, batch_size=()):
    return CountingEnv(max_steps, batch_size=list(batch_size)).add_truncated_keys()


def _obs(batch):
    return batch["next", "observation"].squeeze(-1).tolist()


@pytest.fixture
def make() -> Iterator:
    """Builds collectors and shuts every one down after the test, passed or failed."""
    made = []

    def build(cls, *args, **kwargs):
        collector = cls(*args, **kwargs)
        made.append(collector)
        return collector

    yield build
    for collector in made:
        collector.shutdown()


def _ones_sync(make, env=None, **kwargs):
    env = env if env is not None else CountingEnv(max_steps=100)
    policy = OnesPolicy(env.action_spec)
    return make(SyncDataCollector, env, policy, **kwargs), policy


def _multi(make, n=2, max_steps=100, start=FAST_START, **kwargs):
    fns = [lambda: CountingEnv(max_steps=max_steps)] * n
    policy = OnesPolicy(CountingEnv().action_spec)
    return make(MultiSyncDataCollector, fns, policy, mp_start_method=start, **kwargs)


# ---------------------------------------------------------------- init_random_frames


def test_sync_init_random_frames_skips_the_policy_for_whole_batches():
    env = CountingEnv(max_steps=100)
    policy = OnesPolicy(env.action_spec)
    collector = SyncDataCollector(
        env, policy, frames_per_batch=10, total_frames=40, init_random_frames=15
    )
    try:
        torch.manual_seed(0)
        batches, calls = [], []
        for batch in collector:
            batches.append(batch)
            calls.append(policy.calls)
        # 15 frames round up to two whole batches of random actions, then the policy runs
        assert calls == [0, 0, 10, 20]
        random_actions = torch.cat([b["action"] for b in batches[:2]])
        assert set(random_actions.unique().tolist()) == {0, 1}  # drawn from the Binary spec
        assert (torch.cat([b["action"] for b in batches[2:]]) == 1).all()
    finally:
        collector.shutdown()


@pytest.mark.parametrize("value", [None, 0, -1])
def test_sync_no_init_random_frames_runs_the_policy_from_the_start(make, value):
    collector, policy = _ones_sync(make, frames_per_batch=5, init_random_frames=value)
    collector.next()
    assert policy.calls == 5


@pytest.mark.parametrize("value", ["10", 2.5, True])
def test_init_random_frames_must_be_an_int(make, value):
    env = CountingEnv()
    with pytest.raises(TypeError, match="init_random_frames must be an int or None, got"):
        make(SyncDataCollector, env, frames_per_batch=5, init_random_frames=value)
    with pytest.raises(TypeError, match="init_random_frames must be an int or None"):
        make(MultiSyncDataCollector, [CountingEnv], frames_per_batch=5, init_random_frames=value)


def test_multi_sync_init_random_frames_counts_all_workers_frames(make):
    collector = _multi(make, frames_per_batch=20, total_frames=60, init_random_frames=30)
    collector.set_seed(0)
    actions = [batch["action"] for batch in collector]
    # 30 frames of both workers round up to two batches of 20
    assert all(set(a.unique().tolist()) == {0, 1} for a in actions[:2])
    assert (actions[2] == 1).all()


# ---------------------------------------------------------------- postproc


def _double_obs(batch):
    return batch.set("double", batch["next", "observation"] * 2)


@pytest.mark.parametrize("return_same_td", [False, True])
def test_sync_postproc_is_applied_to_every_batch(make, return_same_td):
    collector, _ = _ones_sync(
        make,
        frames_per_batch=4,
        total_frames=8,
        postproc=_double_obs,
        return_same_td=return_same_td,
    )
    for batch in collector:
        assert (batch["double"] == 2 * batch["next", "observation"]).all()


def test_sync_postproc_entries_never_reach_the_buffer(make):
    """With return_same_td, entries a postproc adds do not linger in later batches."""
    calls = []

    def first_only(batch):
        calls.append(batch)
        return batch.set("extra", torch.zeros(batch.shape)) if len(calls) == 1 else batch

    collector, _ = _ones_sync(
        make, frames_per_batch=4, total_frames=8, postproc=first_only, return_same_td=True
    )
    first, second = list(collector)
    assert "extra" in first.keys()
    assert "extra" not in second.keys()


def test_sync_postproc_sees_split_trajectories(make):
    collector, _ = _ones_sync(
        make,
        env=CountingEnv(max_steps=2),
        frames_per_batch=8,
        split_trajs=True,
        postproc=lambda b: b.set("valid", b["collector", "mask"].sum(-1, True).expand(b.shape)),
    )
    batch = collector.next()
    assert batch["valid"][:, 0].tolist() == [3, 3, 2]


def test_postproc_must_be_callable_and_return_a_tensordict(make):
    with pytest.raises(TypeError, match="postproc must be a callable .* got int"):
        make(SyncDataCollector, CountingEnv(), frames_per_batch=4, postproc=3)
    with pytest.raises(TypeError, match="postproc must be a callable .* got str"):
        make(MultiSyncDataCollector, [CountingEnv], frames_per_batch=4, postproc="x")
    collector, _ = _ones_sync(make, frames_per_batch=4, postproc=lambda batch: batch["action"])
    for _ in range(3):  # each call raises: the failed iterator is not mistaken for the end
        with pytest.raises(
            TypeError, match="postproc must return a tensordict, it returned Tensor"
        ):
            collector.next()


class RecordingMove(nn.Module):
    """A postproc module that records where it is moved."""

    def __init__(self):
        super().__init__()
        self.moves = []

    def to(self, *args, **kwargs):
        self.moves.append(args)
        return super().to(*args, **kwargs)

    def forward(self, batch):
        return batch


def test_sync_module_postproc_moves_to_the_storing_device(make):
    postproc = RecordingMove()
    _ones_sync(make, frames_per_batch=4, postproc=postproc, storing_device="cpu")
    assert postproc.moves == [(torch.device("cpu"),)]


def test_multi_sync_postproc_runs_on_the_gathered_batch(make):
    seen = []

    def record(batch):
        seen.append(batch.shape)
        return _double_obs(batch)

    collector = _multi(make, frames_per_batch=8, total_frames=16, postproc=record)
    for batch in collector:
        assert (batch["double"] == 2 * batch["next", "observation"]).all()
    assert seen == [torch.Size([8]), torch.Size([8])]


# ---------------------------------------------------------------- reset_when_done


def test_reset_when_done_false_is_refused_as_in_torchrl_0_4(make):
    with pytest.raises(ValueError, match="reset_when_done=False is not supported"):
        make(SyncDataCollector, CountingEnv(), frames_per_batch=4, reset_when_done=False)
    with pytest.raises(ValueError, match="reset_when_done=False is not supported"):
        make(MultiSyncDataCollector, [CountingEnv], frames_per_batch=4, reset_when_done=False)


def test_reset_when_done_true_resets_done_envs(make):
    collector, _ = _ones_sync(
        make, env=CountingEnv(max_steps=2), frames_per_batch=6, reset_when_done=True
    )
    assert collector.reset_when_done is True
    assert _obs(collector.next()) == [1, 2, 3, 1, 2, 3]


# ---------------------------------------------------------------- exploration_type


@pytest.mark.parametrize(
    "kwargs, expected",
    [
        ({}, ExplorationType.RANDOM),
        ({"exploration_type": ExplorationType.MODE}, ExplorationType.MODE),
        ({"exploration_type": ExplorationType.MEAN}, ExplorationType.MEAN),
    ],
)
def test_sync_policy_runs_under_the_exploration_type(make, kwargs, expected):
    env = CountingEnv(max_steps=100)
    policy = ModeIsOnePolicy(env.action_spec)
    collector = make(SyncDataCollector, env, policy, frames_per_batch=4, **kwargs)
    batch = collector.next()
    assert policy.seen == {expected}
    assert (batch["action"] == int(expected == ExplorationType.MODE)).all()


def test_exploration_type_is_only_set_while_collecting(make):
    env = CountingEnv(max_steps=100)
    collector = make(
        SyncDataCollector,
        env,
        ModeIsOnePolicy(env.action_spec),
        frames_per_batch=4,
        exploration_type=ExplorationType.MODE,
    )
    before = exploration_type()
    collector.next()
    assert exploration_type() == before


def test_exploration_mode_is_a_deprecated_alias(make):
    env = CountingEnv(max_steps=100)
    policy = ModeIsOnePolicy(env.action_spec)
    with pytest.warns(DeprecationWarning, match="exploration_type=ExplorationType.MODE"):
        collector = make(
            SyncDataCollector, env, policy, frames_per_batch=4, exploration_mode="mode"
        )
    assert collector.exploration_type == ExplorationType.MODE
    assert (collector.next()["action"] == 1).all()
    with pytest.warns(DeprecationWarning, match="exploration_mode is deprecated"):
        multi = make(
            MultiSyncDataCollector,
            [CountingEnv],
            frames_per_batch=4,
            exploration_mode="mean",
            mp_start_method=FAST_START,
        )
    assert multi.exploration_type == ExplorationType.MEAN


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"exploration_type": "mode"}, TypeError, "exploration_type must be one of .*'MODE'"),
        ({"exploration_mode": "greedy"}, ValueError, "exploration_mode must be one of .*'mode'"),
        (
            {"exploration_type": ExplorationType.MEAN, "exploration_mode": "mode"},
            ValueError,
            "exploration_mode='mode' and exploration_type=.*MEAN disagree",
        ),
    ],
)
@pytest.mark.parametrize("cls", [SyncDataCollector, MultiSyncDataCollector])
def test_bad_exploration_arguments(make, cls, kwargs, error, message):
    with pytest.raises(error, match=message):
        make(
            cls,
            [CountingEnv] if cls is MultiSyncDataCollector else CountingEnv(),
            frames_per_batch=4,
            **kwargs,
        )


def test_multi_sync_workers_run_under_the_exploration_type(make):
    env = CountingEnv(max_steps=100)
    collector = make(
        MultiSyncDataCollector,
        [CountingEnv, CountingEnv],
        ModeIsOnePolicy(env.action_spec),
        frames_per_batch=8,
        exploration_type=ExplorationType.MODE,
        mp_start_method=FAST_START,
    )
    assert (collector.next()["action"] == 1).all()


# ---------------------------------------------------------------- set_truncated


def test_sync_set_truncated_marks_the_last_step_of_each_batch(make):
    collector, _ = _ones_sync(
        make, env=_truncating_env(batch_size=(2,)), frames_per_batch=8, set_truncated=True
    )
    first, second = collector.next(), collector.next()
    for batch in (first, second):
        expected = torch.tensor([False, False, False, True]).expand(2, 4)
        assert (batch["next", "truncated"].squeeze(-1) == expected).all()
        assert (batch["next", "done"].squeeze(-1) == expected).all()
        assert not batch["next", "terminated"].any()
    # the env is not reset: the next batch carries on the same trajectories (torchrl 0.4)
    assert _obs(second) == [[5, 6, 7, 8], [5, 6, 7, 8]]
    assert (second[TRAJ_IDS] == first[TRAJ_IDS]).all()


def test_set_truncated_keeps_earlier_terminations_done(make):
    collector, _ = _ones_sync(
        make, env=_truncating_env(max_steps=2), frames_per_batch=7, set_truncated=True
    )
    batch = collector.next()
    done = batch["next", "done"].squeeze(-1).tolist()
    terminated = batch["next", "terminated"].squeeze(-1).tolist()
    assert terminated == [False, False, True, False, False, True, False]
    assert done == [False, False, True, False, False, True, True]


def test_set_truncated_finds_nested_truncated_keys(make):
    env = NestedCountingEnv(max_steps=100).add_truncated_keys()
    collector = make(SyncDataCollector, env, frames_per_batch=4, set_truncated=True)
    batch = collector.next()
    truncated = batch["next", "data", "truncated"]
    assert truncated[-1].all() and not truncated[:-1].any()
    assert batch["next", "data", "done"][-1].all()


def test_without_set_truncated_the_last_step_is_left_alone(make):
    collector, _ = _ones_sync(make, env=_truncating_env(), frames_per_batch=4)
    assert not collector.next()["next", "truncated"].any()


def test_set_truncated_needs_a_truncated_key(make):
    env = CountingEnv()
    with pytest.raises(RuntimeError, match=r"no truncated key could be found .*add_truncated_keys"):
        make(SyncDataCollector, env, frames_per_batch=4, set_truncated=True)
    assert env.is_closed  # the failed collector closed its env
    with pytest.raises(RuntimeError, match="no truncated key could be found"):
        make(
            MultiSyncDataCollector,
            [CountingEnv],
            frames_per_batch=4,
            set_truncated=True,
            mp_start_method=FAST_START,
        )


def test_multi_sync_set_truncated_marks_each_workers_last_step(make):
    collector = make(
        MultiSyncDataCollector,
        [_truncating_env, _truncating_env],
        frames_per_batch=8,
        cat_results="stack",
        set_truncated=True,
        mp_start_method=FAST_START,
    )
    truncated = collector.next()["next", "truncated"].squeeze(-1)
    assert truncated.tolist() == [[False, False, False, True]] * 2


# ---------------------------------------------------------------- reset


def test_sync_reset_starts_new_trajectories(make):
    collector, _ = _ones_sync(make, frames_per_batch=3)
    first = collector.next()
    collector.reset()
    second = collector.next()
    assert _obs(first) == _obs(second) == [1, 2, 3]
    assert second[TRAJ_IDS].tolist() == [1, 1, 1]


def test_sync_reset_index_resets_only_those_envs(make):
    collector, _ = _ones_sync(make, env=CountingEnv(100, batch_size=[3]), frames_per_batch=6)
    first = collector.next()
    collector.reset(index=1)
    second = collector.next()
    assert _obs(second) == [[3, 4], [1, 2], [3, 4]]
    assert second[TRAJ_IDS][:, 0].tolist() == [0, 3, 2]
    assert first[TRAJ_IDS][:, 0].tolist() == [0, 1, 2]
    collector.reset(index=torch.tensor([True, False, True]))
    assert _obs(collector.next()) == [[1, 2], [3, 4], [1, 2]]


def test_sync_reset_passes_kwargs_to_the_env(make):
    collector, _ = _ones_sync(make, env=KwargsCountingEnv(100), frames_per_batch=3)
    collector.next()
    collector.reset(start=10)
    assert _obs(collector.next()) == [11, 12, 13]


def test_sync_reset_errors(make):
    collector, _ = _ones_sync(make, frames_per_batch=3)
    with pytest.raises(RuntimeError, match=re.escape("env.batch_size=()) with an index")):
        collector.reset(index=0)  # before the first batch too
    collector.next()
    with pytest.raises(RuntimeError, match=re.escape("env.batch_size=()) with an index")):
        collector.reset(index=0)
    batched, _ = _ones_sync(make, env=CountingEnv(batch_size=[2]), frames_per_batch=4)
    batched.next()
    with pytest.raises(
        IndexError, match=re.escape("reset index 5 does not select envs of env.batch_size=(2,)")
    ):
        batched.reset(index=5)
    collector.shutdown()
    with pytest.raises(RuntimeError, match="was shut down"):
        collector.reset()


def test_multi_sync_reset_resets_the_flagged_workers(make):
    collector = _multi(make, frames_per_batch=6, cat_results="stack")
    collector.next()
    collector.reset([False, True])
    assert _obs(collector.next()) == [[4, 5, 6], [1, 2, 3]]
    collector.reset()
    assert _obs(collector.next()) == [[1, 2, 3], [1, 2, 3]]
    with pytest.raises(
        ValueError, match=re.escape("reset_idx must be None or a sequence of 2 bools")
    ):
        collector.reset([True])
    assert _obs(collector.next()) == [[4, 5, 6], [4, 5, 6]]  # a bad reset_idx changes nothing


# ---------------------------------------------------------------- next / iterator


def test_sync_next_continues_one_iterator_and_returns_none_at_the_end(make):
    collector, _ = _ones_sync(make, frames_per_batch=3, total_frames=6)
    assert _obs(collector.next()) == [1, 2, 3]
    assert _obs(collector.next()) == [4, 5, 6]
    assert collector.next() is None
    assert collector.next() is None
    collector.shutdown()
    with pytest.raises(RuntimeError, match="SyncDataCollector was shut down"):
        collector.next()


def test_iterator_is_iter(make):
    collector, _ = _ones_sync(make, frames_per_batch=3, total_frames=9)
    iterator = collector.iterator()
    assert [_obs(b) for b in iterator] == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    assert list(collector.iterator()) == []


def test_multi_sync_next_and_iterator(make):
    collector = _multi(make, frames_per_batch=4, total_frames=8)
    assert _obs(collector.next()) == [1, 2, 1, 2]
    assert [_obs(b) for b in collector.iterator()] == [[3, 4, 3, 4]]
    assert collector.next() is None
    collector.shutdown()
    with pytest.raises(RuntimeError, match="MultiSyncDataCollector was shut down"):
        collector.next()


# ---------------------------------------------------------------- state_dict


class LinearOnesPolicy(OnesPolicy):
    """OnesPolicy with weights (the state to save)."""

    def __init__(self, action_spec, seed):
        super().__init__(action_spec)
        torch.manual_seed(seed)
        self.linear = nn.Linear(2, 2)


def _scaled_env(loc=0.0):
    return TransformedEnv(CountingEnv(max_steps=100), RewardScaling(loc=loc, scale=1.0))


def test_sync_state_dict_holds_env_policy_and_counts(make):
    env = _scaled_env(loc=3.0)
    policy = LinearOnesPolicy(env.action_spec, seed=0)
    collector = make(SyncDataCollector, env, policy, frames_per_batch=4, total_frames=12)
    collector.next(), collector.next()
    state = collector.state_dict()
    assert list(state) == ["policy_state_dict", "env_state_dict", "frames", "iter"]
    assert (state["frames"], state["iter"]) == (8, 1)
    assert state["env_state_dict"]["loc"].item() == 3.0
    assert (state["policy_state_dict"]["linear.weight"] == policy.linear.weight).all()

    other_env = _scaled_env(loc=0.0)
    other = make(
        SyncDataCollector,
        other_env,
        LinearOnesPolicy(other_env.action_spec, seed=1),
        frames_per_batch=4,
        total_frames=12,
    )
    other.load_state_dict(state)
    assert (other.policy.linear.weight == policy.linear.weight).all()
    assert (other.next()["next", "reward"] == 3.0).all()  # the transform's loc was loaded
    assert other.frames == 12
    assert other.next() is None  # 8 frames were restored: one batch was left


def test_sync_state_dict_of_a_plain_env_and_policy_free_collector(make):
    collector = make(SyncDataCollector, CountingEnv(), frames_per_batch=4)
    collector.next()
    state = collector.state_dict()
    assert list(state) == ["env_state_dict", "frames", "iter"]
    assert state["env_state_dict"] == {}
    fresh = make(SyncDataCollector, CountingEnv(), frames_per_batch=4)
    fresh.load_state_dict(state)
    assert fresh.frames == 4


def test_sync_load_state_dict_errors(make):
    env = _scaled_env()
    collector = make(
        SyncDataCollector, env, LinearOnesPolicy(env.action_spec, 0), frames_per_batch=4
    )
    state = collector.state_dict()
    partial = {k: v for k, v in state.items() if k != "policy_state_dict"}
    with pytest.raises(KeyError, match="state_dict has no 'policy_state_dict' entry"):
        collector.load_state_dict(partial)
    before = collector.policy.linear.weight.clone()
    collector.load_state_dict({"frames": 20, "iter": 4}, strict=False)
    assert collector.frames == 20 and (collector.policy.linear.weight == before).all()
    with pytest.raises(KeyError, match="state_dict has no 'frames' entry"):
        collector.load_state_dict({"iter": 0}, strict=False)

    no_policy = make(SyncDataCollector, CountingEnv(), frames_per_batch=4)
    with pytest.raises(TypeError, match="policy \\(NoneType\\) has no load_state_dict"):
        no_policy.load_state_dict(state)


def _multi_with_weights(make, seed, start=FAST_START, **kwargs):
    env = _scaled_env()
    return make(
        MultiSyncDataCollector,
        [_scaled_env, _scaled_env],
        LinearOnesPolicy(env.action_spec, seed),
        frames_per_batch=8,
        mp_start_method=start,
        **kwargs,
    )


def _check_multi_state_round_trip(make, collector, other_start):
    collector.next()
    state = collector.state_dict()
    assert list(state) == ["worker0", "worker1", "frames", "iter"]
    assert (state["frames"], state["iter"]) == (8, 0)
    weight = collector.policy.linear.weight
    for idx in range(2):
        worker = state[f"worker{idx}"]
        assert worker["frames"] == 4
        assert (worker["policy_state_dict"]["linear.weight"] == weight).all()
        assert "loc" in worker["env_state_dict"]
    state["worker1"]["env_state_dict"]["loc"].fill_(5.0)  # a copy: the worker is unchanged
    assert collector.state_dict()["worker1"]["env_state_dict"]["loc"].item() == 0.0

    other = _multi_with_weights(make, seed=1, start=other_start, cat_results="stack")
    other.load_state_dict(state)
    loaded = other.state_dict()
    assert loaded["frames"] == 8
    assert (loaded["worker0"]["policy_state_dict"]["linear.weight"] == weight).all()
    rewards = other.next()["next", "reward"].squeeze(-1)
    assert (rewards[0] == 0).all() and (rewards[1] == 5).all()


def test_multi_sync_state_dict_round_trip(make):
    collector = _multi_with_weights(make, seed=0)
    _check_multi_state_round_trip(make, collector, FAST_START)


def test_multi_sync_load_state_dict_checks_the_workers(make):
    collector = _multi_with_weights(make, seed=0)
    with pytest.raises(KeyError, match="state_dict has no 'worker1' entry .*2 workers"):
        collector.load_state_dict({"worker0": {}, "frames": 0, "iter": 0})
    assert collector.next() is not None  # still running: nothing was sent


# ---------------------------------------------------------------- frames_per_batch_worker


def test_frames_per_batch_worker(make):
    collector = _multi(make, n=2, frames_per_batch=12, cat_results="stack")
    assert collector.frames_per_batch_worker == 6
    assert collector.next().shape == (2, 6)


def test_multi_sync_split_trajs_counts_frames_not_padding(make):
    collector = _multi(make, max_steps=2, frames_per_batch=8, total_frames=16, split_trajs=True)
    batches = list(collector)
    assert len(batches) == 2
    assert batches[0].numel() > 8  # padded
    assert collector.frames == 16


# ---------------------------------------------------------------- spawn


def test_multi_sync_options_cross_spawn(make):
    """init_random_frames, exploration_type, set_truncated, postproc and state_dict under spawn."""
    env = _truncating_env()
    collector = make(
        MultiSyncDataCollector,
        [_truncating_env, _truncating_env],
        ModeIsOnePolicy(env.action_spec),
        frames_per_batch=20,
        total_frames=40,
        init_random_frames=20,
        exploration_type=ExplorationType.MODE,
        set_truncated=True,
        postproc=_double_obs,
        cat_results="stack",
        mp_start_method="spawn",
    )
    collector.set_seed(0)
    first, second = list(collector)
    assert set(first["action"].unique().tolist()) == {0, 1}  # random
    assert (second["action"] == 1).all()  # the policy, under MODE
    for batch in (first, second):
        assert batch["next", "truncated"][:, -1].all()
        assert not batch["next", "truncated"][:, :-1].any()
        assert (batch["double"] == 2 * batch["next", "observation"]).all()
    state = collector.state_dict()
    assert (state["frames"], state["worker0"]["frames"]) == (40, 20)
    collector.load_state_dict(dict(state, frames=0))
    assert collector.frames == 0
    assert set(collector.next()["action"].unique().tolist()) == {0, 1}  # random again


def test_multi_sync_state_dict_round_trip_under_spawn(make):
    """States read from spawned workers load into other workers."""
    collector = _multi_with_weights(make, seed=0, start="spawn")
    _check_multi_state_round_trip(make, collector, FAST_START)


def test_multi_sync_load_state_dict_failing_in_a_worker_shuts_down(make):
    collector = _multi_with_weights(make, seed=0)
    state = collector.state_dict()
    state["worker1"]["policy_state_dict"]["linear.weight"] = torch.zeros(3, 3)
    with pytest.raises(RuntimeError, match=r"(?s)worker 1.*size mismatch for linear.weight"):
        collector.load_state_dict(state)
    with pytest.raises(RuntimeError, match="MultiSyncDataCollector was shut down"):
        collector.next()


def test_docstring_examples_run():
    import doctest

    import rlcollectors._sync

    result = doctest.testmod(rlcollectors._sync, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0

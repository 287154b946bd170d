"""Behaviours SerialEnv and ParallelEnv share, each checked on both (ParallelEnv under fork)."""

from __future__ import annotations

import re

import pytest
import torch
from batched_test_envs import FACTORIES, ExtraObsCountingEnv, StartStateEnv
from tensordict import LazyStackedTensorDict, TensorDict, dense_stack_tds

from rlbatched import ParallelEnv, SerialEnv
from rlbatched._batched_base import (
    BATCH_ERROR,
    MEMMAP_ERROR,
    NOT_STARTED_ERROR,
    NUM_FNS_ERROR,
    NUM_KWARGS_ERROR,
    NUM_WORKERS_ERROR,
    PIN_MEMORY_ERROR,
    POLICY_PROOF_WARNING,
    SHARE_INDIVIDUAL_TD_ERROR,
    STEP_WHEN_DONE_ERROR,
)
from rlmocks import (
    ContinuousActionVecMockEnv,
    CountingEnv,
    CountingEnvCountPolicy,
    DiscreteActionConvMockEnv,
    DiscreteActionVecMockEnv,
    HeterogeneousCountingEnv,
    HeterogeneousCountingEnvPolicy,
    MockBatchedLockedEnv,
    MultiKeyCountingEnv,
    MultiKeyCountingEnvPolicy,
    NestedCountingEnv,
)
from rlmocks.testing import check_rollout_consistency_multikey_env, rand_reset


def _ones_action(env):
    action = env.action_spec.zero()
    action[:] = 1
    return TensorDict({"action": action}, batch_size=env.batch_size, device=env.device)


@pytest.mark.parametrize("env_batch_size", [(), (32,), (32, 1), (32, 0)])
def test_batch_size_prepends_workers(make_batched, env_batch_size):
    """The batch size is (num_workers, *sub-env batch size), for any sub-env batch."""
    env = MockBatchedLockedEnv(device="cpu", batch_size=torch.Size(env_batch_size))
    batched = make_batched(2, lambda: env)
    assert batched.is_closed  # nothing started yet
    assert batched.batch_size == (2, *env_batch_size)
    # a SerialEnv read its sub-env at construction; a ParallelEnv's workers report theirs
    assert batched.is_closed == isinstance(batched, SerialEnv)


@pytest.mark.parametrize("env_batch_size", [(), (4,), (2, 3)])
def test_rollout_shapes_and_time_dim(make_batched, env_batch_size):
    """Rollouts have shape (workers, *batch, T), last dim named "time"."""
    env = make_batched(2, lambda: CountingEnv(max_steps=10, batch_size=env_batch_size))
    out = env.rollout(4)
    assert out.shape == (2, *env_batch_size, 4)
    assert out.names[-1] == "time"
    assert (out[..., 1:]["observation"] == out[..., :-1]["next", "observation"]).all()


@pytest.mark.parametrize("break_when_any_done", [True, False])
def test_rollout_break_when_any_done(make_batched, break_when_any_done):
    """Workers of different horizons stop together, or reset independently."""
    fns = [lambda m=m: CountingEnv(max_steps=m) for m in (2, 4)]
    env = make_batched(2, fns)
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    out = env.rollout(6, policy, break_when_any_done=break_when_any_done)
    if break_when_any_done:
        assert out.shape == (2, 3)
    else:
        assert out.shape == (2, 6)
        assert out["next", "done"].squeeze(-1).sum(-1).tolist() == [2, 1]


def test_step_returns_copies(make_batched):
    """What step returns is the caller's: never shared, never overwritten by the next step."""
    env = make_batched(2, CountingEnv)
    td = env.reset()
    assert not td.is_shared()
    first = env.step(_ones_action(env))
    assert not first.is_shared()
    snapshot = first["next", "observation"].clone()
    env.step(_ones_action(env))
    assert (first["next", "observation"] == snapshot).all()


def test_wrong_batch_raises_before_stepping(make_batched):
    """N-1 actions for N workers raise RuntimeError, and no worker stepped."""
    env = make_batched(3, CountingEnv)
    env.reset()
    bad = TensorDict({"action": torch.ones(2, 1, dtype=torch.int)}, batch_size=[2])
    with pytest.raises(
        RuntimeError, match=re.escape("Expected a tensordict with shape==env.batch_size")
    ):
        env.step(bad)
    out = env.step(_ones_action(env))
    assert (out["next", "observation"] == 1).all()
    assert BATCH_ERROR.startswith("Expected a tensordict with shape==env.batch_size")


def test_list_of_same_callable_is_single_task(make_batched):
    """A list repeating one callable is a single task; different callables are not."""
    env = make_batched(2, [CountingEnv, CountingEnv])
    assert env._single_task
    env = make_batched(2, [CountingEnv, lambda: CountingEnv()])
    assert not env._single_task
    assert not env.share_individual_td  # same specs: one dense shared tensordict


def test_multi_task_keys_only_where_present(make_batched):
    """Different tasks give lazily stacked specs and outputs with per-worker keys."""
    env = make_batched(2, [CountingEnv, ExtraObsCountingEnv])
    assert not env._single_task
    out = env.rollout(3, return_contiguous=False)
    assert isinstance(out, LazyStackedTensorDict)
    assert "extra" in out[1].keys()
    assert "extra" not in out[0].keys()
    assert (out[1]["next", "extra"] == 1).all()
    assert ("next", "extra") in env.observation_spec[1].keys(
        True
    ) or "extra" in env.observation_spec[1].keys()


@pytest.mark.parametrize("kind", ["serial", "fork"])
def test_share_individual_td_false_rejected_for_multi_task(kind):
    """share_individual_td=False with different tasks raises ValueError."""
    with pytest.raises(ValueError, match=re.escape(SHARE_INDIVIDUAL_TD_ERROR)):
        FACTORIES[kind](2, [CountingEnv, ExtraObsCountingEnv], share_individual_td=False)
    assert SHARE_INDIVIDUAL_TD_ERROR.startswith("share_individual_td must be set to None")


def test_share_individual_td_true_single_task(make_batched):
    """share_individual_td=True with one task still steps and resets."""
    env = make_batched(2, CountingEnv, share_individual_td=True)
    out = env.rollout(3)
    assert out.shape == (2, 3)


def test_create_env_kwargs_and_update_kwargs_agree(make_batched):
    """Per-worker kwargs given at construction or through update_kwargs build the same envs."""
    env1 = make_batched(2, _make_seeded, create_env_kwargs=[{"seed": 100}, {"seed": 101}])
    env2 = make_batched(2, _make_seeded)
    env2.update_kwargs([{"seed": 100}, {"seed": 101}])
    env1.start()
    env2.start()
    assert env1.counter == env2.counter


def _make_seeded(seed=None):
    env = DiscreteActionConvMockEnv()
    if seed is not None:
        env.set_seed(seed)
    return env


def test_create_env_kwargs_dict_applies_to_all(make_batched):
    """A single kwargs dict is given to every worker."""
    env = make_batched(2, CountingEnv, create_env_kwargs={"max_steps": 1})
    out = env.rollout(5, CountingEnvCountPolicy(env.action_spec, env.action_key))
    assert out.shape == (2, 2)


def test_set_seed_chains_and_matches_serial(make_fork, make_serial):
    """Seeding gives worker i the seed returned by worker i-1; Serial and Parallel agree."""
    penv = make_fork(3, DiscreteActionVecMockEnv)
    senv = make_serial(3, DiscreteActionVecMockEnv)
    single = DiscreteActionVecMockEnv()
    expected = 0
    for _ in range(3):
        expected = single.set_seed(expected)
    assert penv.set_seed(0) == senv.set_seed(0) == expected
    torch.manual_seed(0)
    rp = penv.rollout(5)
    torch.manual_seed(0)
    rs = senv.rollout(5)
    torch.testing.assert_close(rp, rs)
    assert not (rp["observation"][0] == rp["observation"][1]).all()  # seeds differ per worker
    assert penv.set_seed(7, static_seed=True) == senv.set_seed(7, static_seed=True) == 7


@pytest.mark.parametrize("batch_size", [(), (4,), (2, 3)])
@pytest.mark.parametrize("n_workers", [1, 2])
def test_partial_reset_flag(make_batched, batch_size, n_workers, max_steps=3):
    """Only the entries flagged by "_reset" are reset; the others keep their values."""
    torch.manual_seed(1)
    env = make_batched(n_workers, lambda: CountingEnv(max_steps=max_steps, batch_size=batch_size))
    env.set_seed(1)
    for i in range(max_steps):
        td = env.step(_ones_action(env))
        assert (td["next", "done"] == 0).all()
        assert (td["next", "observation"] == i + 1).all()
    td = env.step(_ones_action(env))
    assert (td["next", "done"] == 1).all()
    td_reset = TensorDict(rand_reset(env), batch_size=env.batch_size, device=env.device)
    td_reset.update(td.get("next").exclude("reward"))
    reset = td_reset["_reset"]
    td_reset = env.reset(td_reset)
    assert (td_reset["done"][reset] == 0).all()
    assert (td_reset["observation"][reset] == 0).all()
    assert (td_reset["done"][~reset] == 1).all()
    assert (td_reset["observation"][~reset] == max_steps + 1).all()


def test_full_reset_gives_the_input_to_every_sub_env(make_batched):
    """A reset without "_reset" entries still hands each sub-env its slice of the input."""
    env = make_batched(2, StartStateEnv)
    assert env.reset()["observation"].tolist() == [[0.0], [0.0]]
    out = env.reset(TensorDict({"start": torch.tensor([[3.0], [5.0]])}, [2]))
    assert out["observation"].tolist() == [[3.0], [5.0]]
    rollout = env.rollout(2, tensordict=out, auto_reset=False)
    assert rollout["next", "observation"][:, -1].tolist() == [[5.0], [7.0]]


@pytest.mark.parametrize("nested_obs_action", [True, False])
@pytest.mark.parametrize("nested_done", [True, False])
def test_nested_keys(make_batched, nested_obs_action, nested_done, n_envs=2, nested_dim=5):
    """Nested observations, actions and done flags keep their nested batch dims."""
    env = make_batched(
        n_envs,
        lambda: NestedCountingEnv(
            nest_done=nested_done,
            nest_reward=True,
            nest_obs_action=nested_obs_action,
            batch_size=(4,),
            nested_dim=nested_dim,
        ),
    )
    env.set_seed(1)
    td = env.reset()
    assert td.batch_size == (n_envs, 4)
    policy = CountingEnvCountPolicy(env.full_action_spec[env.action_key], env.action_key)
    td = env.rollout(3, policy)
    assert td["next", "data"].batch_size == (n_envs, 4, 3, nested_dim)
    if nested_obs_action:
        assert (td[..., -1]["data", "states"] == 2).all()
    else:
        assert (td[..., -1]["observation"] == 2).all()


@pytest.mark.parametrize("break_when_any_done", [False, True])
def test_heterogeneous_sub_env(make_batched, break_when_any_done, steps=4):
    """Sub-envs with lazily stacked specs of their own batch and roll out correctly."""
    env = make_batched(2, lambda: HeterogeneousCountingEnv(batch_size=(1, 2)))
    policy = HeterogeneousCountingEnvPolicy(env.input_spec["full_action_spec"])
    env.reset()
    td = env.rollout(
        steps, policy=policy, return_contiguous=False, break_when_any_done=break_when_any_done
    )
    td = dense_stack_tds(td)
    for i in range(HeterogeneousCountingEnv().n_nested_dim):
        obs = td["lazy"][(0, 0, 0)][..., i][f"tensor_{i}"]
        for _ in range(i + 1):
            obs = obs.mean(-1)
        assert (obs == torch.arange(steps)).all()
        assert (td["lazy"][..., i]["action"] == 1).all()


@pytest.mark.parametrize("batch_size", [(), (2,)])
@pytest.mark.parametrize("max_steps", [2, 5])
def test_multi_key_sub_env(make_batched, batch_size, max_steps):
    """Several action, reward and done groups stay consistent through batching."""
    torch.manual_seed(0)
    env = make_batched(2, lambda: MultiKeyCountingEnv(batch_size=batch_size, max_steps=max_steps))
    policy = MultiKeyCountingEnvPolicy(full_action_spec=env.input_spec["full_action_spec"])
    env.reset()
    td = env.rollout(5, policy=policy)
    check_rollout_consistency_multikey_env(td, max_steps=max_steps)


def test_attribute_method_property_forwarding(make_batched):
    """Attributes, methods and properties of the sub-envs come back one per worker."""
    env = make_batched(2, DiscreteActionVecMockEnv)
    with pytest.raises(AttributeError, match=re.escape("forwarded only once the env is started")):
        env.custom_attr  # noqa: B018
    env.reset()
    assert env.custom_fun() == [0, 0]
    assert env.custom_attr == [1, 1]
    assert env.custom_prop == [2, 2]
    assert "{name!r}" in NOT_STARTED_ERROR


def test_close_twice_and_reopen_on_reset(make_batched):
    """close() is idempotent; a closed env reopens on reset()."""
    env = make_batched(2, CountingEnv)
    env.reset()
    assert not env.is_closed
    env.close()
    env.close()
    assert env.is_closed
    td = env.reset()
    assert not env.is_closed
    assert td.shape == (2,)


def test_explicit_cpu_device(make_batched):
    """device= sets the batched env's device, its specs and its outputs."""
    env = make_batched(2, CountingEnv, device="cpu")
    assert env.device == torch.device("cpu")
    assert env.rollout(2).device == torch.device("cpu")
    assert env.action_spec.device == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize(
    "env_device,batched_device", [("cpu", "cuda"), ("cuda", "cpu"), ("cuda", None)]
)
def test_devices_cast_in_and_out(make_kind, env_device, batched_device):
    """Sub-envs on one device and the batched env on another: data are cast both ways."""
    for kind in ("serial", "spawn"):
        env = make_kind(
            kind,
            2,
            lambda d=env_device: ContinuousActionVecMockEnv(device=d),
            device=batched_device,
        )
        out = env.rollout(3)
        expected = torch.device(batched_device or env_device).type
        assert out.device.type == expected
        assert all(v.device.type == expected for v in out.values(True, True))
        if isinstance(env, ParallelEnv):
            assert env.shared_tensordict_parent.device.type == env_device


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_non_blocking_moves_give_the_blocking_results(make_kind):
    """non_blocking=True: the same data as blocking moves, both ways (no stale host copy)."""
    results = []
    for non_blocking in (False, True):
        env = make_kind(
            "spawn",
            2,
            lambda: ContinuousActionVecMockEnv(device="cuda"),
            device="cpu",
            non_blocking=non_blocking,
        )
        env.set_seed(0)
        results.append(env.rollout(20, break_when_any_done=False))
    assert (results[0] == results[1]).all()


@pytest.mark.parametrize("kind", ["serial", "fork"])
def test_torchrl_compat_arguments(kind):
    """torchrl 0.4's pin_memory/memmap/allow_step_when_done refuse True; policy_proof warns."""
    make = FACTORIES[kind]
    for name, message in (
        ("pin_memory", PIN_MEMORY_ERROR),
        ("memmap", MEMMAP_ERROR),
        ("allow_step_when_done", STEP_WHEN_DONE_ERROR),
    ):
        with pytest.raises(ValueError, match=re.escape(message)):
            make(2, CountingEnv, **{name: True})
    with pytest.warns(UserWarning, match=re.escape(POLICY_PROOF_WARNING)):
        env = make(2, CountingEnv, policy_proof=lambda td: td)
    env.close()
    env = make(2, CountingEnv, pin_memory=False, memmap=False, non_blocking=True)
    assert env.non_blocking and env.rollout(3).shape == (2, 3)
    env.close()
    assert not make(2, CountingEnv).non_blocking


def test_serial_for_single():
    """serial_for_single gives a SerialEnv for one worker only."""
    env = ParallelEnv(1, CountingEnv, serial_for_single=True, mp_start_method="fork")
    assert isinstance(env, SerialEnv)
    env = ParallelEnv(2, CountingEnv, serial_for_single=True, mp_start_method="fork")
    assert isinstance(env, ParallelEnv)
    assert isinstance(ParallelEnv(1, CountingEnv), ParallelEnv)
    env = ParallelEnv(1, CountingEnv, serial_for_single=True, non_blocking=True)
    assert isinstance(env, SerialEnv) and env.non_blocking


@pytest.mark.parametrize("kind", ["serial", "fork"])
def test_argument_errors_name_the_mismatch(kind):
    """Worker counts, callables and kwargs that do not agree raise ValueError saying so."""
    make = FACTORIES[kind]
    with pytest.raises(ValueError, match=re.escape(NUM_WORKERS_ERROR.format(got=0))):
        make(0, CountingEnv)
    with pytest.raises(ValueError, match=re.escape(NUM_FNS_ERROR.format(got=1, expected=2))):
        make(2, [CountingEnv])
    with pytest.raises(ValueError, match=re.escape(NUM_KWARGS_ERROR.format(got=3, expected=2))):
        make(2, CountingEnv, create_env_kwargs=[{}, {}, {}])
    env = make(2, CountingEnv)
    with pytest.raises(ValueError, match=re.escape(NUM_KWARGS_ERROR.format(got=1, expected=2))):
        env.update_kwargs([{}])
    env.update_kwargs({"max_steps": 7})
    assert env.create_env_kwargs == [{"max_steps": 7}, {"max_steps": 7}]

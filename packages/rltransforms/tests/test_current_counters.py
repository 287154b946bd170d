"""TrajCounter (trajectory numbers shared across envs and processes) and Timer."""

from __future__ import annotations

import multiprocessing
import pickle
import re

import pytest
import torch
from tensordict import TensorDict

from rlcore import EnvCreator, check_env_specs
from rlmocks import CountingEnv, NestedCountingEnv
from rlspecs import Unbounded
from rltransforms import Compose, StepCounter, Timer, TrajCounter, TransformedEnv

rlbatched = pytest.importorskip("rlbatched", reason="the batched-env cases need rlbatched")

pytestmark = pytest.mark.filterwarnings("error")

PARALLEL = ["fork", "spawn"] if "fork" in multiprocessing.get_all_start_methods() else ["spawn"]


def _ones(td):
    return td.set("action", torch.ones(*td.batch_size, 1, dtype=torch.int8))


def _counted_env():
    # module level: spawned workers import it
    return TransformedEnv(CountingEnv(max_steps=100), Compose(StepCounter(3), TrajCounter()))


def _timed_env():
    return TransformedEnv(CountingEnv(max_steps=100), Timer())


@pytest.fixture
def make_batched():
    opened = []

    def make(kind, n, factory):
        if kind == "serial":
            env = rlbatched.SerialEnv(n, factory)
        else:
            env = rlbatched.ParallelEnv(n, factory, mp_start_method=kind)
        opened.append(env)
        return env

    yield make
    for env in opened:
        env.close()


# ---------------------------------------------------------------- TrajCounter
def test_traj_counter_numbers_each_trajectory():
    env = _counted_env()
    rollout = env.rollout(7, break_when_any_done=False)
    assert rollout["next", "traj_count"].squeeze(-1).tolist() == [0, 0, 0, 1, 1, 1, 2]
    assert rollout["traj_count"].squeeze(-1).tolist() == [0, 0, 0, 1, 1, 1, 2]


def test_traj_counter_env_specs_hold():
    env = _counted_env()
    assert env.observation_spec["traj_count"].dtype == torch.int64
    check_env_specs(env)


def test_traj_counter_partial_reset_numbers_only_the_reset_sub_env():
    env = TransformedEnv(CountingEnv(max_steps=2, batch_size=[2]), TrajCounter())

    def policy(td):  # sub-env 0 counts up (done after 3 steps), sub-env 1 stays
        return td.set("action", torch.tensor([[1], [0]], dtype=torch.int8))

    rollout = env.rollout(4, policy, break_when_any_done=False)
    assert rollout["next", "traj_count"].squeeze(-1).tolist() == [[0, 0, 0, 2], [1, 1, 1, 1]]


def test_traj_counter_nested_key_counts_the_nested_done_level():
    env = TransformedEnv(NestedCountingEnv(), TrajCounter(out_key=("data", "traj_count")))
    assert env.observation_spec["data", "traj_count"].shape == (3, 1)
    assert env.reset()["data", "traj_count"].squeeze(-1).tolist() == [0, 1, 2]


def test_traj_counter_clones_share_one_counter():
    t = TrajCounter()
    env_a = TransformedEnv(CountingEnv(), t.clone())
    env_b = TransformedEnv(CountingEnv(), t.clone())
    numbers = [env.reset()["traj_count"].item() for env in (env_a, env_b, env_a)]
    assert numbers == [0, 1, 2] and t.traj_count == 3


def test_traj_counter_state_dict_holds_the_next_number():
    env = _counted_env()
    env.reset()
    assert env.transform[1].state_dict()["traj_count"] == 1
    other = _counted_env()
    other.transform[1].load_state_dict({"traj_count": 5})
    assert other.reset()["traj_count"].item() == 5


def test_traj_counter_pickled_outside_a_process_start_copies():
    t = TrajCounter()
    TransformedEnv(CountingEnv(), t).reset()
    copy = pickle.loads(pickle.dumps(t))
    assert copy.traj_count == 1
    copy._td["traj_count"].add_(1)
    assert t.traj_count == 1


@pytest.mark.parametrize("kind", ["serial", *PARALLEL])
def test_traj_counter_numbers_are_unique_across_sub_envs(make_batched, kind):
    creator = EnvCreator(_counted_env)
    local = creator()  # shares the counter with every env the creator builds
    env = make_batched(kind, 2, creator)
    rollout = env.rollout(6, break_when_any_done=False)
    numbers = rollout["next", "traj_count"].squeeze(-1)
    assert sorted(numbers[:, ::3].flatten().tolist()) == [0, 1, 2, 3]
    assert local.transform[1].traj_count == 4


def test_traj_counter_step_before_reset():
    t = TrajCounter()
    with pytest.raises(RuntimeError, match="_step was called before _reset was called."):
        t._step(TensorDict(), TensorDict())


def test_traj_counter_cannot_run_outside_an_env():
    with pytest.raises(
        RuntimeError, match="can only be called within an environment step or reset"
    ):
        TrajCounter()(TensorDict())


def test_traj_counter_needs_a_done_entry_at_its_level():
    with pytest.raises(
        KeyError, match=re.escape("Could not find root of traj_count key ('x', 'n')")
    ):
        TransformedEnv(CountingEnv(), TrajCounter(out_key=("x", "n")))


def test_traj_counter_observation_spec_must_be_composite():
    with pytest.raises(ValueError, match="was expected to be of type Composite"):
        TrajCounter().transform_observation_spec(Unbounded((1,)))


# ---------------------------------------------------------------- Timer
def test_timer_measures_steps_policies_and_resets():
    env = _timed_env()
    check_env_specs(env)
    rollout = env.rollout(3, _ones)
    assert (rollout["next", "time_step"] > 0).all()
    assert (rollout["next", "time_policy"] > 0).all()
    assert rollout["next", "time_reset"].tolist() == [0.0, 0.0, 0.0]
    assert rollout["time_reset"][0] > 0 and rollout["time_step"][0] == 0


def test_timer_custom_keys():
    env = TransformedEnv(CountingEnv(), Timer(time_key="t"))
    assert {"t_step", "t_policy", "t_reset"} <= set(env.observation_spec.keys())
    env = TransformedEnv(CountingEnv(), Timer(out_keys=["s", "p", "r"]))
    assert {"s", "p", "r"} <= set(env.rand_step(env.reset())["next"].keys())


def test_timer_needs_three_keys():
    with pytest.raises(TypeError, match=re.escape("Expected three out_keys. Got out_keys=['a']")):
        Timer(out_keys=["a"])


def test_timer_cannot_run_outside_an_env():
    with pytest.raises(
        NotImplementedError, match="cannot be executed without a parent environment"
    ):
        Timer()(TensorDict())


@pytest.mark.parametrize("kind", ["serial", *PARALLEL])
def test_timer_in_each_sub_env_of_a_batched_env(make_batched, kind):
    env = make_batched(kind, 2, _timed_env)
    assert env.observation_spec["time_step"].shape == (2,)
    check_env_specs(env)
    rollout = env.rollout(3, _ones)
    assert rollout["next", "time_step"].shape == (2, 3) and (rollout["next", "time_step"] > 0).all()


def test_timer_over_a_batched_env_expands_to_its_batch(make_batched):
    env = TransformedEnv(make_batched("serial", 3, lambda: CountingEnv(max_steps=100)), Timer())
    rollout = env.rollout(2, _ones)
    assert rollout["next", "time_policy"].shape == (3, 2)
    assert (rollout["next", "time_policy"][:, 0] == rollout["next", "time_policy"][0, 0]).all()

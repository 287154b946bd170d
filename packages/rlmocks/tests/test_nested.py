"""NestedCountingEnv: key layout per flag, nested batch sizes, counts and partial resets."""

from __future__ import annotations

import itertools
import re

import pytest
import torch
from tensordict import TensorDict

from rlmocks import CountingEnvCountPolicy, NestedCountingEnv
from rlmocks._nested import UNEXPECTED_NESTED_RESET, UNEXPECTED_ROOT_RESET

FLAGS = list(itertools.product([True, False], repeat=3))


def test_default_nested_env_keys():
    env = NestedCountingEnv()
    assert env.done_keys == [("data", "done"), ("data", "terminated")]
    assert env.reset_keys == [("data", "_reset")]
    assert env.reward_key == ("data", "reward")
    assert env.action_key == ("data", "action")
    assert list(env.observation_spec.keys(True, True)) == [("data", "states")]
    assert env.observation_spec["data", "states"].dtype == torch.int32
    assert env.action_spec.dtype == torch.int8


def test_root_done_adds_a_root_reset_key():
    env = NestedCountingEnv(has_root_done=True)
    assert set(env.done_keys) == {
        ("data", "done"),
        ("data", "terminated"),
        "done",
        "terminated",
    }
    assert set(env.reset_keys) == {"_reset", ("data", "_reset")}
    for reset_key, group in zip(env.reset_keys, env.done_keys_groups):
        for done_key in group:
            if isinstance(reset_key, str):
                assert isinstance(done_key, str)
            else:
                assert done_key[:-1] == reset_key[:-1]


@pytest.mark.parametrize("nest_obs_action,nest_done,nest_reward", FLAGS)
def test_flags_move_exactly_their_keys(nest_obs_action, nest_done, nest_reward):
    env = NestedCountingEnv(
        nest_obs_action=nest_obs_action, nest_done=nest_done, nest_reward=nest_reward
    )
    td = env.rand_step(env.reset())
    keys = set(td.keys(True, True))
    assert (("data", "states") in keys) == nest_obs_action
    assert ("observation" in keys) == (not nest_obs_action)
    assert (("data", "action") in keys) == nest_obs_action
    assert (("next", "data", "reward") in keys) == nest_reward
    assert (("next", "reward") in keys) == (not nest_reward)
    assert (("next", "data", "done") in keys) == nest_done
    assert (("next", "done") in keys) == (not nest_done)
    if not (nest_obs_action or nest_done or nest_reward):
        assert "data" not in td.keys() and "data" not in td["next"].keys()


def test_reset_has_no_reward():
    td = NestedCountingEnv().reset()
    assert ("data", "reward") not in td.keys(True)
    assert ("data", "done") in td.keys(True)
    assert ("data", "states") in td.keys(True)


@pytest.mark.parametrize("batch_size", [(), (32,), (32, 1)])
def test_data_level_has_the_nested_batch(batch_size, nested_dim=5):
    env = NestedCountingEnv(batch_size=batch_size, nested_dim=nested_dim)
    td = env.reset()
    assert td["data"].batch_size == (*batch_size, nested_dim)
    td = env.rand_step(td)
    assert td["data"].batch_size == (*batch_size, nested_dim)
    assert td["next", "data"].batch_size == (*batch_size, nested_dim)
    rollout = env.rollout(3, CountingEnvCountPolicy(env.action_spec, env.action_key))
    assert rollout["next", "data"].batch_size == (*batch_size, 3, nested_dim)


def test_step_increments_by_the_max_nested_action_and_broadcasts():
    env = NestedCountingEnv(nested_dim=3, max_steps=1)
    env.reset()
    action = torch.tensor([[0], [1], [0]], dtype=torch.int8)
    td = TensorDict({"data": TensorDict({"action": action}, [3])}, [])
    out = env.step(td)
    assert out["next", "data", "states"].squeeze(-1).tolist() == [1, 1, 1]
    assert td["data", "action"].squeeze(-1).tolist() == [0, 1, 0]  # input untouched
    out = env.step(out["next"].update({"data": {"action": action}}))
    assert out["next", "data", "states"].squeeze(-1).tolist() == [2, 2, 2]
    assert out["next", "data", "done"].all()


@pytest.mark.parametrize("nest_done,has_root_done", [(False, False), (True, False), (True, True)])
@pytest.mark.parametrize("batch_size", [(), (4,)])
def test_rollouts_with_partial_resets_run(nest_done, has_root_done, batch_size):
    env = NestedCountingEnv(nest_done=nest_done, has_root_done=has_root_done, batch_size=batch_size)
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    rollout = env.rollout(20, policy, break_when_any_done=False)
    states = rollout["next", "data", "states"][(0,) * len(batch_size)][:, 0, 0]
    # done after 6 steps, then the count restarts from 0
    assert states.tolist()[:8] == [1, 2, 3, 4, 5, 6, 1, 2]


def test_root_partial_reset_masks_the_count_when_the_done_is_at_the_root():
    env = NestedCountingEnv(nest_done=False, max_steps=10, batch_size=(2,))
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    env.rollout(2, policy)
    out = env.reset(TensorDict({"_reset": torch.tensor([[True], [False]])}, [2]))
    assert out["data", "states"][:, 0, 0].tolist() == [0, 2]


def test_nested_reset_key_resets_the_whole_count():
    env = NestedCountingEnv(max_steps=10, batch_size=(2,))
    env.rollout(2, CountingEnvCountPolicy(env.action_spec, env.action_key))
    reset = TensorDict({"_reset": torch.tensor([[[True]] * 3, [[False]] * 3])}, [2, 3])
    out = env.reset(TensorDict({"data": reset}, [2]))
    assert (out["data", "states"] == 0).all()


def test_reset_rejects_a_root_reset_without_root_done():
    env = NestedCountingEnv()
    with pytest.raises(RuntimeError, match=re.escape(UNEXPECTED_ROOT_RESET)):
        env._reset(TensorDict({"_reset": torch.ones(1, dtype=torch.bool)}, []))


def test_reset_rejects_a_nested_reset_without_nested_done():
    env = NestedCountingEnv(nest_done=False)
    data = TensorDict({"_reset": torch.ones(3, 1, dtype=torch.bool)}, [3])
    with pytest.raises(RuntimeError, match=re.escape(UNEXPECTED_NESTED_RESET)):
        env._reset(TensorDict({"data": data}, []))

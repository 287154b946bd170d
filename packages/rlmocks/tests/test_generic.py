"""GenericTestEnv: specs from arguments, dynamics from the given functions."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlcore import check_env_specs
from rlmocks import GenericTestEnv
from rlspecs import Bounded, Categorical, Composite, Unbounded


def _add_action(env, td):
    obs = td["observation"] + td["action"]
    return td.empty().update({"observation": obs, "reward": obs.clone(), "done": obs >= 3})


@pytest.mark.parametrize("batch_size", [(), (2,)])
def test_default_dynamics_pass_check_env_specs(batch_size):
    env = GenericTestEnv(
        observation_spec=Unbounded(shape=(*batch_size, 3)),
        action_spec=Bounded(-1.0, 1.0, shape=(*batch_size, 2)),
        batch_size=batch_size,
    )
    assert set(env.done_keys) == {"done", "terminated"}
    assert env.reward_spec.shape == (*batch_size, 1)
    check_env_specs(env)
    assert (env.reset()["observation"] == 0).all()


def test_step_func_drives_the_env_and_missing_done_leaves_are_false():
    env = GenericTestEnv(
        observation_spec=Unbounded(shape=(1,)),
        action_spec=Bounded(0.0, 2.0, shape=(1,)),
        step_func=_add_action,
    )
    policy = lambda td: td.set("action", torch.ones(1))  # noqa: E731
    rollout = env.rollout(10, policy)
    assert rollout["next", "reward"].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
    assert rollout["next", "done"].squeeze(-1).tolist() == [False, False, True]
    assert not rollout["next", "terminated"].any()


def test_reset_func_sets_the_initial_state():
    def reset(env, td):
        return TensorDict({"observation": torch.full((1,), 2.0)}, [])

    env = GenericTestEnv(
        observation_spec=Unbounded(shape=(1,)),
        action_spec=Bounded(0.0, 2.0, shape=(1,)),
        reset_func=reset,
        step_func=_add_action,
    )
    td = env.reset()
    assert td["observation"].item() == 2.0 and not td["done"].any()
    # from 2, an action of 1 reaches 3: done (rand_step would draw its own action)
    assert env.step(td.set("action", torch.ones(1)))["next", "done"].item()


def test_composite_specs_are_kept():
    done = Composite(
        truncated=Categorical(2, shape=(1,), dtype=torch.bool),
        done=Categorical(2, shape=(1,), dtype=torch.bool),
    )
    env = GenericTestEnv(
        observation_spec=Composite(pixels=Unbounded(shape=(2, 2))),
        action_spec=Composite(move=Categorical(4, shape=())),
        done_spec=done,
    )
    assert env.action_keys == ["move"]
    assert "truncated" in env.done_keys
    check_env_specs(env)

"""A ``TransformedEnv`` follows in-place edits of its base env's specs (and of its own).

The edits themselves, on a plain env, are rlcore's ``test_env_spec_mutation.py``.
"""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from rlcore import check_env_specs
from rlmocks import SpecDrivenEnv
from rlspecs import Unbounded
from rltransforms import (
    DoubleToFloat,
    RenameTransform,
    RewardSum,
    StepCounter,
    TransformedEnv,
)


def add_truncated(env):
    env.full_done_spec["truncated"] = env.full_done_spec["done"].clone()


def add_nested_reward(env):
    env.full_reward_spec["agent", "reward"] = Unbounded((*env.batch_size, 1))


def add_nested_observation(env):
    env.observation_spec["agent", "pos"] = Unbounded((*env.batch_size, 2))


def test_transformed_env_follows_edits_of_its_base_env():
    base = SpecDrivenEnv()
    base.observation_spec["obs"] = Unbounded(3, dtype=torch.float64)
    env = TransformedEnv(base, DoubleToFloat(in_keys=["obs"]))
    assert env.observation_spec["obs"].dtype == torch.float32
    check_env_specs(env)
    base.observation_spec["extra"] = Unbounded(2)
    assert env.observation_keys == ["extra", "obs"]
    base.observation_spec["obs"] = Unbounded(4, dtype=torch.float64)
    assert env.observation_spec["obs"].shape == (4,)
    assert env.observation_spec["obs"].dtype == torch.float32
    add_truncated(base)
    assert "truncated" in env.done_keys
    td = env.rollout(3)
    assert td["next", "obs"].shape == (3, 4) and td["next", "obs"].dtype == torch.float32
    check_env_specs(env)


def test_transformed_env_step_path_uses_the_rebuilt_specs():
    base = SpecDrivenEnv()
    env = TransformedEnv(base, RenameTransform(["obs"], ["renamed"]))
    env.rollout(2)  # warms the plans of both envs and of the transform
    base.observation_spec["obs"] = Unbounded(6)
    assert env.rollout(2)["next", "renamed"].shape == (2, 6)
    assert env.observation_spec["renamed"].shape == (6,)


def test_stateful_transforms_learn_the_edit_before_the_next_step():
    base = SpecDrivenEnv()
    env = TransformedEnv(base, RewardSum())  # learns the reward keys from the specs
    td = env.reset()
    td["action"] = torch.zeros(1)
    env.step(td)
    add_nested_reward(base)
    td = env.step(td)  # no spec read in between: the specs were rebuilt at the edit
    assert td["next", "agent", "episode_reward"].shape == (1,)


def test_transformed_env_of_a_transformed_env_follows_the_innermost_base():
    base = SpecDrivenEnv()
    inner = TransformedEnv(base, StepCounter())
    outer = TransformedEnv(inner, DoubleToFloat(in_keys=["extra"]), auto_unwrap=False)
    _ = outer.observation_keys
    base.observation_spec["extra"] = Unbounded(1, dtype=torch.float64)
    assert outer.observation_spec["extra"].dtype == torch.float32
    check_env_specs(outer)


def test_transform_parent_follows_base_edits():
    base = SpecDrivenEnv()
    counter = StepCounter()
    env = TransformedEnv(base, counter)
    env.append_transform(RenameTransform(["obs"], ["o"]))
    _ = counter.parent.observation_keys
    add_nested_observation(base)
    assert ("agent", "pos") in env.transform[1].parent.observation_keys


def test_an_edit_the_transform_cannot_take_raises_on_next_use_and_recovers():
    base = SpecDrivenEnv()
    env = TransformedEnv(base, RenameTransform(["obs"], ["renamed"]))
    obs = base.observation_spec.pop("obs")  # the edit itself succeeds
    with pytest.raises(KeyError):
        _ = env.observation_spec
    with pytest.raises(KeyError):  # still stale: raises again rather than serving old specs
        _ = env.observation_keys
    base.observation_spec["obs"] = obs
    assert env.observation_keys == ["renamed"]


def test_edits_of_the_transformed_env_own_specs_empty_its_cache():
    env = TransformedEnv(SpecDrivenEnv(), StepCounter())
    _ = env.observation_keys
    env.observation_spec["mine"] = Unbounded(1)
    assert "mine" in env.observation_keys


@pytest.mark.parametrize(
    "copy_env",
    [
        pytest.param(lambda e: pickle.loads(pickle.dumps(e)), id="pickle"),
        pytest.param(copy.deepcopy, id="deepcopy"),
    ],
)
def test_copied_transformed_env_follows_its_copied_base(copy_env):
    env = TransformedEnv(SpecDrivenEnv(), DoubleToFloat(in_keys=["extra"]))
    clone = copy_env(env)
    clone.base_env.observation_spec["extra"] = Unbounded(1, dtype=torch.float64)
    assert clone.observation_spec["extra"].dtype == torch.float32
    assert "extra" not in env.observation_keys
    check_env_specs(clone)

"""Envs with non-tensor data: EnvWithMetadata, CountingEnvWithString, Str2StrEnv."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlmocks import CountingEnvCountPolicy, CountingEnvWithString, EnvWithMetadata, Str2StrEnv
from rlmocks._non_tensor import SIZE_RANGE_ERROR, STRING_ACTION_ERROR
from rlspecs import NonTensor, Unbounded


def test_metadata_counts_the_steps():
    rollout = EnvWithMetadata().rollout(4)
    assert list(rollout["non_tensor"]) == [0, 1, 2, 3]
    assert list(rollout["next", "non_tensor"]) == [1, 2, 3, 4]
    assert (rollout["next", "tensor"] == 0).all()


def test_metadata_is_a_non_tensor_observation_and_state():
    env = EnvWithMetadata()
    assert isinstance(env.observation_spec["non_tensor"], NonTensor)
    assert env.state_keys == ["non_tensor"]
    assert env.observation_spec["tensor"].shape == (3,)


def test_metadata_outputs_follow_the_specs_it_was_built_with():
    env = EnvWithMetadata()
    env.observation_spec["extra"] = Unbounded(2)
    assert "extra" not in env.reset().keys()


def test_string_env_counts_like_counting_env():
    env = CountingEnvWithString(max_steps=2, batch_size=(2,))
    rollout = env.rollout(10, CountingEnvCountPolicy(env.action_spec, env.action_key))
    assert rollout["next", "observation"][0].squeeze(-1).tolist() == [1, 2, 3]
    assert rollout["next", "done"][:, -1].all()


def test_string_env_draws_a_fresh_string_in_bounds_at_each_step():
    env = CountingEnvWithString(min_size=5, max_size=8)
    rollout = env.rollout(20, break_when_any_done=False)
    strings = list(rollout["next", "string"])
    assert all(isinstance(s, str) and 5 <= len(s) <= 8 and s.islower() for s in strings)
    assert len(set(strings)) > 1
    assert isinstance(env.observation_spec["string"], NonTensor)


def test_string_env_rejects_an_empty_size_range():
    message = SIZE_RANGE_ERROR.format(cls="CountingEnvWithString", low=5, high=4)
    with pytest.raises(ValueError, match=re.escape(message)):
        CountingEnvWithString(min_size=5, max_size=4)


def test_str2str_random_action_is_the_example_string():
    env = Str2StrEnv()
    assert env.rand_action()["action"] == "an action!"
    rollout = env.rollout(3, break_when_any_done=False)
    assert list(rollout["action"]) == ["an action!"] * 3


def test_str2str_observations_are_random_strings_in_bounds():
    env = Str2StrEnv(min_size=2, max_size=3)
    rollout = env.rollout(10, break_when_any_done=False)
    assert all(2 <= len(s) <= 3 for s in rollout["next", "observation"])
    assert rollout["next", "reward"].dtype == torch.float32


def test_str2str_same_seed_same_strings():
    env = Str2StrEnv()
    env.set_seed(3)
    first = list(env.rollout(5, break_when_any_done=False)["next", "observation"])
    env.set_seed(3)
    assert list(env.rollout(5, break_when_any_done=False)["next", "observation"]) == first


def test_str2str_reset_is_never_done():
    env = Str2StrEnv()
    assert not any(env.reset()["done"].item() for _ in range(300))


def test_str2str_rejects_a_non_string_action():
    env = Str2StrEnv()
    td = env.reset().set("action", torch.zeros(1))
    with pytest.raises(TypeError, match=re.escape(STRING_ACTION_ERROR.format(type="Tensor"))):
        env.step(td)


def test_str2str_string_action_is_accepted():
    env = Str2StrEnv()
    td = TensorDict().set_non_tensor("action", "hello")
    td.update(env.reset())
    assert isinstance(env.step(td)["next", "observation"], str)

"""EnvCreator: building envs, exposing their specs, pickling with cloudpickle."""

from __future__ import annotations

import pickle
import re

import pytest
import torch
from _rlcore_envs import CountingEnv

from rlcore import EnvBase, EnvCreator
from rlcore._env_creator import NOT_AN_ENV


def test_creator_builds_envs_with_kwargs():
    creator = EnvCreator(lambda max_steps=5: CountingEnv(max_steps=max_steps), {"max_steps": 2})
    env = creator()
    assert isinstance(env, EnvBase) and env.max_steps == 2
    assert creator(max_steps=7).max_steps == 7


def test_creator_exposes_specs_without_keeping_the_env():
    built = []

    def make():
        env = CountingEnv(batch_size=(3,))
        built.append(env)
        return env

    creator = EnvCreator(make)
    assert built[0].is_closed
    assert creator.batch_size == (3,)
    assert creator.device is None
    assert creator.batch_locked
    assert creator.observation_keys == ["observation"]
    assert creator.action_spec == built[0].action_spec
    assert creator.full_done_spec == built[0].full_done_spec
    assert set(creator.specs.keys()) == {"output_spec", "input_spec"}
    assert all(ref is not creator._meta for ref in built)


def test_creator_pickles_lambdas():
    offset = 3
    creator = EnvCreator(lambda: CountingEnv(max_steps=offset))
    clone = pickle.loads(pickle.dumps(creator))
    assert clone().max_steps == 3
    assert clone.observation_keys == ["observation"]


def test_creator_rejects_non_envs():
    with pytest.raises(TypeError, match=re.escape(NOT_AN_ENV.format(type="int"))):
        EnvCreator(lambda: 3)


def test_creator_unknown_attribute():
    creator = EnvCreator(CountingEnv)
    with pytest.raises(AttributeError, match="EnvCreator has no attribute 'nope'"):
        _ = creator.nope
    assert "EnvCreator(" in repr(creator)
    assert creator().count.dtype == torch.int32

"""EnvCreator: building envs, exposing their specs, pickling with cloudpickle."""

from __future__ import annotations

import pickle
import re

import pytest
import torch
from _rlcore_envs import CountingEnv
from tensordict import TensorDict

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


class StatsEnv(CountingEnv):
    """A CountingEnv whose state dict holds a tensordict of statistics (as VecNorm's does)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.stats = TensorDict(seen=torch.zeros(1))

    def get_extra_state(self):
        return self.stats

    def set_extra_state(self, state):
        self.stats = state  # adopted, not copied: a shared state stays shared


@pytest.mark.parametrize("share_memory", [True, False])
def test_creator_state_dict_is_what_every_env_built_loads(share_memory):
    creator = EnvCreator(StatsEnv, share_memory=share_memory)
    assert creator.env_type is StatsEnv
    stats = creator.state_dict()["_extra_state"]
    assert stats.is_shared() is share_memory
    first, second = creator(), creator()
    first.stats["seen"].add_(1)
    # shared: one set of statistics for all; not shared: this process's envs still adopt the
    # creator's tensordict, and a spawned worker would get a copy of it
    assert second.stats["seen"].item() == 1 and stats["seen"].item() == 1


def test_creator_load_state_dict_copies_into_the_shared_state():
    creator = EnvCreator(StatsEnv)
    env = creator()
    creator.load_state_dict({"_extra_state": TensorDict(seen=torch.full((1,), 5.0))})
    assert env.stats["seen"].item() == 5 and env.stats.is_shared()
    with pytest.raises(KeyError, match="'stats' is no state the envs built share"):
        creator.load_state_dict({"stats": TensorDict(seen=torch.zeros(1))})

"""Spec locking (current torchrl's ``spec_locked``, ``set_spec_lock_``, ``is_spec_locked``)."""

from __future__ import annotations

import pickle
import re

import pytest
from _rlcore_envs import CountingEnv

from rlspecs import Unbounded

LOCKED = re.escape("Cannot modify a locked CompositeSpec")


def test_specs_start_unlocked_as_in_torchrl_04():
    env = CountingEnv()
    assert env.is_spec_locked is False
    env.observation_spec["extra"] = Unbounded(1)  # edited in place
    assert "extra" in env.observation_spec.keys()


def test_spec_locked_at_construction_refuses_edits_inside_the_specs():
    env = CountingEnv(spec_locked=True)
    assert env.is_spec_locked
    with pytest.raises(RuntimeError, match=LOCKED):
        env.observation_spec["extra"] = Unbounded(1)
    with pytest.raises(RuntimeError, match=LOCKED):
        env.full_done_spec["other"] = env.full_done_spec["done"].clone()


def test_setters_still_work_on_locked_specs_and_keep_them_locked():
    env = CountingEnv().set_spec_lock_()
    env.observation_spec = env.observation_spec.clone()
    env.reward_spec = Unbounded(1)
    assert env.full_observation_spec.is_locked and env.full_reward_spec.is_locked
    assert env.rollout(2).batch_size == (2,)


def test_unlocking_allows_edits_again():
    env = CountingEnv(spec_locked=True)
    env.is_spec_locked = False
    env.observation_spec["extra"] = Unbounded(1)
    assert not env.is_spec_locked and "extra" in env.observation_spec.keys()
    assert env.output_spec.is_locked  # the containers' top level stays locked


def test_lock_survives_pickling():
    env = pickle.loads(pickle.dumps(CountingEnv(spec_locked=True)))
    assert env.is_spec_locked
    with pytest.raises(RuntimeError, match=LOCKED):
        env.observation_spec["extra"] = Unbounded(1)

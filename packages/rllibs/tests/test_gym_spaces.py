"""Gymnasium spaces → specs, and the values read from / written to envs with those spaces."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from rlspecs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)

gym = pytest.importorskip("gymnasium")
from gymnasium import spaces  # noqa: E402

from rllibs import GymWrapper  # noqa: E402
from rllibs._gym_spaces import HETEROGENEOUS_TUPLE, NESTED_TUPLE  # noqa: E402

CASES = [
    # space, categorical encoding, spec class, spec shape, spec dtype
    (spaces.Box(-1, 1, (2,)), False, Bounded, (2,), torch.float32),
    (spaces.Box(-np.inf, np.inf, (3,), np.float64), False, Unbounded, (3,), torch.float64),
    (
        spaces.Box(np.array([0.0, -np.inf]), np.array([1.0, np.inf]), dtype=np.float64),
        False,
        Bounded,
        (2,),
        torch.float64,
    ),
    (spaces.Box(-5, 5, (2,), np.int32), False, Bounded, (2,), torch.int32),
    (spaces.Discrete(3), False, OneHot, (3,), torch.int64),
    (spaces.Discrete(3), True, Categorical, (), torch.int64),
    (spaces.Discrete(3, start=2), False, OneHot, (3,), torch.int64),
    (spaces.Discrete(3, start=2), True, Categorical, (), torch.int64),
    (spaces.MultiDiscrete([2, 3]), False, MultiOneHot, (5,), torch.int64),
    (spaces.MultiDiscrete([2, 3]), True, MultiCategorical, (2,), torch.int64),
    (spaces.MultiBinary(4), False, Binary, (4,), torch.int8),
    (
        spaces.Tuple((spaces.Box(-1, 1, (2,)), spaces.Box(-1, 1, (2,)))),
        False,
        Bounded,
        (2, 2),
        torch.float32,
    ),
]
IDS = [f"{type(case[0]).__name__}-{i}" for i, case in enumerate(CASES)]


@pytest.mark.parametrize("space,categorical,cls,shape,dtype", CASES, ids=IDS)
def test_space_gives_action_and_observation_specs(
    space_env_cls, space, categorical, cls, shape, dtype
):
    env = GymWrapper(space_env_cls(space, space), categorical_action_encoding=categorical)
    for spec in (env.action_spec, env.observation_spec["observation"]):
        assert isinstance(spec, cls)
        assert spec.shape == torch.Size(shape)
        assert spec.dtype == dtype


@pytest.mark.parametrize("space,categorical,cls,shape,dtype", CASES, ids=IDS)
def test_values_read_into_the_spec_and_actions_reach_the_env_unchanged(
    space_env_cls, space, categorical, cls, shape, dtype
):
    gym_env = space_env_cls(space, space)
    env = GymWrapper(gym_env, categorical_action_encoding=categorical)
    env.set_seed(0)
    td = env.reset()
    assert env.observation_spec["observation"].is_in(td["observation"])
    # feed the observation back as the action: the env must receive the sampled value
    sampled = gym_env.observation_space.sample()
    td["action"] = env._read_obs(sampled)["observation"]
    env.step(td)
    assert space.contains(gym_env.last_action)
    np.testing.assert_array_equal(np.asarray(gym_env.last_action), np.asarray(sampled))


def test_dict_space_gives_nested_composite(space_env_cls):
    space = spaces.Dict({"a": spaces.Box(-1, 1, (2,)), "b": spaces.Dict({"c": spaces.Discrete(2)})})
    gym_env = space_env_cls(space, space)
    env = GymWrapper(gym_env)
    assert isinstance(env.full_action_spec["action"], Composite)
    assert isinstance(env.observation_spec["b", "c"], OneHot)
    td = env.rand_step(env.reset())
    assert env.observation_spec.is_in(td["next"].select(*env.observation_spec.keys()))
    assert space.contains(gym_env.last_action)


def test_image_observation_goes_under_pixels(image_env_cls):
    env = GymWrapper(image_env_cls())
    assert list(env.observation_spec.keys()) == ["pixels"]
    td = env.rand_step(env.reset())
    assert td["next", "pixels"].dtype == torch.uint8
    assert td["next", "pixels"].shape == torch.Size([8, 6, 3])


def test_heterogeneous_tuple_is_refused_with_a_hint(space_env_cls):
    space = spaces.Tuple((spaces.Box(-1, 1, (2,)), spaces.Discrete(3)))
    with pytest.raises(ValueError, match=re.escape(HETEROGENEOUS_TUPLE.format(space=space))):
        GymWrapper(space_env_cls(space, spaces.Discrete(2)))


def test_tuple_of_dicts_is_refused_with_a_hint(space_env_cls):
    space = spaces.Tuple((spaces.Dict({"a": spaces.Discrete(2)}),))
    with pytest.raises(TypeError, match=re.escape(NESTED_TUPLE.format(space=space))):
        GymWrapper(space_env_cls(space, spaces.Discrete(2)))


def test_read_only_observations_are_copied(space_env_cls):
    space = spaces.Box(-1, 1, (2,))
    env = GymWrapper(space_env_cls(space, space))
    value = np.zeros(2, np.float32)
    value.flags.writeable = False
    tensor = env._read_obs(value)["observation"]
    tensor += 1
    assert (value == 0).all()


def test_observations_of_the_space_dtype_are_not_copied(space_env_cls):
    space = spaces.Box(-1, 1, (2,))
    env = GymWrapper(space_env_cls(space, space))
    value = np.zeros(2, np.float32)
    assert env._read_obs(value)["observation"].data_ptr() == value.ctypes.data

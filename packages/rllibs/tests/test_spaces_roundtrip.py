"""Specs ↔ gymnasium spaces: spec_to_space, its round trip through space_to_spec, torchrl 0.4 names."""

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
    NonTensor,
    OneHot,
    Stacked,
    Unbounded,
)

gym = pytest.importorskip("gymnasium")
from gymnasium import spaces  # noqa: E402

from rllibs import (  # noqa: E402
    _gym_to_torchrl_spec_transform,
    _torchrl_to_gym_spec_transform,
    space_to_spec,
    spec_to_space,
)
from rllibs._gym_spaces import UNSUPPORTED_SPEC, make_reader  # noqa: E402

ROUND_TRIPS = [
    # spec, categorical encoding when read back
    (Unbounded((3,)), False),
    (Unbounded((2,), dtype=torch.float64), False),
    (Unbounded((2, 2), dtype=torch.int64), False),
    (Unbounded((4,), dtype=torch.uint8), False),
    (Bounded(-1.0, 1.0, (3,)), False),
    (
        Bounded(torch.tensor([0.0, -1.0]), torch.tensor([1.0, 5.0]), (2,), dtype=torch.float64),
        False,
    ),
    (Bounded(-3, 4, (2,), dtype=torch.int32), False),
    (Categorical(4), True),
    (Categorical(4, shape=(3,)), True),
    (Categorical(2, shape=(1,), dtype=torch.bool), True),
    (OneHot(5, dtype=torch.int64), False),
    (OneHot(5, shape=(2, 5), dtype=torch.int64), False),
    (MultiCategorical([2, 3]), True),
    (MultiOneHot([2, 3], dtype=torch.int64), False),
    (Binary(4), False),
    (Binary(shape=(2, 3)), False),
]
IDS = [f"{type(spec).__name__}-{i}" for i, (spec, _) in enumerate(ROUND_TRIPS)]


@pytest.mark.parametrize("spec,categorical", ROUND_TRIPS, ids=IDS)
def test_every_spec_kind_comes_back_from_its_space(spec, categorical):
    space = spec_to_space(spec)
    assert space_to_spec(space, categorical_action_encoding=categorical) == spec


@pytest.mark.parametrize("spec,categorical", ROUND_TRIPS, ids=IDS)
def test_samples_of_the_space_read_as_values_of_the_spec(spec, categorical):
    space = spec_to_space(spec)
    space.seed(0)
    value = make_reader(space, spec)(space.sample())
    assert value.shape == spec.shape
    assert spec.is_in(value.to(spec.dtype))


def test_spaces_of_each_kind():
    assert spec_to_space(Categorical(3)) == spaces.Discrete(3)
    assert spec_to_space(OneHot(3)) == spaces.Discrete(3)
    assert spec_to_space(Categorical(3, shape=(2,))) == spaces.MultiDiscrete([3, 3])
    assert spec_to_space(OneHot(3, shape=(2, 3))) == spaces.MultiDiscrete([3, 3])
    assert spec_to_space(MultiCategorical([2, 3])) == spaces.MultiDiscrete([2, 3])
    assert spec_to_space(MultiOneHot([2, 3])) == spaces.MultiDiscrete([2, 3])
    assert spec_to_space(Binary(4)) == spaces.MultiBinary(4)
    assert spec_to_space(Bounded(-1.0, 2.0, (2,))) == spaces.Box(-1.0, 2.0, (2,), np.float32)
    assert spec_to_space(Unbounded(2)) == spaces.Box(-np.inf, np.inf, (2,), np.float32)
    info = np.iinfo(np.int32)
    assert spec_to_space(Unbounded(2, dtype=torch.int32)) == spaces.Box(
        info.min, info.max, (2,), np.int32
    )
    assert spec_to_space(Categorical(2, dtype=torch.bool)) == spaces.Box(0, 1, (), bool)


def test_nested_composite_becomes_nested_dicts_and_comes_back():
    spec = Composite(
        observation=Unbounded(3),
        other=Composite(flag=Binary(2), level=Composite(count=Categorical(5))),
    )
    space = spec_to_space(spec)
    assert isinstance(space["other"], spaces.Dict)
    assert space["other"]["level"]["count"] == spaces.Discrete(5)
    assert space_to_spec(space, categorical_action_encoding=True) == spec


def test_batch_dims_of_a_composite_are_dropped():
    spec = Composite(obs=Unbounded((4, 2)), shape=(4,))
    assert spec_to_space(spec)["obs"].shape == (2,)


def test_boxes_spanning_their_dtype_read_as_unbounded_too():
    info = np.finfo(np.float32)  # torchrl 0.4 writes unbounded specs so
    spec = space_to_spec(spaces.Box(info.min, info.max, (2,), np.float32))
    assert spec == Unbounded(2)


def test_a_stack_of_alike_specs_is_a_tuple():
    stacked = Stacked(Bounded(-1.0, 1.0, (2,)), Bounded(-1.0, 1.0, (3,)), dim=0)
    space = spec_to_space(stacked)
    assert space == spaces.Tuple((spaces.Box(-1.0, 1.0, (2,)), spaces.Box(-1.0, 1.0, (3,))))


def test_an_unconvertible_spec_is_named_with_its_key():
    spec = Composite(a=Composite(text=NonTensor(shape=())))
    where = " at key ('a', 'text')"
    message = UNSUPPORTED_SPEC.format(spec=spec["a", "text"], where=where)
    with pytest.raises(TypeError, match=re.escape(message)):
        spec_to_space(spec)


@pytest.mark.parametrize("categorical", [True, False])
def test_torchrl_04_names_round_trip_a_batched_composite(categorical):
    batch = (3, 4)
    cat = Categorical if categorical else OneHot
    cat_shape = batch if categorical else (*batch, 5)
    multi = MultiCategorical if categorical else MultiOneHot
    multi_shape = 2 if categorical else 5
    spec = Composite(
        a=Unbounded(shape=(*batch, 1)),
        b=Composite(c=cat(5, shape=cat_shape, dtype=torch.int64), shape=batch),
        d=cat(5, shape=cat_shape, dtype=torch.int64),
        e=multi([2, 3], shape=(*batch, multi_shape), dtype=torch.int64),
        f=Bounded(-3, 4, shape=(*batch, 1)),
        g=Unbounded(shape=(*batch, 1), dtype=torch.long),
        h=Binary(n=5, shape=(*batch, 5)),
        shape=batch,
    )
    space = _torchrl_to_gym_spec_transform(spec, categorical_action_encoding=categorical)
    back = _gym_to_torchrl_spec_transform(
        space, categorical_action_encoding=categorical, batch_size=spec.shape
    )
    assert back == spec


def test_torchrl_04_name_renames_a_lone_state_and_casts_boxes():
    space = spaces.Dict(
        state=spaces.Box(-1.0, 1.0, (2,)), pixels=spaces.Box(0, 255, (4, 4, 3), np.uint8)
    )
    spec = _gym_to_torchrl_spec_transform(space)
    assert set(spec.keys()) == {"observation", "pixels"}
    kept = _gym_to_torchrl_spec_transform(space, remap_state_to_observation=False)
    assert set(kept.keys()) == {"state", "pixels"}
    box = _gym_to_torchrl_spec_transform(spaces.Box(-1.0, 1.0, (2,)), dtype=torch.float64)
    assert box == Bounded(-1.0, 1.0, (2,), dtype=torch.float64)

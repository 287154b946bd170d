"""The errors current torchrl (0.14) raises for n-dimensional ``Bounded``/``Unbounded`` specs,
at construction and in their methods, that rlspecs raises too."""

from __future__ import annotations

import re

import pytest
import torch

from rlspecs import Bounded, SpecShapeError, Unbounded, set_spec_api
from rlspecs._bounded import BOUNDS_ND_SHAPE, BOUNDS_REMOVED
from rlspecs._bounded import NO_INDEX as BOUNDED_NO_INDEX
from rlspecs._unbounded import NO_INDEX as UNBOUNDED_NO_INDEX


@pytest.mark.parametrize(
    "low,high,shape,name,got",
    [
        (torch.zeros(3), 1.0, (2, 3), "low", (3,)),
        (0.0, torch.ones(2, 3), (3,), "high", (2, 3)),
        (torch.zeros(2, 3), torch.ones(3), (2, 3), "high", (3,)),
    ],
    ids=["low", "high", "high_first"],
)
def test_a_non_scalar_bound_must_have_the_explicit_shape(low, high, shape, name, got):
    message = BOUNDS_ND_SHAPE.format(name=name, got=got, shape=shape)
    for exc in (RuntimeError, SpecShapeError):
        with pytest.raises(exc, match=re.escape(message)):
            Bounded(low, high, shape)


def test_scalar_bounds_expand_and_matching_bounds_pass():
    assert Bounded(0.0, 1.0, (2, 3)).low.shape == (2, 3)
    assert Bounded(torch.zeros(1, 3), torch.ones(2, 3), (2, 3)).low.shape == (2, 3)


def test_old_bound_names_raise_under_the_current_api():
    with set_spec_api("current"):
        for kwargs, old, new in (
            ({"minimum": 0.0, "high": 1.0}, "minimum", "low"),
            ({"low": 0.0, "maximum": 1.0}, "maximum", "high"),
        ):
            with pytest.raises(TypeError, match=re.escape(BOUNDS_REMOVED.format(old=old, new=new))):
                Bounded(shape=(1,), **kwargs)
    assert Bounded(minimum=0.0, maximum=1.0, shape=(1,)).high.item() == 1.0  # torchrl 0.4


def test_index_is_not_implemented():
    with pytest.raises(NotImplementedError, match=re.escape(BOUNDED_NO_INDEX)):
        Bounded(0.0, 1.0, (3,)).index(torch.zeros(3), torch.zeros(3))
    with pytest.raises(NotImplementedError, match=re.escape(UNBOUNDED_NO_INDEX)):
        Unbounded(3).index(torch.zeros(3), torch.zeros(3))


def test_expand_to_a_shape_whose_trailing_dims_differ_raises():
    for spec in (Bounded(0.0, 1.0, (2, 3)), Unbounded((2, 3))):
        with pytest.raises(ValueError, match="cannot expand"):
            spec.expand(4, 2, 4)


def test_unbind_past_the_first_dim_raises():
    with pytest.raises(ValueError, match="cannot unbind"):
        Unbounded((2, 3)).unbind(-3)
    with pytest.raises(ValueError, match=re.escape("Cannot unbind along dim -3")):
        Bounded(0.0, 1.0, (2, 3)).unbind(-3)


def test_is_in_of_a_shape_that_cannot_broadcast_raises():
    with pytest.raises(RuntimeError, match="cannot be broadcast"):
        Unbounded((2, 3)).is_in(torch.zeros(2, 4))
    with set_spec_api("current"), pytest.raises(RuntimeError, match="shape mismatch"):
        Bounded(0.0, 1.0, (2, 3)).is_in(torch.zeros(2, 4))

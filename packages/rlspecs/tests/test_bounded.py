"""``Bounded``: values in ``[low, high]``."""

from __future__ import annotations

import re

import pytest
import torch

from rlspecs import Bounded, BoundedTensorSpec, ContinuousBox
from rlspecs._bounded import (
    BOUNDS_KWARG,
    BOUNDS_MISSING,
    BOUNDS_ORDER,
    BOUNDS_SHAPE,
    BOUNDS_TWICE,
)


def test_scalar_bounds_are_expanded_to_shape():
    spec = Bounded(-1, 1, (2, 3))
    assert spec.low.shape == spec.high.shape == (2, 3)
    assert spec.dtype == torch.float32


def test_tensor_bounds_give_the_shape():
    spec = Bounded(torch.zeros(3), torch.arange(1.0, 4.0))
    assert spec.shape == (3,)
    assert spec.high.tolist() == [1.0, 2.0, 3.0]


def test_minimum_and_maximum_are_accepted():
    spec = BoundedTensorSpec(minimum=0.0, maximum=2.0, shape=(2,))
    assert spec == Bounded(0.0, 2.0, (2,))
    assert torch.equal(spec.minimum, spec.low) and torch.equal(spec.maximum, spec.high)


def test_seed_positional_signature():
    spec = BoundedTensorSpec(-1, 1, (4,), torch.device("cpu"), torch.float64)
    assert spec.dtype == torch.float64 and spec.shape == (4,)


def test_low_above_high_raises():
    message = BOUNDS_ORDER.format(low=torch.tensor(2.0), high=torch.tensor(1.0))
    with pytest.raises(ValueError, match=re.escape(message)):
        Bounded(2.0, 1.0, (2,))


def test_mismatched_bound_shapes_raise():
    message = BOUNDS_SHAPE.format(low=torch.Size([3]), high=torch.Size([2]), shape=torch.Size([2]))
    with pytest.raises(ValueError, match=re.escape(message)):
        Bounded(torch.zeros(3), torch.ones(2), (2,))
    with pytest.raises(ValueError, match=re.escape("do not broadcast")):
        Bounded(torch.zeros(3), torch.ones(2))
    with pytest.raises(RuntimeError, match=re.escape("got high of shape (2,) for shape (3,)")):
        Bounded(torch.zeros(3), torch.ones(2), (3,))


def test_bad_keyword_arguments_raise():
    with pytest.raises(TypeError, match=re.escape(BOUNDS_MISSING)):
        Bounded(low=0.0, shape=(2,))
    with pytest.raises(TypeError, match=re.escape(BOUNDS_TWICE.format(new="low", old="minimum"))):
        Bounded(0.0, 1.0, minimum=0.0)
    with pytest.raises(TypeError, match=re.escape(BOUNDS_KWARG.format(key="lo"))):
        Bounded(0.0, 1.0, lo=0.0)


def test_integer_samples_include_high():
    sample = Bounded(0, 3, (2000,), dtype=torch.int64).rand()
    assert set(sample.tolist()) == {0, 1, 2, 3}


def test_infinite_bounds_still_sample_finite_values():
    spec = Bounded(0.0, float("inf"), (100,))
    sample = spec.rand()
    assert torch.isfinite(sample).all() and spec.is_in(sample)


def test_project_clamps_and_rounds():
    spec = Bounded(0.0, 1.0, (2,))
    assert spec.project(torch.tensor([2.0, -1.0])).tolist() == [1.0, 0.0]
    int_spec = Bounded(0, 5, (2,), dtype=torch.int64)
    assert int_spec.project(torch.tensor([2.6, 9.0])).tolist() == [3, 5]


def test_space_is_the_box():
    spec = Bounded(0.0, 1.0, (2,))
    assert spec.space == ContinuousBox(torch.zeros(2), torch.ones(2))
    assert spec.domain == "continuous"
    assert Bounded(0, 1, (2,), dtype=torch.int64).domain == "discrete"


def test_to_dtype_casts_bounds():
    spec = Bounded(0, 1, (2,)).to(torch.float64)
    assert spec.low.dtype == torch.float64


def test_expand_and_index_keep_elementwise_bounds():
    spec = Bounded(torch.tensor([0.0, 1.0]), torch.tensor([1.0, 2.0])).expand(3, 2)
    assert spec.low.shape == (3, 2)
    assert spec[1].low.tolist() == [0.0, 1.0]


def test_equality_compares_bounds():
    assert Bounded(0, 1, (2,)) != Bounded(0, 2, (2,))

"""Values torchrl 0.4 refuses with ``RuntimeError`` in ``encode``/``is_in``: batches of arrays
given to ``encode``, labels outside a ``MultiOneHot`` block, tensors whose shape cannot broadcast
with an n-dimensional ``Unbounded`` (``Bounded`` warns in 0.4 and raises in current torchrl)."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from rlspecs import (
    Binary,
    Bounded,
    MultiOneHot,
    SpecDomainError,
    SpecShapeError,
    Unbounded,
    set_spec_api,
)
from rlspecs._base import ENCODE_SHAPE
from rlspecs._bounded import IS_IN_SHAPE as BOUNDED_IS_IN_SHAPE
from rlspecs._one_hot import LABEL_RANGE
from rlspecs._unbounded import IS_IN_SHAPE as UNBOUNDED_IS_IN_SHAPE

SPECS = {
    "binary": lambda: Binary(4),
    "bounded": lambda: Bounded(-torch.ones(4), torch.ones(4)),
    "unbounded": lambda: Unbounded(4),
    "unbounded_2d": lambda: Unbounded((2, 4)),
}


@pytest.mark.parametrize("name", sorted(SPECS))
def test_encode_of_a_batch_of_arrays_raises_shape_mismatch(name):
    spec = SPECS[name]()
    batch = np.zeros((3, *spec.shape))
    message = ENCODE_SHAPE.format(
        got=torch.Size(batch.shape), cls=type(spec).__name__, expected=spec.shape
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        spec.encode(batch)
    with pytest.raises(SpecShapeError, match="Shape mismatch"):
        spec.encode(batch.tolist())


@pytest.mark.parametrize("name", sorted(SPECS))
def test_encode_of_a_batch_works_with_the_expanded_spec(name):
    spec = SPECS[name]()
    sample = spec.rand((3,))
    assert torch.equal(spec.expand(3, *spec.shape).encode(sample.numpy()), sample)


@pytest.mark.parametrize("name", sorted(SPECS))
def test_encode_of_a_batched_tensor_keeps_its_batch(name):
    spec = SPECS[name]()
    sample = spec.rand((3,))
    assert torch.equal(spec.encode(sample), sample)


def test_encode_of_same_numel_arrays_reshapes():
    assert Unbounded((2, 2)).encode(np.arange(4.0)).shape == (2, 2)
    assert Binary(4).encode([[0, 1, 1, 0]]).shape == (4,)


def test_multi_one_hot_encode_of_a_batch_of_array_labels_raises():
    spec = MultiOneHot([2, 3])
    message = ENCODE_SHAPE.format(
        got=torch.Size([3, 2]), cls="MultiOneHot", expected=torch.Size([2])
    )
    with pytest.raises(RuntimeError, match=re.escape(message)):
        spec.encode(np.zeros((3, 2), dtype=np.int64))
    labels = torch.tensor([[0, 2], [1, 0], [1, 1]])
    assert spec.encode(labels).shape == (3, 5)  # a tensor of labels may carry a batch


@pytest.mark.parametrize("labels", [[0, 3], [0, -1]], ids=["too_large", "negative"])
def test_multi_one_hot_label_outside_its_block_raises_domain_error(labels):
    message = LABEL_RANGE.format(cls="MultiOneHot block 1", label=labels[1], last=2)
    for exc in (RuntimeError, ValueError, SpecDomainError):
        with pytest.raises(exc, match=re.escape(message)):
            MultiOneHot([2, 3]).encode(labels)


def test_unbounded_is_in_raises_for_a_shape_that_cannot_broadcast():
    spec = Unbounded((2, 4))
    message = UNBOUNDED_IS_IN_SHAPE.format(got=(5,), cls="Unbounded", shape=(2, 4))
    with pytest.raises(RuntimeError, match=re.escape(message)):
        spec.is_in(torch.zeros(5))
    assert not spec.is_in(torch.zeros(4))  # broadcasts, but is not of the spec's shape
    assert not spec.is_in(torch.zeros(2, 4, dtype=torch.float64))
    assert spec.is_in(torch.zeros(7, 2, 4))


def test_bounded_is_in_warns_for_a_shape_that_cannot_broadcast():
    spec = Bounded(-torch.ones(2, 4), torch.ones(2, 4))
    message = BOUNDED_IS_IN_SHAPE.format(got=(5,), shape=(2, 4), cls="Bounded")
    with pytest.warns(UserWarning, match=re.escape(message)):
        assert spec.is_in(torch.zeros(5)) is False


def test_bounded_is_in_raises_for_a_shape_that_cannot_broadcast_under_current_api():
    spec = Bounded(-torch.ones(2, 4), torch.ones(2, 4))
    with set_spec_api("current"):
        with pytest.raises(RuntimeError, match=re.escape("Got a shape mismatch")):
            spec.is_in(torch.zeros(5))

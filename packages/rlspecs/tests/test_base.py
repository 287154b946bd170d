"""Shape and device parsing, and behaviours of the abstract base."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch

from rlspecs import TensorSpec, Unbounded, parse_device, parse_shape
from rlspecs._base import BAD_DEVICE, BAD_SHAPE, NO_RAND


def test_bare_int_shape_means_one_dim():
    assert parse_shape(3) == torch.Size([3])
    assert parse_shape(np.int64(2)) == torch.Size([2])
    assert Unbounded(3).shape == (3,)


def test_sequence_shapes_and_none():
    assert parse_shape((2, 1)) == torch.Size([2, 1])
    assert parse_shape([]) == torch.Size([])
    assert parse_shape(None) == torch.Size([])


def test_unparseable_shape_raises():
    with pytest.raises(ValueError, match=re.escape(BAD_SHAPE.format(shape="ab"))):
        parse_shape("ab")


@pytest.mark.parametrize(
    "device, expected",
    [("cpu", torch.device("cpu")), (torch.device("cpu"), torch.device("cpu")), (None, None)],
)
def test_parse_device(device, expected):
    assert parse_device(device) == expected


def test_int_device_means_cuda_index():
    assert parse_device(1) == torch.device("cuda", 1)


@pytest.mark.parametrize("device", ["foo", 3.5, "cuda:x"])
def test_unparseable_device_raises(device):
    with pytest.raises(ValueError, match=re.escape(BAD_DEVICE.format(device=device))):
        parse_device(device)


def test_spec_with_unparseable_device_raises():
    with pytest.raises(ValueError, match=re.escape(BAD_DEVICE.format(device="foo"))):
        Unbounded(3, device="foo")


def test_leaf_without_device_lives_on_default_device():
    assert Unbounded(3).device == torch.device("cpu")


def test_base_rand_is_abstract():
    spec = TensorSpec((2,), None, torch.float32)
    with pytest.raises(NotImplementedError, match=re.escape(NO_RAND.format(cls="TensorSpec"))):
        spec.rand()


def test_to_dtype_casts_spec():
    spec = Unbounded(3).to(torch.float64)
    assert spec.dtype == torch.float64
    assert spec.rand().dtype == torch.float64


def test_encode_reshapes_same_numel_and_accepts_scalars():
    assert Unbounded(1).encode(3.0).shape == (1,)
    assert Unbounded((2, 2)).encode([1, 2, 3, 4]).shape == (2, 2)


def test_encode_keeps_batched_tensors_but_not_batched_arrays():
    """As torchrl 0.4: a tensor may carry batch dims, an array must hold the spec's elements."""
    assert Unbounded(3).encode(torch.zeros(5, 3)).shape == (5, 3)
    with pytest.raises(RuntimeError, match="Shape mismatch"):
        Unbounded(3).encode(np.zeros((5, 3)))


def test_encode_read_only_numpy_array():
    array = np.zeros(3, dtype=np.float32)
    array.flags.writeable = False
    assert torch.equal(Unbounded(3).encode(array), torch.zeros(3))


def test_specs_are_unhashable():
    with pytest.raises(TypeError):
        hash(Unbounded(3))


def test_bare_cuda_names_the_current_device(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    assert parse_device("cuda") == torch.device("cuda", 0)
    assert parse_device(torch.device("cuda")) == torch.device("cuda", 0)
    assert parse_device("cuda:1") == torch.device("cuda", 1)

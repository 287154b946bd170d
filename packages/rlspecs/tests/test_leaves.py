"""Behaviours every leaf spec shares, on every kind and batch dims (), (3,), (3, 2)."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
import torch
from rlspecs_cases import CUDA, LEAF_FACTORIES

from rlspecs import Bounded, OneHot, SpecShapeError, TensorSpec, Unbounded
from rlspecs._base import ENCODE_SHAPE, EXPAND_SHAPE


def test_rand_lies_in_spec(leaf):
    sample = leaf.rand()
    assert sample.shape == leaf.shape
    assert sample.dtype == leaf.dtype
    assert leaf.is_in(sample)


def test_rand_with_leading_shape(leaf):
    sample = leaf.rand((2,))
    assert sample.shape == (2, *leaf.shape)
    assert leaf.is_in(sample)


def test_zero_and_one_have_shape_dtype_device(leaf):
    for value in (leaf.zero(), leaf.one(), leaf.zero((2, 1))):
        assert value.shape[value.ndim - leaf.ndim :] == leaf.shape
        assert value.dtype == leaf.dtype
        assert value.device == leaf.device
    assert leaf.zero((2, 1)).shape == (2, 1, *leaf.shape)
    assert not leaf.zero().any()


def test_is_in_rejects_other_dtype_and_shape(leaf):
    """A wrong shape is refused; Unbounded raises and Bounded warns (torchrl 0.4) if it cannot
    broadcast with the spec's shape."""
    sample = leaf.rand()
    other = torch.float64 if leaf.dtype != torch.float64 else torch.float32
    assert not leaf.is_in(sample.to(other))
    if leaf.shape:
        wrong = torch.zeros((*leaf.shape[:-1], leaf.shape[-1] + 1), dtype=leaf.dtype)
        if isinstance(leaf, Unbounded):
            with pytest.raises(SpecShapeError, match="cannot be broadcast"):
                leaf.is_in(wrong)
        elif isinstance(leaf, Bounded):
            with pytest.warns(UserWarning, match="shape mismatch"):
                assert not leaf.is_in(wrong)
        else:
            assert not leaf.is_in(wrong)
    assert not leaf.is_in("not a tensor")


def test_project_maps_any_value_into_spec(leaf):
    value = torch.randn(leaf.shape) * 10
    assert leaf.is_in(leaf.project(value))


def test_project_keeps_values_already_inside(leaf):
    sample = leaf.rand()
    assert leaf.project(sample) is sample


def test_encode_numpy_round_trip(leaf):
    sample = leaf.rand()
    encoded = leaf.encode(sample.numpy())
    assert encoded.dtype == leaf.dtype
    assert torch.equal(encoded, sample)


def test_encode_wrong_shape_names_both_shapes(leaf):
    bad = np.zeros((*leaf.shape, 7))
    message = ENCODE_SHAPE.format(
        got=torch.Size(bad.shape), cls=type(leaf).__name__, expected=leaf.shape
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        leaf.encode(bad)


def test_clone_is_equal_and_independent(leaf):
    copy = leaf.clone()
    assert copy == leaf
    assert copy is not leaf
    for attr in leaf._tensor_attrs:
        getattr(copy, attr).zero_()
        assert getattr(copy, attr).data_ptr() != getattr(leaf, attr).data_ptr()


def test_to_same_device_returns_self_and_cpu_works(leaf):
    assert leaf.to("cpu") is leaf
    assert leaf.cpu() == leaf
    assert leaf.to(torch.device("cpu")).device == torch.device("cpu")


@CUDA
def test_cuda_moves_spec_and_samples(leaf):
    moved = leaf.cuda()
    assert moved.device.type == "cuda"
    assert moved.rand().device.type == "cuda"
    assert moved.is_in(moved.rand())
    assert moved.cpu() == leaf


def test_expand_adds_leading_dims(leaf):
    expanded = leaf.expand(5, *leaf.shape)
    assert expanded.shape == (5, *leaf.shape)
    assert expanded.is_in(expanded.rand())
    assert expanded.expand(-1, *leaf.shape).shape == expanded.shape
    same = leaf.expand(leaf.shape)
    assert same == leaf and same is not leaf


def test_expand_rejects_mismatched_trailing_dims(leaf):
    wide = [i for i, size in enumerate(leaf.shape) if size != 1]
    if not wide:
        pytest.skip("a spec whose dims are all 1 expands to any shape")
    bad = list(leaf.shape)
    bad[wide[-1]] += 1
    message = EXPAND_SHAPE.format(cls=type(leaf).__name__, shape=leaf.shape, new=torch.Size(bad))
    with pytest.raises(ValueError, match=re.escape(message)):
        leaf.expand(*bad)


def test_unsqueeze_then_squeeze_round_trips(leaf):
    unsqueezed = leaf.unsqueeze(0)
    assert unsqueezed.shape == (1, *leaf.shape)
    assert unsqueezed.is_in(unsqueezed.rand())
    assert unsqueezed.squeeze(0) == leaf


def test_squeeze_without_dim_removes_size_one_batch_dims(leaf):
    spec = leaf.unsqueeze(0).unsqueeze(0)
    assert spec.squeeze() == leaf.squeeze()


def test_squeeze_of_wide_dim_keeps_the_spec(leaf):
    """As ``torch.squeeze`` (and torchrl 0.4): a dim wider than 1 is left alone."""
    spec = leaf.expand(2, *leaf.shape)
    assert spec.squeeze(0) is spec


@pytest.mark.parametrize("index", [0, slice(0, 2), torch.tensor([0, 2]), (Ellipsis, 0)], ids=str)
def test_indexing_batch_dims_matches_sample_indexing(leaf, index):
    spec = leaf.expand(3, *leaf.shape)
    if index == (Ellipsis, 0) and spec._domain_ndim == 0:
        index = 0
    if isinstance(index, tuple) and spec._domain_ndim:
        index = (0,)
    sub = spec[index]
    sample = spec.rand()
    assert sub.shape == sample[index].shape
    assert sub.is_in(sub.rand())
    if isinstance(spec, Bounded):
        assert torch.equal(sub.low, spec.low[index])


def test_eq_distinguishes_shape_and_dtype(leaf):
    assert leaf == leaf.clone()
    assert leaf != leaf.expand(2, *leaf.shape)
    other = leaf.clone()
    other.dtype = torch.float64 if leaf.dtype != torch.float64 else torch.float32
    assert leaf != other
    assert leaf != "spec"


def test_dtype_and_shape_are_assignable(leaf):
    spec = leaf.clone()
    spec.dtype = torch.int32
    assert spec.dtype == torch.int32
    spec.shape = torch.Size((7,))
    assert spec.shape == (7,)
    assert spec.ndim == 1


def test_ndim_and_numel(leaf):
    assert leaf.ndim == len(leaf.shape)
    assert leaf.numel() == leaf.shape.numel()


def test_repr_names_class_and_shape(leaf):
    text = repr(leaf)
    assert text.startswith(f"{type(leaf).__name__}(\n    shape={leaf.shape},\n    space=")
    assert text.endswith(f"    dtype={leaf.dtype},\n    domain={leaf.domain})")


def test_assert_is_in_raises_with_shape_and_dtype(leaf):
    leaf.assert_is_in(leaf.rand())
    bad = torch.zeros(*leaf.shape, 9)
    if isinstance(leaf, Unbounded) and leaf.shape:  # no broadcast: torchrl's RuntimeError
        with pytest.raises(SpecShapeError, match="cannot be broadcast"):
            leaf.assert_is_in(bad)
    elif isinstance(leaf, Bounded) and leaf.shape:  # no broadcast: torchrl 0.4 warns
        with pytest.warns(UserWarning, match="shape mismatch"):
            with pytest.raises(AssertionError, match=re.escape("shape")):
                leaf.assert_is_in(bad)
    else:
        with pytest.raises(AssertionError, match=re.escape("shape")):
            leaf.assert_is_in(bad)


def test_every_leaf_kind_is_a_tensor_spec():
    for factory in LEAF_FACTORIES.values():
        assert isinstance(factory(()), TensorSpec)


def test_one_hot_cannot_unsqueeze_inside_domain():
    with pytest.raises(ValueError, match="domain"):
        OneHot(3).unsqueeze(-1)


def test_unbind_splits_a_batch_dim(leaf):
    spec = leaf.expand(2, *leaf.shape)
    parts = spec.unbind(0)
    assert len(parts) == 2 and all(part == leaf for part in parts)


def test_pickle_round_trip(leaf):
    assert pickle.loads(pickle.dumps(leaf)) == leaf


def test_to_none_keeps_the_device(leaf):
    assert leaf.to(None) is leaf

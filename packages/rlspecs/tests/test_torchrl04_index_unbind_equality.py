"""torchrl 0.4's nested-list indexing, ``Bounded.unbind`` errors and the equality of an
``Unbounded`` with a ``Bounded`` whose space spans the dtype, in the n-dimensional case too."""

from __future__ import annotations

import re

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
    Unbounded,
    set_spec_api,
)
from rlspecs._indexing import NESTED_LIST_INDEX, RAGGED_LIST_INDEX

INDEXED = {
    "unbounded": lambda: Unbounded((3, 4)),
    "categorical": lambda: Categorical(5, shape=(3, 4)),
    "one_hot": lambda: OneHot(4, shape=(3, 4), mask=torch.rand(3, 4) > -1),
    "binary": lambda: Binary(shape=(3, 4)),
    "multi_one_hot": lambda: MultiOneHot([2, 2], shape=(3, 4)),
    "non_tensor": lambda: NonTensor(shape=(3, 4)),
}
DOMAIN_NDIM = {"one_hot": 1, "binary": 1, "multi_one_hot": 1}


@pytest.mark.parametrize("name", sorted(INDEXED))
def test_nested_list_index_reads_as_a_tensor_index(name):
    spec = INDEXED[name]()
    trailing = (4,) if DOMAIN_NDIM.get(name) else ()
    expected = (2, 2, *trailing) if DOMAIN_NDIM.get(name) else (2, 2, 4)
    assert spec[[[0, 1], [1, 2]]].shape == expected
    assert spec[[[0, 1], [1, 2]]] == spec[torch.tensor([[0, 1], [1, 2]])]
    if not DOMAIN_NDIM.get(name):
        assert spec[0, [[0, 1]]].shape == (1, 2)


def test_nested_list_index_of_a_masked_one_hot_indexes_its_mask():
    mask = torch.rand(3, 4) > 0.3
    mask[..., 0] = True
    spec = OneHot(4, shape=(3, 4), mask=mask)
    assert torch.equal(spec[[[0, 2]]].mask, mask[torch.tensor([[0, 2]])])


def test_nested_list_index_of_a_composite():
    spec = Composite(a=Unbounded((3, 4, 2)), b=Bounded(0.0, 1.0, (3, 4)), shape=(3, 4))
    out = spec[[[0, 1], [1, 2]]]
    assert out.shape == (2, 2, 4) and out["a"].shape == (2, 2, 4, 2)


@pytest.mark.parametrize(
    "spec",
    [Bounded(0.0, 1.0, (3, 4)), MultiCategorical([2] * 4, (3, 4))],
    ids=["bounded", "multi_categorical"],
)
def test_bounded_and_multi_categorical_refuse_nested_lists(spec):
    for idx in ([[0, 1], [1, 2]], (0, [[0, 1]])):
        with pytest.raises(NotImplementedError, match=re.escape(NESTED_LIST_INDEX.format(idx=idx))):
            spec[idx]


def test_a_ragged_nested_list_raises_index_error():
    idx = [[0, 1], [2]]
    with pytest.raises(IndexError, match=re.escape(RAGGED_LIST_INDEX.format(idx=idx))):
        Unbounded((3, 4))[idx]


def test_bounded_unbind_of_the_last_dim_raises_as_torchrl():
    spec = Bounded(-torch.ones(5, 4), torch.ones(5, 4))
    for dim in (-1, 2):
        with pytest.raises(
            ValueError,
            match=re.escape(
                f"Final dimension of Bounded must remain unchanged: cannot unbind dim {dim} of "
                "shape (5, 4)"
            ),
        ):
            spec.unbind(dim)
    with pytest.raises(
        ValueError, match=re.escape("Cannot unbind along dim -3 with shape (5, 4).")
    ):
        spec.unbind(-3)
    parts = spec.unbind(1)  # a positive last dim unbinds, as in torchrl
    assert len(parts) == 4 and parts[0].shape == (5,)
    assert Unbounded((5, 4)).unbind(-1)[0].shape == (5,)  # Unbounded unbinds any dim


def _make_fields_equal(to, source):
    to.shape = source.shape
    to.space = source.space
    to.device = source.device
    to.dtype = source.dtype
    to.domain = source.domain
    return to


@pytest.mark.parametrize("shape", [(), (5,), (4, 5), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.int32])
def test_nd_unbounded_equals_a_bounded_given_its_space(shape, dtype):
    unbounded = Unbounded(shape, device="cpu", dtype=dtype)
    other = _make_fields_equal(Bounded(0, 1, torch.Size((1,)), "cpu", torch.float32), unbounded)
    assert unbounded == other and other == unbounded


@pytest.mark.parametrize("shape", [(3,), (2, 3)])
def test_nd_unbounded_equals_a_bounded_spanning_its_dtype(shape):
    info = torch.finfo(torch.float32)
    assert Unbounded(shape) == Bounded(info.min, info.max, shape)
    assert Bounded(info.min, info.max, shape) == Unbounded(shape)
    assert Unbounded(shape) != Bounded(-1.0, 1.0, shape)


def test_float_unbounded_of_shape_one_has_an_infinite_box_in_torchrl_04():
    unbounded = Unbounded(1, device="cpu", dtype=torch.float16)
    assert torch.isinf(unbounded.space.low).all() and torch.isinf(unbounded.space.high).all()
    other = _make_fields_equal(Bounded(0, 1, torch.Size((1,)), "cpu", torch.float16), unbounded)
    assert unbounded != other  # [-inf, inf] spans no finite dtype range
    with set_spec_api("current"):
        assert unbounded.space.high.item() == torch.finfo(torch.float16).max
        assert unbounded == _make_fields_equal(Bounded(0, 1, (1,)), unbounded)


def test_a_bounded_with_an_assigned_space_compares_by_space():
    a, b = Bounded(0.0, 1.0, (2,)), Bounded(0.0, 1.0, (2,))
    b.space = Bounded(0.0, 2.0, (2,)).space
    assert a != b
    a.space = b.space
    assert a == b

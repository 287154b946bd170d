"""``enumerate`` and ``cardinality`` (current torchrl) on every spec that has them, and the
errors of the specs that do not."""

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
)
from rlspecs._enumerate import HETEROGENEOUS_NVEC, MASK_ROWS, MASKED_ENUMERATE, NO_MASK_ENUMERATE

DISCRETE = {
    "categorical": (lambda: Categorical(5, shape=(3,)), 5),
    "categorical_bool": (lambda: Categorical(2, shape=(1,), dtype=torch.bool), 2),
    "one_hot": (lambda: OneHot(4, shape=(2, 4)), 4),
    "multi_categorical": (lambda: MultiCategorical([2, 3], shape=(2, 2)), 6),
    "multi_one_hot": (lambda: MultiOneHot([2, 3], shape=(2, 5)), 6),
    "binary": (lambda: Binary(shape=(2, 3)), 8),
    "composite": (lambda: Composite(a=Categorical(2), b=OneHot(3)), 6),
    "batched_composite": (
        lambda: Composite(a=Categorical(2, shape=(4,)), b=Binary(shape=(4, 1)), shape=(4,)),
        4,
    ),
}


@pytest.mark.parametrize("name", sorted(DISCRETE))
def test_enumerate_lists_every_value_once_and_each_is_in_the_spec(name):
    factory, count = DISCRETE[name]
    spec = factory()
    values = spec.enumerate()
    assert values.shape[0] == count == spec.cardinality()
    assert values.shape[1:] == spec.shape
    for value in values.unbind(0):
        assert spec.is_in(value)
    flat = values.reshape(count, -1) if isinstance(values, torch.Tensor) else None
    if flat is not None:
        assert flat.unique(dim=0).shape[0] == count


def test_categorical_enumerate_values():
    assert Categorical(3).enumerate().tolist() == [0, 1, 2]
    assert Categorical(2, shape=(2,)).enumerate().tolist() == [[0, 0], [1, 1]]


def test_categorical_enumerate_with_mask():
    spec = Categorical(4, mask=torch.tensor([True, False, True, False]))
    assert spec.enumerate().tolist() == [0, 1, 2, 3]
    assert spec.enumerate(use_mask=True).tolist() == [0, 2]
    rows = torch.tensor([[True, False], [False, True]])
    message = MASK_ROWS.format(cls="Categorical", shape=(2, 2))
    with pytest.raises(IndexError, match=re.escape(message)):
        Categorical(2, shape=(2,), mask=rows).enumerate(use_mask=True)


def test_one_hot_and_multi_errors():
    with pytest.raises(
        NotImplementedError, match=re.escape(NO_MASK_ENUMERATE.format(cls="OneHot"))
    ):
        OneHot(3).enumerate(use_mask=True)
    with pytest.raises(
        NotImplementedError, match=re.escape(NO_MASK_ENUMERATE.format(cls="MultiCategorical"))
    ):
        MultiCategorical([2, 2]).enumerate(use_mask=True)
    masked = MultiCategorical([2, 2], mask=torch.tensor([True, True, True, False]))
    with pytest.raises(
        RuntimeError, match=re.escape(MASKED_ENUMERATE.format(cls="MultiCategorical"))
    ):
        masked.enumerate()
    hetero = MultiCategorical(torch.tensor([[2, 3], [3, 3]]))
    message = HETEROGENEOUS_NVEC.format(nvec=[[2, 3], [3, 3]], cls="MultiCategorical")
    with pytest.raises(ValueError, match=re.escape(message)):
        hetero.enumerate()
    with pytest.raises(ValueError, match=re.escape(message)):
        hetero.cardinality()


def test_composite_enumerate_is_the_product_of_its_entries():
    values = Composite(a=Categorical(2), b=Categorical(3), none=None).enumerate()
    assert values.batch_size == (6,)
    pairs = list(zip(values["a"].tolist(), values["b"].tolist()))
    assert sorted(pairs) == [(a, b) for a in range(2) for b in range(3)]
    assert Composite().cardinality() == 0
    assert Composite().enumerate().batch_size == ()


def test_lazy_stacks_enumerate_member_by_member_and_have_no_cardinality():
    masks = (torch.tensor([True, True, False]), torch.tensor([True, False, True]))
    lazy = torch.stack([Categorical(3, mask=mask) for mask in masks], 0)
    assert lazy.enumerate().tolist() == [[0, 0], [1, 1], [2, 2]]  # values lead, then the stack
    composites = torch.stack(
        [Composite(a=Categorical(2)), Composite(a=Categorical(2), b=Binary(1))], 0
    )
    values = composites.enumerate()
    assert values.tensordicts[0].batch_size == (2,) and values.tensordicts[1].batch_size == (4,)
    for spec in (lazy, composites):
        with pytest.raises(NotImplementedError, match="`cardinality` is not implemented"):
            spec.cardinality()


@pytest.mark.parametrize(
    "spec,method,message",
    [
        (Unbounded(3), "enumerate", "enumerate cannot be called with continuous specs."),
        (Unbounded(3), "cardinality", "`cardinality` is not implemented for Unbounded specs."),
        (
            Bounded(0, 1, (3,)),
            "enumerate",
            "enumerate is not implemented for spec of class Bounded.",
        ),
        (NonTensor(), "enumerate", "Cannot enumerate a NonTensor spec."),
        (NonTensor(), "cardinality", "Cannot enumerate a NonTensor spec."),
    ],
    ids=[
        "unbounded_enumerate",
        "unbounded_cardinality",
        "bounded",
        "non_tensor",
        "non_tensor_card",
    ],
)
def test_continuous_and_non_tensor_specs_cannot_be_enumerated(spec, method, message):
    with pytest.raises(NotImplementedError, match=re.escape(message)):
        getattr(spec, method)()


def test_bounded_cardinality_is_infinite_and_composites_multiply():
    assert Bounded(0, 1, (3,)).cardinality() == float("inf")
    assert Composite(a=Categorical(2), b=Bounded(0, 1, (1,))).cardinality() == float("inf")
    assert Composite(a=MultiOneHot([2, 2]), b=Binary(2)).cardinality() == 16

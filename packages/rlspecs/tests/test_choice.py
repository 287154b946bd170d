"""``Choice`` (current torchrl): a sample drawn from one of several specs or non-tensor values."""

from __future__ import annotations

import pickle
import re

import pytest
import torch
from tensordict import NonTensorData, NonTensorStack

from rlspecs import (
    Bounded,
    Categorical,
    Choice,
    Composite,
    Stacked,
    Unbounded,
)
from rlspecs._choice import (
    CHOICE_TYPE,
    CHOICES_EMPTY,
    CHOICES_NOT_LIST,
    NO_INDEX,
    NO_PROJECT,
    NO_SUBSCRIPT,
    NO_UNBIND,
)


def boxes():
    return Choice([Bounded(0.0, 1.0, (1,)), Bounded(10.0, 11.0, (1,))])


def words():
    return Choice([NonTensorData(s) for s in ["a", "b", "c"]])


def test_shape_dtype_device_come_from_the_choices():
    spec = boxes()
    assert spec.shape == (1,) and spec.dtype == torch.float32 and spec.device.type == "cpu"
    assert spec.num_choices == 2 and spec.space is None and spec.domain is None


def test_choices_are_copies():
    first = Bounded(0.0, 1.0, (1,))
    spec = Choice([first])
    assert spec.choices[0] == first and spec.choices[0] is not first


def test_rand_draws_from_every_choice():
    torch.manual_seed(0)
    spec = boxes()
    values = torch.cat([spec.rand() for _ in range(200)])
    assert bool(((values < 1) | (values >= 10)).all())
    assert bool((values < 1).any()) and bool((values >= 10).any())
    assert spec.rand((4, 2)).shape == (4, 2, 1)


def test_zero_and_one_use_the_first_and_second_choice():
    spec = Choice([Categorical(2), Categorical(3)])
    assert spec.zero().item() == 0 and spec.one().item() == 1
    assert Choice([Categorical(2)]).one().item() == 1


def test_is_in_accepts_what_any_choice_accepts():
    spec = boxes()
    assert spec.is_in(torch.tensor([0.5])) and spec.is_in(torch.tensor([10.5]))
    assert not spec.is_in(torch.tensor([5.0]))


def test_project_of_a_value_outside_every_choice_raises():
    spec = boxes()
    value = torch.tensor([0.5])
    assert spec.project(value) is value
    with pytest.raises(NotImplementedError, match=re.escape(NO_PROJECT)):
        spec.project(torch.tensor([5.0]))


def test_non_tensor_choices_sample_compare_and_count():
    torch.manual_seed(0)
    spec = words()
    assert {spec.rand().data for _ in range(50)} == {"a", "b", "c"}
    assert spec.is_in(NonTensorData("b")) and not spec.is_in(NonTensorData("z"))
    assert spec.zero().data == "a" and spec.cardinality() == 3
    assert [v.data for v in spec.enumerate()] == ["a", "b", "c"]
    assert spec.encode("x").data == "x"


def test_non_tensor_stack_choices():
    spec = Choice([NonTensorStack(NonTensorData("a"), NonTensorData("b"))])
    assert spec.shape == (2,) and spec.is_in(NonTensorStack(NonTensorData("a"), NonTensorData("b")))


@pytest.mark.parametrize(
    "choices,exc,message",
    [
        ((Unbounded(1),), TypeError, CHOICES_NOT_LIST),
        ([], ValueError, CHOICES_EMPTY),
        ([torch.zeros(1)], TypeError, CHOICE_TYPE.format(type=torch.Tensor)),
        ([Unbounded(1), Categorical(2)], TypeError, "All choices must be the same type"),
        ([Unbounded(1), Unbounded(2)], ValueError, "All choices must have the same shape"),
        (
            [Unbounded(1), Unbounded(1, dtype=torch.float64)],
            ValueError,
            "All choices must have the same dtype",
        ),
    ],
    ids=["not_a_list", "empty", "tensor", "types", "shapes", "dtypes"],
)
def test_bad_choices_raise(choices, exc, message):
    with pytest.raises(exc, match=re.escape(message)):
        Choice(choices)


def test_index_subscript_and_unbind_are_not_defined():
    spec = boxes()
    with pytest.raises(NotImplementedError, match=re.escape(NO_INDEX)):
        spec.index(torch.zeros(1), torch.zeros(1))
    with pytest.raises(TypeError, match=re.escape(NO_SUBSCRIPT)):
        spec[0]
    with pytest.raises(NotImplementedError, match=re.escape(NO_UNBIND)):
        spec.unbind(0)


def test_shape_operations_apply_to_every_choice():
    spec = boxes()
    assert spec.expand(3, 1).shape == (3, 1)
    assert all(c.shape == (3, 1) for c in spec.expand(3, 1).choices)
    assert spec.unsqueeze(0).shape == (1, 1) and spec.unsqueeze(0).squeeze(0) == spec
    assert spec.reshape(1, 1).shape == (1, 1)
    assert spec.to(torch.float64).dtype == torch.float64
    assert spec.to("cpu") == spec


def test_equality_and_clone():
    spec = boxes()
    assert spec == spec.clone() and spec.clone() is not spec
    assert spec != Choice([Bounded(0.0, 1.0, (1,)), Bounded(10.0, 12.0, (1,))])
    assert spec != Choice([Bounded(0.0, 1.0, (1,))])
    assert words() == words() and words() != boxes()


def test_equal_choices_stack_densely_and_different_ones_lazily():
    dense = torch.stack([boxes(), boxes()], 0)
    assert type(dense) is Choice and dense.shape == (2, 1)
    assert dense.rand().shape == (2, 1)
    other = Choice([Bounded(0.0, 1.0, (1,)), Bounded(20.0, 21.0, (1,))])
    lazy = torch.stack([boxes(), other], 0)
    assert isinstance(lazy, Stacked) and lazy[1] == other
    assert lazy.rand().shape == (2, 1)


def test_choice_inside_a_composite():
    spec = Composite(x=boxes(), word=words())
    td = spec.rand()
    assert td["x"].shape == (1,) and td["word"] in ("a", "b", "c")
    assert spec.is_in(td)


def test_cardinality_and_enumerate_of_spec_choices():
    spec = Choice([Categorical(2), Categorical(3)])
    assert spec.cardinality() == 5
    assert [v.item() for v in spec.enumerate()] == [0, 1, 0, 1, 2]
    assert boxes().cardinality() == float("inf")


def test_choice_pickles():
    spec = boxes()
    assert pickle.loads(pickle.dumps(spec)) == spec

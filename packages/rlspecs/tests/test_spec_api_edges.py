"""Edge cases of the torchrl 0.4 spec API: registers, label ranges, index checks, lazy stacks."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rlspecs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Stacked,
    StackedComposite,
    Unbounded,
)
from rlspecs._base import NO_INDEX
from rlspecs._indexing import BAD_INDEX, ONE_ELLIPSIS


def test_one_hot_register_maps_values_in_order_of_appearance():
    spec = OneHot(3, use_register=True)
    assert spec.encode("left").tolist() == [True, False, False]
    assert spec.encode("right").tolist() == [False, True, False]
    assert spec.encode("left").tolist() == [True, False, False]
    assert spec.to_numpy(spec.encode("right")).item() == "right"
    copy = spec.clone()
    copy.encode("up")
    assert "up" not in spec.register and copy == spec
    copy.encode("up")
    with pytest.raises(ValueError, match="register is full"):
        copy.encode("down")


def test_label_range_is_checked_on_encode():
    with pytest.raises(ValueError, match=re.escape("labels must lie in 0..2")):
        OneHot(3).encode(3)
    with pytest.raises(ValueError, match="block 1"):
        MultiOneHot([2, 2]).encode([0, 2])
    with pytest.raises(ValueError, match="n >= 1"):
        MultiOneHot([2, 0])
    assert MultiOneHot([1, 1]).encode([0, 0]).tolist() == [True, True]


def test_safe_conversions_check_membership():
    with pytest.raises(AssertionError):
        OneHot(3).to_categorical(torch.tensor([True, True, False]), safe=True)
    with pytest.raises(AssertionError):
        MultiOneHot([2, 2]).to_numpy(torch.tensor([True, True, False, True]), safe=True)
    with pytest.raises(AssertionError):
        Categorical(3).to_one_hot(torch.tensor(5), safe=True)
    with pytest.raises(AssertionError):
        MultiCategorical([2, 3]).to_one_hot(torch.tensor([2, 0]), safe=True)
    assert OneHot(3).to_categorical(torch.tensor([True, True, False]), safe=False).item() == 0


def test_index_is_only_defined_for_categorical_values():
    for spec in (Binary(3), Composite()):
        with pytest.raises(
            NotImplementedError, match=re.escape(NO_INDEX.format(cls=type(spec).__name__))
        ):
            spec.index(torch.zeros(3, dtype=torch.int64), torch.zeros(3))


def test_index_components_are_checked():
    spec = Bounded(0.0, 1.0, (3, 4))
    assert spec[np.int64(1)].shape == (4,)
    with pytest.raises(IndexError, match=re.escape(BAD_INDEX.format(type="str"))):
        spec["a"]
    with pytest.raises(IndexError, match="float32 tensor"):
        spec[torch.tensor([0.0])]
    with pytest.raises(IndexError, match="boolean index of shape"):
        spec[torch.tensor([True, False])]
    assert spec[torch.tensor([True, False, True])].shape == (2, 4)
    with pytest.raises(IndexError, match=re.escape("single ellipsis")):
        spec[..., 0, ...]
    assert ONE_ELLIPSIS.startswith("an index can only have a single ellipsis")
    with pytest.raises(IndexError, match="out of bounds for dim 1 of size 4"):
        spec[:, torch.tensor([0, 4])]


def test_squeeze_edge_cases():
    spec = Unbounded((2, 3))
    assert spec.squeeze() is spec
    one_hot = OneHot(1, shape=(1, 1))
    assert one_hot.squeeze().shape == (1,)
    with pytest.raises(ValueError, match="domain dim"):
        one_hot.squeeze(-1)
    composite = Composite(a=Unbounded((2, 3)), shape=(2,))
    assert composite.squeeze(0) is composite
    with pytest.raises(IndexError, match="expected a batch dim"):
        composite.squeeze(3)
    with pytest.raises(ValueError, match="cannot expand"):
        Unbounded(3).expand(-2, 3)


def test_multi_categorical_sampling_paths():
    torch.manual_seed(0)
    flags = MultiCategorical([2, 3], dtype=torch.bool)
    sample = flags.rand((100,))
    assert sample.dtype == torch.bool and flags.is_in(sample)
    uneven = MultiCategorical(torch.tensor([[2, 3], [4, 5]]))
    sample = uneven.rand((500,))
    assert uneven.is_in(sample)
    assert sample[:, 1].max(0).values.tolist() == [3, 4]
    same = MultiCategorical([3, 3, 3], dtype=torch.int32)
    assert same.rand((10,)).dtype == torch.int32
    with pytest.raises(ValueError, match="same nvec across batch dims"):
        uneven.to_one_hot_spec()
    with pytest.raises(ValueError, match="does not broadcast"):
        MultiCategorical([2, 3], shape=())


def test_composite_details():
    spec = Composite(a=Unbounded(3), nested=Composite(b=None))
    assert spec.domain == "composite"
    assert repr(spec.keys(True)).startswith("_CompositeKeys(")
    assert 0 not in spec.keys()
    assert spec.get(("nested", "b"), 3) is None and spec.get(("nested", "x"), 3) == 3
    spec.device = "cpu"
    assert spec["a"].device == torch.device("cpu") and spec["nested"].device == torch.device("cpu")
    spec.lock_(recurse=False)
    with pytest.raises(RuntimeError, match="Cannot modify a locked CompositeSpec"):
        spec["new", "leaf"] = Unbounded(3)
    spec["nested", "c"] = Unbounded(3)  # the nested composite is not locked
    td = spec.rand()
    spec.type_check(td, "a")
    with pytest.raises(TypeError, match="key 'a'"):
        spec.type_check(td.set("a", td["a"].double()), "a")


def test_stacked_leaf_samples_and_projection():
    stacked = Stacked(Unbounded(3), Unbounded(2), dim=0)
    assert stacked.zero().is_nested and stacked.one().is_nested
    nested = stacked.rand()
    assert stacked.project(nested).is_nested
    assert stacked.project("not a value") == "not a value"
    assert not stacked.is_in("x")
    with pytest.raises(AssertionError):
        stacked.assert_is_in(torch.zeros(3))
    with pytest.raises(ValueError, match="members along dim 0"):
        stacked.encode(np.zeros((3, 3)))
    assert [len(x) for x in stacked.to_numpy(nested)] == [3, 2]
    dense = Stacked(Bounded(0, 1, (2,)), Bounded(0, 2, (2,)), dim=0)
    assert dense[torch.tensor(1)] == Bounded(0, 2, (2,))
    assert dense[torch.tensor([False, True])] == Bounded(0, 2, (2,)).unsqueeze(0)
    assert dense.unbind(1)[0].shape == (2,)
    assert Stacked([Bounded(0, 1, (2,))], dim=0).squeeze(0) == Bounded(0, 1, (2,))
    with pytest.raises(ValueError, match="empty"):
        Stacked()
    with pytest.raises(IndexError, match="out of range"):
        Stacked(Unbounded(3), dim=3)
    with pytest.raises(IndexError, match="expected a dim"):
        dense.squeeze(5)
    with pytest.raises(TypeError, match="value.dtype"):
        dense.type_check(torch.zeros(3, dtype=torch.int64))


def test_stacked_composite_project_shape_and_device():
    lazy = torch.stack(
        [Composite(a=Bounded(0, 1, (2,))), Composite(a=Bounded(0, 2, (2,)), b=Unbounded(1))], 0
    )
    td = lazy.rand()
    td.tensordicts[0]["a"] += 5
    projected = lazy.project(td)
    assert isinstance(projected, LazyStackedTensorDict) and lazy.is_in(projected)
    lazy.shape = (2,)
    assert lazy.shape == (2,)
    lazy.device = "cpu"
    assert all(m.device == torch.device("cpu") for m in lazy.members)
    assert isinstance(lazy, StackedComposite)
    dense_td = TensorDict(a=torch.zeros(2, 2), batch_size=[2])
    with pytest.raises(KeyError, match="key 'b' of member 1"):  # torchrl 0.4 raises too
        lazy.is_in(dense_td)


def test_lazy_stack_of_partial_composites():
    a = Composite(obs=Unbounded(3), act=None)
    b = Composite(obs=Unbounded(2), act=None)
    lazy = torch.stack([a, b], 0)
    assert lazy["act"] is None and isinstance(lazy["obs"], Stacked)
    assert set(lazy.rand().keys()) == {"obs"}
    mixed = torch.stack([a, Composite(obs=Unbounded(2), act=Unbounded(1))], 0)
    with pytest.raises(ValueError, match="None in some members"):
        mixed["act"]
    dense = torch.stack([a, a.clone()], 0)
    assert dense["act"] is None and dense.shape == (2,)


def test_space_assignment_keeps_none_and_stacks_refuse_it():
    """A leaf keeps the space it is given (None too); a lazy stack's space is read-only."""
    import torch

    from rlspecs import Bounded, Composite, Unbounded

    leaf = Bounded(0, 1, (2,))
    leaf.space = None
    assert leaf.space is None
    for stack in (
        torch.stack([Bounded(0, 1, (2,)), Bounded(0, 2, (2,))], 0),
        torch.stack([Composite(a=Unbounded(2)), Composite(a=Unbounded(2), b=Unbounded(1))], 0),
    ):
        assert stack.space is None
        with pytest.raises(AttributeError, match=r"space is read-only.*spec\[i\]\.space"):
            stack.space = None

"""Stacking specs: ``torch.stack``/``stack_specs``, ``Stacked`` and ``StackedComposite``."""

from __future__ import annotations

import pickle
import re

import pytest
import torch
from rlspecs_cases import BATCHES, LEAF_FACTORIES
from tensordict import LazyStackedTensorDict

from rlspecs import (
    Bounded,
    Composite,
    LazyStackedCompositeSpec,
    LazyStackedTensorSpec,
    Stacked,
    StackedComposite,
    Unbounded,
    stack_specs,
)
from rlspecs._composite import LOCKED
from rlspecs._stack import EMPTY_STACK, HETERO_SAMPLE, STACK_NDIM, STACK_TYPES


@pytest.mark.parametrize("kind", sorted(LEAF_FACTORIES))
@pytest.mark.parametrize("dim", [0, -1])
def test_stacking_equal_leaves_is_dense(kind, dim):
    spec = LEAF_FACTORIES[kind](())
    if spec._domain_ndim and dim == -1 and kind != "binary":  # Binary: current torchrl's
        with pytest.raises(ValueError, match="domain"):
            torch.stack([spec, spec.clone()], dim)
        return
    stacked = torch.stack([spec, spec.clone()], dim)
    assert type(stacked) is type(spec)
    expected = list(spec.shape)
    expected.insert(dim if dim >= 0 else len(expected) + 1 + dim, 2)
    assert stacked.shape == tuple(expected)
    assert stacked.is_in(stacked.rand())


@pytest.mark.parametrize("batch", BATCHES)
def test_stacking_equal_composites_is_dense(batch):
    spec = Composite(a=Unbounded((*batch, 3)), shape=batch)
    stacked = stack_specs([spec, spec.clone(), spec.clone()], 0)
    assert type(stacked) is Composite
    assert stacked.shape == (3, *batch)
    assert stacked["a"].shape == (3, *batch, 3)


def test_stacking_different_leaves_is_lazy():
    stacked = torch.stack([Unbounded(3), Unbounded(2)], 0)
    assert isinstance(stacked, Stacked) and LazyStackedTensorSpec is Stacked
    assert stacked.shape == (2, -1)
    assert stacked[0] == Unbounded(3) and stacked[1] == Unbounded(2)
    assert stacked.members == [Unbounded(3), Unbounded(2)] and len(stacked) == 2


def test_lazy_leaf_samples_are_nested_along_dim_zero():
    stacked = Stacked(Unbounded(3), Unbounded(2), dim=0)
    sample = stacked.rand()
    assert sample.is_nested
    assert stacked.is_in(sample)
    assert not stacked.is_in(torch.zeros(3))


def test_lazy_leaf_samples_of_same_shape_are_dense():
    stacked = Stacked(Bounded(0, 1, (3,)), Bounded(0, 2, (3,)), dim=1)
    sample = stacked.rand((4,))
    assert sample.shape == (4, 3, 2)
    assert stacked.is_in(sample[0])
    projected = stacked.project(torch.full((3, 2), 5.0))
    assert projected[:, 0].max() == 1 and projected[:, 1].max() == 2


def test_lazy_leaf_samples_off_dim_zero_raise():
    stacked = Stacked(Unbounded((2, 3)), Unbounded((2, 2)), dim=1)
    message = HETERO_SAMPLE.format(shapes=[(2, 3), (2, 2)], dim=1)
    with pytest.raises(ValueError, match=re.escape(message)):
        stacked.rand()


def test_stack_errors():
    with pytest.raises(ValueError, match=re.escape(EMPTY_STACK)):
        stack_specs([])
    with pytest.raises(ValueError, match=re.escape(STACK_NDIM.format(shapes=[(3,), (2, 2)]))):
        stack_specs([Unbounded(3), Unbounded((2, 2))])
    with pytest.raises(
        TypeError, match=re.escape(STACK_TYPES.format(types=["Composite", "Unbounded"]))
    ):
        stack_specs([Composite(), Unbounded(())])
    with pytest.raises(IndexError, match="out of range"):
        stack_specs([Unbounded(3)], 3)


def agents(batch=()):
    return [
        Composite(obs=Unbounded((*batch, 3)), shared=Bounded(0, 1, (*batch, 2)), shape=batch),
        Composite(obs=Unbounded((*batch, 2)), shared=Bounded(0, 1, (*batch, 2)), shape=batch),
        Composite(
            obs=Unbounded((*batch, 2)),
            shared=Bounded(0, 1, (*batch, 2)),
            extra=Unbounded((*batch, 1)),
            shape=batch,
        ),
    ]


@pytest.fixture
def lazy(batch):
    return torch.stack(agents(batch), dim=len(batch))


def test_stacking_different_composites_is_lazy(lazy, batch):
    assert isinstance(lazy, StackedComposite) and isinstance(lazy, Composite)
    assert LazyStackedCompositeSpec is StackedComposite
    assert lazy.shape == (*batch, 3)
    assert lazy.dim == len(batch)


def test_lazy_composite_keys_are_shared_keys(lazy):
    assert set(lazy.keys()) == {"obs", "shared"}
    assert set(lazy.keys(True, True)) == {"obs", "shared"}
    assert "extra" not in lazy.keys()
    assert len(lazy) == lazy.shape[0] and set(lazy) == {"obs", "shared"}
    assert {k for k, _ in lazy.items()} == {"obs", "shared"}


def test_lazy_composite_entries_stack_densely_when_equal(lazy, batch):
    assert type(lazy["shared"]) is Bounded
    assert lazy["shared"].shape == (*batch, 3, 2)
    assert isinstance(lazy["obs"], Stacked)
    assert lazy["obs"].shape == (*batch, 3, -1)


def test_lazy_composite_samples_are_lazy_stacks(lazy, batch):
    for method in ("rand", "zero", "one"):
        td = getattr(lazy, method)()
        assert isinstance(td, LazyStackedTensorDict)
        assert td.batch_size == (*batch, 3)
        assert td.stack_dim == len(batch)
    td = lazy.rand((4,))
    assert td.batch_size == (4, *batch, 3)
    assert lazy.is_in(lazy.rand())
    assert not lazy.is_in(lazy.rand().tensordicts[0])


def test_indexing_the_stack_dim_gives_the_member(lazy, batch):
    members = agents(batch)
    index = (Ellipsis, 2)
    assert lazy[index] == members[2]
    assert lazy.unbind(len(batch))[0] == members[0]
    sub = lazy[(Ellipsis, slice(0, 2))]
    assert isinstance(sub, StackedComposite) and sub.shape == (*batch, 2)


def test_indexing_before_the_stack_dim():
    lazy = torch.stack(agents((4,)), dim=1)
    sub = lazy[0]
    assert isinstance(sub, StackedComposite)
    assert sub.shape == (3,) and sub.dim == 0
    assert lazy[1, 2] == agents((4,))[2][1]
    assert lazy[torch.tensor([0, 1]), 0].shape == (2,)


def test_expand_lazy_composite(lazy, batch):
    expanded = lazy.expand(2, *lazy.shape)
    assert isinstance(expanded, StackedComposite)
    assert expanded.shape == (2, *batch, 3)
    assert expanded.dim == lazy.dim + 1
    assert expanded.is_in(expanded.rand())
    with pytest.raises(ValueError, match="the stack dim cannot change size"):
        lazy.expand(*lazy.shape[:-1], 5)
    with pytest.raises(ValueError, match="the stack dim cannot change size"):
        lazy.expand(())


def test_expand_grows_size_one_dims_and_keeps_heterogeneous_ones():
    stacked = torch.stack([Unbounded((1, 3)), Unbounded((1, 2))], 0)
    assert stacked.shape == (2, 1, -1)
    expanded = stacked.expand(4, 2, 5, -1)
    assert expanded.shape == (4, 2, 5, -1)
    assert expanded[:, 1].shape == (4, 5, 2)


def test_stacking_equal_lazy_stacks_is_dense(lazy, batch):
    stacked = torch.stack([lazy, lazy.clone()], 0)
    assert isinstance(stacked, StackedComposite)
    assert stacked.shape == (2, *batch, 3)
    assert stacked.dim == lazy.dim + 1
    assert stacked.is_in(stacked.rand())


def test_stacking_composites_that_hold_lazy_stacks(lazy, batch):
    outer = Composite(agents=lazy, state=Unbounded((*batch, 2)), shape=batch)
    stacked = torch.stack([outer, outer.clone()], 0)
    assert type(stacked) is Composite
    assert stacked["agents"].shape == (2, *batch, 3)
    td = stacked.rand()
    assert isinstance(td["agents"], LazyStackedTensorDict)
    assert stacked.is_in(td)


def test_unsqueeze_squeeze_lazy(lazy, batch):
    unsqueezed = lazy.unsqueeze(0)
    assert unsqueezed.shape == (1, *batch, 3)
    assert unsqueezed.squeeze(0) == lazy
    after = lazy.unsqueeze(-1)
    assert after.shape == (*batch, 3, 1) and after.dim == lazy.dim


def test_clone_to_and_eq(lazy):
    copy = lazy.clone()
    assert copy == lazy and copy is not lazy
    moved = lazy.to("cpu")
    assert moved.device == torch.device("cpu") and moved.to("cpu") is moved
    with pytest.raises(ValueError, match="Only device casting is allowed"):
        lazy.to(torch.float64)
    assert lazy != torch.stack(agents()[:2], 0) or lazy.ndim != 1


def test_set_and_delete_on_every_member(lazy, batch):
    lazy["new"] = Unbounded((*batch, 3, 5))
    assert all(m["new"].shape == (*batch, 5) for m in lazy.members)
    lazy["per_agent"] = torch.stack([Unbounded((*batch, i + 1)) for i in range(3)], len(batch))
    assert lazy.members[2]["per_agent"].shape == (*batch, 3)
    del lazy["new"]
    assert "new" not in lazy.keys()


def test_lock_lazy_composite(lazy, batch):
    lazy.lock_()
    with pytest.raises(RuntimeError, match=re.escape(LOCKED.format(key="x"))):
        lazy["x"] = Unbounded((*batch, 3, 1))
    with pytest.raises(RuntimeError, match=re.escape(LOCKED.format(key="obs"))):
        del lazy["obs"]
    assert lazy.members[0].is_locked
    lazy.unlock_()
    lazy["x"] = Unbounded((*batch, 3, 1))


def test_lazy_composite_inside_a_composite(batch):
    outer = Composite(agents=torch.stack(agents(batch), len(batch)), shape=batch)
    td = outer.rand()
    assert isinstance(td["agents"], LazyStackedTensorDict)
    assert outer.is_in(td)
    assert outer["agents", "shared"].shape == (*batch, 3, 2)
    assert ("agents", "shared") in outer.keys(True, True)
    expanded = outer.expand(2, *batch)
    assert expanded["agents"].shape == (2, *batch, 3)


def test_empty_select_exclude_on_lazy(lazy):
    assert lazy.empty().is_empty()
    assert set(lazy.select("obs").keys()) == {"obs"}
    assert set(lazy.exclude("obs").keys()) == {"shared"}


def test_encode_lazy_composite():
    lazy = torch.stack(agents(), 0)
    values = [{"obs": [0.0] * 3}, {"obs": [0.0] * 2}, {"obs": [0.0] * 2}]
    td = lazy.encode(values)
    assert isinstance(td, LazyStackedTensorDict) and td.tensordicts[0]["obs"].shape == (3,)


def test_repr_lists_members(lazy):
    text = repr(lazy)
    assert text.startswith("StackedComposite(") and "dim=" in text


def test_pickle_lazy_composite(lazy):
    assert pickle.loads(pickle.dumps(lazy)) == lazy

"""Lazy stacks of composites as torchrl 0.4 treats their keys: ``is_in``/``project`` of a value
missing a member's key raise ``KeyError``, integer keys raise ``RuntimeError``, ``del`` reaches
the members that have the key, and boxes of members can be edited in place (``space.low += 1``)."""

from __future__ import annotations

import re

import pytest
import torch

from rlspecs import (
    Bounded,
    Composite,
    SpecKeyTypeError,
    StackedComposite,
    Unbounded,
)
from rlspecs._stacked_composite import MISSING_VALUE_KEY, NO_MEMBER_KEY


def hetero(batch=(), stack_dim=0):
    shared = Bounded(0.0, 1.0, (*batch, 4, 3))
    members = [
        Composite(
            shared=shared,
            lidar=Bounded(0.0, 5.0, (*batch, 20)),
            hetero=Unbounded((*batch, 3)),
            shape=batch,
        ),
        Composite(
            shared=shared,
            hetero=Unbounded((*batch, 2)),
            nested=Composite(obs=Bounded(0.0, 3.0, (*batch, 3, 2)), shape=(*batch, 3)),
            shape=batch,
        ),
        Composite(shared=shared, hetero=Unbounded((*batch, 2)), shape=batch),
    ]
    return torch.stack(members, stack_dim)


def member(spec, i):
    return spec.members[i]


CASES = [((), 0), ((2,), 0), ((2,), 1), ((2, 1), 2)]


@pytest.mark.parametrize("batch,stack_dim", CASES)
def test_is_in_raises_key_error_for_a_key_missing_from_a_members_slice(batch, stack_dim):
    spec = hetero(batch, stack_dim)
    td = spec.rand()
    assert spec.is_in(td)
    del td["lidar"]  # only member 0 has it
    message = MISSING_VALUE_KEY.format(key="lidar", i=0, cls="StackedComposite")
    with pytest.raises(KeyError, match=re.escape(message)):
        spec.is_in(td)


@pytest.mark.parametrize("batch,stack_dim", CASES)
def test_is_in_raises_key_error_for_a_missing_nested_or_shared_key(batch, stack_dim):
    spec = hetero(batch, stack_dim)
    td = spec.rand()
    del td["nested", "obs"]
    with pytest.raises(KeyError, match=re.escape("('nested', 'obs')")):
        spec.is_in(td)
    td = spec.rand()
    del td["shared"]
    with pytest.raises(KeyError, match="key 'shared' of member 0"):
        spec.is_in(td)


@pytest.mark.parametrize("batch,stack_dim", CASES)
def test_project_raises_key_error_for_a_missing_key(batch, stack_dim):
    spec = hetero(batch, stack_dim)
    td = spec.rand()
    td["shared"] += 5
    assert not spec.is_in(td)
    assert spec.is_in(spec.project(td))
    del td["lidar"]
    with pytest.raises(KeyError, match="key 'lidar' of member 0"):
        spec.project(td)


def test_is_in_of_a_value_of_another_batch_shape_is_false():
    spec = hetero((2,), 1)
    assert not spec.is_in(spec.rand().tensordicts[0])


def test_setting_an_integer_key_raises_runtime_error():
    spec = hetero()
    new = torch.stack([Unbounded(i + 1) for i in range(3)], 0)
    for exc in (RuntimeError, TypeError, ValueError, SpecKeyTypeError):
        with pytest.raises(exc, match=re.escape("key should be a Sequence<NestedKey>")):
            spec[0] = new
    with pytest.raises(RuntimeError, match=re.escape("key should be a Sequence<NestedKey>")):
        del spec[0]


@pytest.mark.parametrize("batch,stack_dim", CASES)
def test_setting_a_lazy_stack_gives_each_member_its_slice(batch, stack_dim):
    spec = hetero(batch, stack_dim)
    new = torch.stack([Unbounded((*batch, i)) for i in range(3)], stack_dim)
    spec["new"] = new
    assert spec["new"] == new
    spec["other", "key"] = new
    assert spec["other", "key"] == new and isinstance(spec["other"], StackedComposite)


@pytest.mark.parametrize("batch,stack_dim", CASES)
def test_del_of_a_key_some_members_have(batch, stack_dim):
    spec = hetero(batch, stack_dim)
    del spec["lidar"]
    assert all("lidar" not in m.keys() for m in spec.members)
    del spec["nested", "obs"]
    assert member(spec, 1)["nested"].is_empty()
    with pytest.raises(KeyError, match=re.escape(NO_MEMBER_KEY.format(key="lidar"))):
        del spec["lidar"]
    del spec["shared"]
    assert "shared" not in spec.keys()


@pytest.mark.parametrize("batch,stack_dim", CASES)
def test_equality_sees_a_bound_edited_in_place_through_the_space(batch, stack_dim):
    spec = hetero(batch, stack_dim)
    copy = spec.clone()
    assert copy == spec
    member(copy, 0)["lidar"].space.low += 1
    assert copy != spec
    assert torch.equal(member(copy, 0)["lidar"].low, member(spec, 0)["lidar"].low + 1)


@pytest.mark.parametrize("batch,stack_dim", CASES)
def test_update_with_edited_boxes_and_lazy_entries(batch, stack_dim):
    spec = hetero(batch, stack_dim)
    other = hetero(batch, stack_dim)
    del other["shared"]
    other["hetero"] = other["hetero"].unsqueeze(-1)
    spec.update(other)
    assert spec["hetero"].shape == (*batch[:stack_dim], 3, *batch[stack_dim:], -1, 1)
    edited = spec.clone()
    member(edited, 1)["shared"].space.high += 1
    spec.update(edited)
    assert spec == edited


def test_update_of_a_shared_composite_updates_each_member():
    a = Composite(c=Composite(x=Unbounded(1)))
    b = Composite(c=Composite(x=Unbounded(1)), own=Unbounded(2))
    spec = torch.stack([a, b], 0)
    spec.update({"c": Composite(y=Unbounded(3))})
    assert all(("c", "y") in m.keys(True) for m in spec.members)
    assert all(("c", "x") in m.keys(True) for m in spec.members)

"""``check_no_exclusive_keys`` (torchrl's ``torchrl.data.utils.check_no_exclusive_keys``)."""

from __future__ import annotations

import torch

from rlspecs import Composite, Unbounded, check_no_exclusive_keys


def test_a_lazy_stack_whose_members_share_every_key_passes():
    spec = torch.stack([Composite(a=Unbounded(3)), Composite(a=Unbounded(2))], 0)
    assert check_no_exclusive_keys(spec) is True


def test_a_lazy_stack_with_a_member_key_fails():
    spec = torch.stack([Composite(a=Unbounded(3)), Composite(a=Unbounded(2), b=Unbounded(1))], 0)
    assert check_no_exclusive_keys(spec) is False


def test_exclusive_keys_inside_members_fail_unless_recurse_is_false():
    inner = torch.stack([Composite(x=Unbounded(1)), Composite(y=Unbounded(1))], 0)
    other = torch.stack([Composite(x=Unbounded(2)), Composite(y=Unbounded(1))], 0)
    members = [Composite(n=inner, shape=(2,)), Composite(n=other, shape=(2,))]
    outer = torch.stack(members, 0)
    assert set(outer.members[0].keys()) == set(outer.members[1].keys()) == {"n"}
    assert check_no_exclusive_keys(outer) is False  # the members' own lazy stacks differ
    assert check_no_exclusive_keys(outer, recurse=False) is True


def test_a_composite_holding_a_lazy_stack_is_checked_when_recursing():
    lazy = torch.stack([Composite(a=Unbounded(1)), Composite(b=Unbounded(1))], 0)
    spec = Composite(group=lazy, other=None, shape=(2,))
    assert check_no_exclusive_keys(spec) is False
    assert check_no_exclusive_keys(spec, recurse=False) is True


def test_leaves_and_dense_composites_pass():
    assert check_no_exclusive_keys(Unbounded(3)) is True
    assert check_no_exclusive_keys(Composite(a=Composite(b=Unbounded(1)))) is True

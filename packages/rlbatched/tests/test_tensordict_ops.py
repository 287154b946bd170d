"""rlbatched's tensordict fast paths give what tensordict's public calls give.

Each helper takes a shortcut for plain ``TensorDict`` trees and defers to tensordict for
anything else; both branches are checked against the public call they replace.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rlbatched import _tensordict_ops
from rlcore.step_inputs import get_many


def tree(value: float = 0.0, batch=(2,)) -> TensorDict:
    return TensorDict(
        {
            "obs": torch.full((*batch, 3), value),
            "flag": torch.zeros(*batch, 1, dtype=torch.bool),
            "nested": {"a": torch.full((*batch, 2), value + 1), "deep": {"b": torch.arange(2)}},
        },
        batch_size=batch,
    )


def lazy() -> LazyStackedTensorDict:
    return LazyStackedTensorDict.lazy_stack(
        [
            TensorDict({"x": torch.zeros(1)}, []),
            TensorDict({"x": torch.ones(1), "y": torch.ones(2)}, []),
        ]
    )


def assert_same(a, b) -> None:
    assert type(a) is type(b)
    assert a.batch_size == b.batch_size and a.device == b.device
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert torch.equal(a.get(key), b.get(key)), key


def test_clone_is_a_deep_copy():
    td = tree(1.0)
    out = _tensordict_ops.clone(td)
    assert_same(out, td.clone())
    out["nested", "a"] += 5
    assert not torch.equal(out["nested", "a"], td["nested", "a"])


def test_clone_defers_for_lazy_stacks():
    td = lazy()
    out = _tensordict_ops.clone(td)
    assert isinstance(out, LazyStackedTensorDict) and out[1]["y"] is not td[1]["y"]


def test_shallow_copy_shares_leaves_but_not_the_root():
    td = tree()
    out = _tensordict_ops.shallow_copy(td)
    assert_same(out, td.copy())
    assert out.get("obs") is td.get("obs") and out.get("nested") is td.get("nested")
    out.set("new", torch.zeros(2))
    assert "new" not in td.keys()


@pytest.mark.parametrize("batch", [(), (2,)])
def test_stack_matches_torch_stack(batch):
    tds = [tree(float(i), batch) for i in range(3)]
    assert_same(_tensordict_ops.stack(tds), torch.stack(tds, 0))


def test_stack_with_different_keys_defers_to_torch():
    tds = [tree(), tree()]
    tds[1].set("extra", torch.zeros(2))
    with pytest.raises(RuntimeError, match="keys"):  # what torch.stack(tds, 0) raises
        _tensordict_ops.stack(tds)


def test_unbind_matches_unbind():
    td = torch.stack([tree(float(i)) for i in range(3)], 0)
    for fast, public in zip(_tensordict_ops.unbind(td), td.unbind(0), strict=True):
        assert_same(fast, public)


def test_leaves_lists_every_nested_leaf_or_none_for_lazy_stacks():
    td = tree()
    found = dict(_tensordict_ops.leaves(td))
    assert set(found) == {("obs",), ("flag",), ("nested", "a"), ("nested", "deep", "b")}
    assert found[("nested", "a")] is td["nested", "a"]
    outer = TensorDict({"lazy": lazy()}, [2])
    assert _tensordict_ops.leaves(outer) is None


def test_get_many_matches_get_with_default():
    td = tree()
    keys = [("obs",), ("nested", "deep", "b"), ("missing",), ("nested", "missing")]
    assert get_many(td, keys)[:2] == [td["obs"], td["nested", "deep", "b"]]
    assert get_many(td, keys)[2:] == [None, None]
    stacked = lazy()
    assert torch.equal(get_many(stacked, [("x",)])[0], stacked.get("x"))


def test_copy_into_copies_pairs_and_skips_missing_sources():
    dsts = [torch.zeros(3), torch.zeros(2, dtype=torch.int64), torch.full((1,), 7.0)]
    _tensordict_ops.copy_into(dsts, [torch.arange(3.0), torch.ones(2, dtype=torch.int64), None])
    assert dsts[0].tolist() == [0.0, 1.0, 2.0] and dsts[1].tolist() == [1, 1]
    assert dsts[2].item() == 7.0  # None source: left as it was
    _tensordict_ops.copy_into(dsts, [None, None, None])  # nothing to copy is fine


def test_take_rows_matches_indexing_and_copies():
    td = tree(1.0)
    index = torch.tensor([1, 0, 1])
    rows = _tensordict_ops.take_rows(td, index)
    assert_same(rows, td[index])
    assert rows.batch_size == (3,)
    rows["obs"].zero_()
    assert (td["obs"] == 1.0).all()  # a copy, not a view
    stacked = LazyStackedTensorDict.lazy_stack([tree(float(i), batch=()) for i in range(3)])
    picked = _tensordict_ops.take_rows(stacked, torch.tensor([2]))
    picked["obs"].zero_()
    assert (stacked[2]["obs"] == 2.0).all()  # a lazy stack's rows are copied too


def test_cat_matches_torch_cat_or_says_the_entries_differ():
    parts = [tree(0.0), tree(1.0)]
    assert_same(_tensordict_ops.cat(parts), torch.cat(parts, 0))
    assert _tensordict_ops.cat(parts).batch_size == (4,)
    other = tree(2.0).exclude("flag")
    assert _tensordict_ops.cat([parts[0], other]) is None
    assert _tensordict_ops.cat([lazy(), parts[0]]) is None
    assert_same(_tensordict_ops.cat([lazy(), lazy()]), torch.cat([lazy(), lazy()], 0))

"""The boundary to tensordict's and torch's private APIs behaves like the public calls it replaces.

A tensordict or torch release that changes one of these private calls fails here first.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlspecs import private_apis as pa


def make() -> TensorDict:
    return TensorDict({"a": torch.zeros(2, 3), "sub": {"b": torch.ones(2)}}, batch_size=[2])


def test_td_new_matches_the_constructor():
    sub = TensorDict({"b": torch.ones(2)}, batch_size=[2])
    fast = pa.td_new({"a": torch.zeros(2, 3), "sub": sub}, torch.Size([2]), None)
    public = make()
    assert type(fast) is TensorDict
    assert fast.batch_size == public.batch_size and fast.device == public.device
    assert set(fast.keys(True, True)) == set(public.keys(True, True))
    assert (fast == public).all()
    assert fast["sub"] is sub


def test_td_new_keeps_the_device():
    fast = pa.td_new({"a": torch.zeros(2)}, torch.Size([2]), torch.device("cpu"))
    assert fast.device == torch.device("cpu")
    assert pa.td_new({}, torch.Size([]), "cpu").device == torch.device("cpu")


@pytest.mark.parametrize("device", [None, torch.device("cpu")])
def test_td_new_sets_what_new_unsafe_sets(device):
    """td_new builds the instance _new_unsafe builds: the same attributes, the same values."""
    source = {"a": torch.zeros(2)}
    fast = pa.td_new(source, torch.Size([2]), device)
    slow = TensorDict._new_unsafe(source, batch_size=torch.Size([2]), device=device, nested=False)
    # _has_mps_val: a cache that _new_unsafe fills on its way when given a device (the
    # _has_mps property computes it on first use)
    lazy = {"_has_mps_val"}
    assert vars(fast).keys() == vars(slow).keys() - lazy
    for name, value in vars(slow).items():
        assert name in lazy or vars(fast)[name] == value, name
    # the storage is the td's own: writing to it leaves the source as it was
    pa.td_entries(fast)["b"] = torch.ones(2)
    assert set(source) == {"a"}
    # what the rest of tensordict expects of a fresh instance
    assert not fast.is_locked and fast.names == [None] and not fast.is_shared()
    fast.set("c", torch.ones(2))
    assert fast.clone()["c"].tolist() == [1.0, 1.0]


def test_td_entries_is_the_live_storage():
    td = make()
    entries = pa.td_entries(td)
    assert set(entries) == {"a", "sub"}
    assert entries["a"] is td.get("a")
    new = torch.full((2,), 7.0)
    entries["c"] = new
    assert td.get("c") is new


def test_get_and_set_str_match_public_get_and_set():
    td = make()
    assert pa.td_get_str(td, "a") is td.get("a")
    assert pa.td_get_str(td, "missing", None) is None
    value = torch.arange(2)
    pa.td_set_str(td, "x", value)
    assert td.get("x") is value
    # a locked tensordict refuses the write as td.set does
    td.lock_()
    with pytest.raises(RuntimeError, match="locked"):
        td.set("y", value)
    with pytest.raises(RuntimeError, match="locked"):
        pa.td_set_str(td, "y", value)
    assert "y" not in td.keys()


@pytest.mark.parametrize("names", [None, ["batch"]])
def test_td_has_names(names):
    td = TensorDict({}, batch_size=[2], names=names)
    assert pa.td_has_names(td) == (names is not None)


def test_td_is_locked_follows_lock_and_unlock():
    td = make()
    assert pa.td_is_locked(td) is td.is_locked is False
    td.lock_()
    assert pa.td_is_locked(td) is td.is_locked is True
    td.unlock_()
    assert pa.td_is_locked(td) is False


def test_foreach_copy_matches_copy_():
    dsts = [torch.zeros(3), torch.zeros(2, 2, dtype=torch.int64)]
    srcs = [torch.arange(3.0), torch.ones(2, 2, dtype=torch.int64)]
    pa.foreach_copy_(dsts, srcs)
    for d, s in zip(dsts, srcs):
        assert torch.equal(d, s)


@pytest.mark.parametrize(
    "args, kwargs, expected",
    [
        (("cpu",), {}, torch.device("cpu")),
        ((torch.float64,), {}, None),
        ((), {"device": "cpu", "dtype": torch.float16}, torch.device("cpu")),
    ],
)
def test_parse_to_device(args, kwargs, expected):
    assert pa.parse_to_device(*args, **kwargs) == expected

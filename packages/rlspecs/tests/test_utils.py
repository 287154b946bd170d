"""``make_composite_from_td`` and ``consolidate_spec``."""

from __future__ import annotations

import pytest
import torch
from tensordict import LazyStackedTensorDict, NonTensorData, TensorDict

from rlspecs import (
    Bounded,
    Composite,
    NonTensor,
    StackedComposite,
    Unbounded,
    consolidate_spec,
    make_composite_from_td,
)


def test_make_composite_from_td_matches_data():
    data = TensorDict(
        {
            "obs": torch.randn(3),
            "action": torch.zeros(2, dtype=torch.int),
            "next": {
                "obs": torch.randn(3),
                "reward": torch.randn(1),
                "done": torch.zeros(1, dtype=torch.bool),
            },
        },
        [],
    )
    spec = make_composite_from_td(data)
    assert (spec.zero() == data.zero_()).all()
    for key, val in data.items(True, True):
        assert val.dtype is spec[key].dtype
        assert isinstance(spec[key], Unbounded)
    assert isinstance(spec["next"], Composite)


def test_make_composite_keeps_batch_and_device():
    data = TensorDict({"x": torch.zeros(4, 2)}, batch_size=[4], device="cpu")
    spec = make_composite_from_td(data)
    assert spec.shape == (4,) and spec.device == torch.device("cpu")
    assert spec["x"].shape == (4, 2)


def test_make_composite_unsqueezes_scalars_unless_told_not_to():
    data = TensorDict({"x": torch.tensor(1.0)}, [])
    assert make_composite_from_td(data)["x"].shape == (1,)
    assert make_composite_from_td(data, unsqueeze_null_shapes=False)["x"].shape == ()


def test_make_composite_describes_non_tensors():
    data = TensorDict({"text": NonTensorData("hi")}, [])
    spec = make_composite_from_td(data)
    assert isinstance(spec["text"], NonTensor)
    assert spec.rand()["text"] == "hi"


def agent_obs(i, batch=()):
    entries = {"camera": Bounded(0, 200, (*batch, 7, 7, 3))}
    if i == 0:
        entries.update(
            lidar=Bounded(0, 5, (*batch, 8)),
            vector=Unbounded((*batch, 3)),
            tensor_0=Unbounded((*batch, 1)),
        )
    elif i == 1:
        entries.update(
            lidar=Bounded(0, 5, (*batch, 8)),
            vector=Unbounded((*batch, 2)),
            tensor_1=Bounded(0, 3, (*batch, 1, 2)),
        )
    else:
        entries.update(vector=Unbounded((*batch, 2)), tensor_2=Unbounded((*batch, 1, 2, 3)))
    return Composite(entries, shape=batch)


@pytest.mark.parametrize("batch", [(), (2,), (2, 1)], ids=str)
def test_consolidate_fills_missing_keys_with_zero_size_placeholders(batch):
    stacked = torch.stack([agent_obs(i, batch) for i in range(3)], len(batch))
    assert set(stacked.keys()) == {"camera", "vector"}
    spec = consolidate_spec(stacked)
    assert isinstance(spec, StackedComposite)
    keys = {"camera", "lidar", "vector", "tensor_0", "tensor_1", "tensor_2"}
    assert set(spec.keys()) == keys
    expected = {
        0: {"lidar": (8,), "tensor_0": (1,), "tensor_1": (0, 0), "tensor_2": (0, 0, 0)},
        1: {"lidar": (8,), "tensor_0": (0,), "tensor_1": (1, 2), "tensor_2": (0, 0, 0)},
        2: {"lidar": (0,), "tensor_0": (0,), "tensor_1": (0, 0), "tensor_2": (1, 2, 3)},
    }
    for i, shapes in expected.items():
        member = spec.members[i]
        for key, shape in shapes.items():
            assert member[key].shape == (*batch, *shape)
        assert isinstance(member["tensor_1"], Bounded)
        assert isinstance(member["tensor_2"], Unbounded)
    td = spec.rand()
    assert isinstance(td, LazyStackedTensorDict)
    assert spec.is_in(td)
    assert td.tensordicts[2]["tensor_0"].shape == (*batch, 0)


def test_consolidate_leaves_the_input_untouched():
    stacked = torch.stack([agent_obs(i) for i in range(3)], 0)
    consolidate_spec(stacked)
    assert "lidar" not in stacked.members[2].keys()


def test_consolidate_recurses_into_composites_and_nested_keys():
    members = [
        Composite({("data", "a"): Unbounded(2)}),
        Composite({("data", "b"): Unbounded((1, 4), dtype=torch.int64)}),
    ]
    outer = Composite(group=torch.stack(members, 0), other=Unbounded(1))
    spec = consolidate_spec(outer)
    group = spec["group"]
    assert set(group.keys(True, True)) == {("data", "a"), ("data", "b")}
    placeholder = group.members[0]["data", "b"]
    assert placeholder.shape == (0, 0) and placeholder.dtype == torch.int64
    assert spec["other"] == outer["other"]


def test_consolidate_of_a_leaf_is_a_copy():
    leaf = Unbounded(3)
    copy = consolidate_spec(leaf)
    assert copy == leaf and copy is not leaf

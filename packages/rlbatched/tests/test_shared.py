"""The shared buffer layout: one allocation, views that see each other's writes."""

from __future__ import annotations

import pickle

import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rlbatched._shared import CloudpickleBox, SharedLayout


def _template():
    td = TensorDict(
        {
            "a": torch.zeros(2, 3),
            "flag": torch.zeros(2, 1, dtype=torch.bool),
            "nest": TensorDict({"c": torch.zeros(2, 5, 2, dtype=torch.int64)}, [2, 5]),
            "empty": torch.zeros(2, 0),
        },
        [2],
    )
    td["lazy"] = LazyStackedTensorDict(
        TensorDict({"x": torch.zeros(2, 1)}, [2]),
        TensorDict({"x": torch.zeros(2, 1), "y": torch.zeros(2, 4)}, [2]),
        stack_dim=1,
    )
    return td


def test_views_share_one_buffer_across_pickling():
    """Two views rebuilt from a pickled layout write into the same bytes, nested and lazy leaves too."""
    layout = SharedLayout(_template())
    buffer = layout.allocate()
    assert buffer.is_shared()
    mine = layout.views(buffer)
    theirs = pickle.loads(pickle.dumps(layout)).views(buffer)
    theirs["nest", "c"][1] = 7
    theirs["lazy"][0, 1]["y"] += 3
    theirs["flag"][0] = True
    assert (mine["nest", "c"][1] == 7).all() and (mine["nest", "c"][0] == 0).all()
    assert (mine["lazy"].tensordicts[1]["y"][0] == 3).all()
    assert mine["flag"].tolist() == [[True], [False]]
    assert mine["nest"].batch_size == (2, 5)
    assert mine["empty"].shape == (2, 0)


def test_heterogeneous_stack_layout():
    """A lazy stack of differently-keyed tensordicts keeps its per-worker keys."""
    het = LazyStackedTensorDict(
        TensorDict({"x": torch.zeros(3)}, []), TensorDict({"z": torch.zeros(1)}, []), stack_dim=0
    )
    views = SharedLayout(het).views(SharedLayout(het).allocate())
    assert set(views[0].keys()) == {"x"} and set(views[1].keys()) == {"z"}


def test_cloudpickle_box_carries_lambdas():
    """A boxed lambda survives plain pickling."""
    box = pickle.loads(pickle.dumps(CloudpickleBox(lambda x: x + 1)))
    assert box.obj(1) == 2

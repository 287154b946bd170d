"""split_trajectories: grouping frames by trajectory id, padding and masks."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlcollectors import split_trajectories

pytestmark = pytest.mark.filterwarnings("error")


def _batch(obs, ids):
    obs, ids = torch.as_tensor(obs), torch.as_tensor(ids)
    return TensorDict(
        {"obs": obs, "next": {"obs": obs + 1}, ("collector", "traj_ids"): ids},
        batch_size=ids.shape,
    )


def test_frames_are_grouped_by_id_in_time_order_and_zero_padded():
    out = split_trajectories(_batch([0, 1, 2, 3, 4], [4, 4, 7, 7, 7]))
    assert out.shape == (2, 3)
    assert out.names == [None, "time"]
    assert out["obs"].tolist() == [[0, 1, 0], [2, 3, 4]]
    assert out["next", "obs"].tolist() == [[1, 2, 0], [3, 4, 5]]
    assert out["collector", "mask"].tolist() == [[True, True, False], [True, True, True]]


def test_envs_of_a_batched_collection_keep_their_own_trajectories():
    batch = _batch([[0, 1, 2], [10, 11, 12]], [[0, 0, 2], [1, 1, 1]])
    out = split_trajectories(batch)
    assert out["obs"].tolist() == [[0, 1, 0], [10, 11, 12], [2, 0, 0]]
    assert out["collector", "traj_ids"][:, 0].tolist() == [0, 1, 2]


def test_single_trajectory_keeps_all_frames():
    out = split_trajectories(_batch([5, 6], [3, 3]))
    assert out.shape == (1, 2)
    assert out["collector", "mask"].all()

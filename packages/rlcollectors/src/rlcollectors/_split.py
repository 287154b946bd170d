"""split_trajectories: regroup a batch of frames by trajectory id, padded to equal length."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

TRAJ_IDS = ("collector", "traj_ids")
MASK = ("collector", "mask")


def split_trajectories(batch: TensorDictBase) -> TensorDictBase:
    """Returns ``batch`` as ``[n_trajectories, max_length]``, zero-padded, with a validity mask.

    Frames are grouped by ``("collector", "traj_ids")`` (ids in increasing order) and
    keep their time order; ``("collector", "mask")`` is ``True`` on real frames.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlcollectors import split_trajectories
        >>> batch = TensorDict(
        ...     {"obs": torch.arange(5), ("collector", "traj_ids"): torch.tensor([0, 0, 0, 1, 1])},
        ...     batch_size=[5],
        ... )
        >>> out = split_trajectories(batch)
        >>> out["obs"]
        tensor([[0, 1, 2],
                [3, 4, 0]])
        >>> out["collector", "mask"]
        tensor([[ True,  True,  True],
                [ True,  True, False]])
    """
    flat = batch.reshape(-1)
    ids = flat.get(TRAJ_IDS)
    _, inverse, counts = torch.unique(ids, return_inverse=True, return_counts=True)
    order = torch.argsort(inverse, stable=True)
    row = inverse[order]
    starts = torch.cumsum(counts, 0) - counts
    col = torch.arange(ids.numel(), device=ids.device) - starts[row]
    shape = (counts.numel(), int(counts.max()))
    out = flat[0].expand(*shape).clone().zero_()
    out[row, col] = flat[order]
    mask = torch.zeros(shape, dtype=torch.bool, device=ids.device)
    mask[row, col] = True
    out.set(MASK, mask)
    return out.refine_names(None, "time")

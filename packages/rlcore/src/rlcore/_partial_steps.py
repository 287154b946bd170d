"""Partial steps: a ``"_step"`` mask asks only some rows of a batch to step.

Part of the step contract (current torchrl's; ``rollout(break_when_all_done=True)`` and some
transforms write the mask). A row not asked to step gets a placeholder transition: its
``"next"`` observations and done flags are the input's (copies), its reward zero. How the rows
are stepped depends on the env:

- an env that is not batch-locked steps the flagged rows alone (the input indexed by the
  mask) and the placeholder fills the others;
- a batch-locked env with no row to step returns the placeholder without stepping;
- a batch-locked env with some rows to step must step those rows alone: batched envs do
  (``_supports_partial_steps = True``: ``_step`` reads the mask); any other env raises
  ``NotImplementedError`` naming it, rather than stepping rows it was told to leave.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from tensordict import TensorDictBase

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["NO_PARTIAL_STEPS", "PARTIAL_STEP", "placeholder_next", "step_mask"]

PARTIAL_STEP = "_step"
NO_PARTIAL_STEPS = (
    "{cls} cannot step some of its rows only: the input's '_step' mask asks rows {rows} to "
    "step and the others to wait, and a batch-locked env steps its whole batch. Step it without "
    "a '_step' entry, or rollout(break_when_any_done=True) rather than break_when_all_done."
)


def step_mask(env: EnvBase, tensordict: TensorDictBase, mask: torch.Tensor) -> torch.Tensor:
    """``mask`` as one flag per row of ``tensordict``'s batch (its trailing dims reduced)."""
    batch = tensordict.batch_size
    if mask.shape == batch:
        return mask
    if mask.numel() == batch.numel():
        return mask.reshape(batch)
    return mask.reshape(*batch, -1).any(-1)


def placeholder_next(env: EnvBase, tensordict: TensorDictBase) -> TensorDictBase:
    """The ``"next"`` of rows that do not step: the input's observations and done flags (copied),
    zeros elsewhere (the reward).

    Examples:
        >>> td = env.reset()
        >>> placeholder_next(env, td)["reward"]
        tensor([0.])
    """
    batch = tensordict.batch_size
    leading = batch[: len(batch) - len(env.batch_size)] if env.batch_size else batch
    out = env.full_observation_spec.zero(leading)
    out.update(env.full_reward_spec.zero(leading))
    out.update(env.full_done_spec.zero(leading))
    keys = [key for key in out.keys(True, True) if key in tensordict.keys(True, True)]
    if keys:
        out.update(tensordict.select(*keys).clone())
    return out

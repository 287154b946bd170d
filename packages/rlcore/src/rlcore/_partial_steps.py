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

from rlcore._step_mdp import set_next

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = [
    "NO_PARTIAL_STEPS",
    "PARTIAL_STEP",
    "partial_step",
    "placeholder_next",
    "step_mask",
]

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


def partial_step(env: EnvBase, tensordict: TensorDictBase) -> TensorDictBase:
    """``env.step`` of an input holding a ``"_step"`` mask, by the rules above."""
    mask = step_mask(env, tensordict, tensordict.pop(PARTIAL_STEP))
    if bool(mask.all()):
        return env.step(tensordict)
    if not env._batch_locked and not env._supports_partial_steps:
        stepped = env.step(tensordict[mask]).get("next")
        next_td = placeholder_next(env, tensordict)
        if bool(mask.any()):
            next_td[mask] = stepped
        set_next(tensordict, next_td)
        return tensordict
    if not bool(mask.any()):
        set_next(tensordict, placeholder_next(env, tensordict))
        return tensordict
    if not env._supports_partial_steps:
        rows = mask.nonzero().tolist()
        raise NotImplementedError(NO_PARTIAL_STEPS.format(cls=type(env).__name__, rows=rows))
    rules = env._step_inputs
    if rules is not False:
        rules.check(tensordict)
    tensordict.set(PARTIAL_STEP, mask)
    try:
        next_td = env._step_proc_data(env._step(tensordict))
    finally:
        tensordict.pop(PARTIAL_STEP, None)
    set_next(tensordict, next_td)
    return tensordict

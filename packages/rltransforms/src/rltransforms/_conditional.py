"""Steps decided by a condition: `ConditionalSkip` (skip the env's step) and
`ConditionalPolicySwitch` (let another policy act)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rlcore import StepMDP, terminated_or_truncated

from ._base import Transform

__all__ = ["ConditionalPolicySwitch", "ConditionalSkip"]

FORWARD_NOT_IMPLEMENTED = "class {} cannot be executed without a parent environment."
CONDITION_TYPE_ERROR = "Calling the condition function should return a boolean or a tensor."
CONDITION_SHAPE_ERROR = (
    "Tensor outputs must have the shape of the tensordict, or contain a single element."
)
BATCH_LOCKED_ERROR = (
    "Cannot run partial steps in a batched locked environment. "
    "Hint: Parallel and Serial envs can be unlocked through a keyword argument in "
    "the constructor."
)
SWITCH_CALL_ERROR = (
    "ConditionalPolicySwitch cannot be called independently, only its step and reset methods "
    "are functional."
)


class ConditionalSkip(Transform):
    """Skips the env's step for the sub-envs where `cond(tensordict)` is True.

    Writes `"_step" = "_step" & ~cond(tensordict)` (shaped like the batch) into the input the
    base env receives, current torchrl's partial-step entry, which `TransformedEnv` honours: a
    skipped row is not stepped, and its output repeats its current observations and done flags
    with a zero reward. The skip covers the transforms of the same `TransformedEnv` too (their
    `_step` does not run for skipped rows: a `StepCounter` there does not count them); to keep
    a transform running on every step, put it in an outer `TransformedEnv`
    (``auto_unwrap=False``), as in the example.

    How rows are skipped depends on the base env: one that is not batch-locked steps the other
    rows alone; a batch-locked one with no row to step is not stepped; a batch-locked one with
    some rows to step must take partial steps (batched envs do, `_supports_partial_steps`),
    otherwise `TransformedEnv` raises a `NotImplementedError` naming it.

    Args:
        cond: `tensordict -> bool or bool tensor` (True: skip the step).

    Examples:
        >>> import torch
        >>> from rlmocks import CountingEnv
        >>> from rltransforms import StepCounter, TransformedEnv
        >>> inner = TransformedEnv(CountingEnv(max_steps=100), StepCounter(step_count_key="inner"))
        >>> skip_odd = ConditionalSkip(cond=lambda td: td["step_count"] % 2 == 1)
        >>> middle = TransformedEnv(inner, skip_odd, auto_unwrap=False)
        >>> env = TransformedEnv(middle, StepCounter(), auto_unwrap=False)
        >>> policy = lambda td: td.set("action", torch.ones(1, dtype=torch.int8))
        >>> r = env.rollout(6, policy)
        >>> r["observation"].squeeze(-1).tolist(), r["step_count"].squeeze(-1).tolist()
        ([0, 1, 1, 2, 2, 3], [0, 1, 2, 3, 4, 5])
    """

    def __init__(self, cond: Callable[[TensorDictBase], bool | torch.Tensor]) -> None:
        super().__init__()
        self.cond = cond

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        cond = torch.as_tensor(self.cond(tensordict), device=tensordict.device)
        step = tensordict.get("_step", None)
        step = torch.ones((), dtype=torch.bool, device=cond.device) if step is None else step
        step = step & ~cond.bool()
        batch = tensordict.batch_size
        if step.shape != batch:
            step = step.reshape(batch) if step.numel() == batch.numel() else step.expand(batch)
        tensordict.set("_step", step)
        return tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Not available: the skip only means something inside an env's step."""
        raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))


def _condition(condition: Any, tensordict: TensorDictBase) -> torch.Tensor:
    if not isinstance(condition, (bool, torch.Tensor)):
        raise RuntimeError(CONDITION_TYPE_ERROR)
    if isinstance(condition, bool):
        return torch.tensor(condition, device=tensordict.device)
    if tuple(condition.shape) not in ((1,), (), tuple(tensordict.shape)):
        raise RuntimeError(CONDITION_SHAPE_ERROR)
    return condition


class ConditionalPolicySwitch(Transform):
    """Where `condition(next)` holds after a step, `policy` acts and the env steps again.

    Useful when turns alternate (a game against a scripted opponent): the outer policy's step
    is followed, where the condition holds, by a step of `policy` within the same env step; at
    reset, `policy` plays first where the condition holds. Transforms after this one see only
    the data of the last step. A partial switch (some sub-envs only) needs an env that is not
    batch-locked.

    Args:
        policy: `tensordict -> tensordict` writing the action.
        condition: `tensordict -> bool or bool tensor` (True: `policy` acts).

    Examples:
        >>> import torch
        >>> from rlmocks import CountingEnv
        >>> from rltransforms import StepCounter, TransformedEnv, Compose
        >>> switch = lambda td: td.set("action", torch.ones(1, dtype=torch.int8))
        >>> odd = lambda td: td["observation"] % 2 == 1
        >>> env = TransformedEnv(
        ...     CountingEnv(max_steps=100), ConditionalPolicySwitch(policy=switch, condition=odd)
        ... )
        >>> policy = lambda td: td.set("action", torch.ones(1, dtype=torch.int8))
        >>> env.rollout(3, policy)["next", "observation"].squeeze(-1).tolist()
        [2, 4, 6]
    """

    def __init__(
        self,
        policy: Callable[[TensorDictBase], TensorDictBase],
        condition: Callable[[TensorDictBase], bool | torch.Tensor],
    ) -> None:
        super().__init__([], [])
        self.__dict__["policy"] = policy  # not registered as a submodule (not part of the env)
        self.condition = condition

    def _step_mdp(self, parent: Any) -> StepMDP:
        cached = self.__dict__.get("_step_mdp_of")
        if cached is None or cached[0] is not parent:
            cached = self.__dict__["_step_mdp_of"] = (parent, StepMDP(parent, exclude_action=False))
        return cached[1]

    def _check_done(self, parent: Any, tensordict: TensorDictBase) -> tuple[bool, torch.Tensor]:
        any_done = terminated_or_truncated(
            tensordict, full_done_spec=parent.output_spec["full_done_spec"], key="_reset"
        )
        done = tensordict.pop("_reset", None)
        if done is None:
            done = torch.zeros(tensordict.batch_size, dtype=torch.bool, device=tensordict.device)
        return any_done, done

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        cond = _condition(self.condition(next_tensordict), tensordict)
        if not bool(cond.any()):
            return next_tensordict
        step = tensordict.get("_step", cond)
        if step.shape != cond.shape:
            step = step.view_as(cond)
        cond = cond & step
        parent = self.parent
        any_done, done = self._check_done(parent, next_tensordict)
        saved = None
        if any_done:
            if next_tensordict.numel() == 1 or bool(done.all()):
                return next_tensordict
            if parent.base_env.batch_locked:
                raise RuntimeError(BATCH_LOCKED_ERROR)
            cond = cond & ~done.view(next_tensordict.shape)
        if not bool(cond.all()):
            if parent.base_env.batch_locked:
                raise RuntimeError(BATCH_LOCKED_ERROR)
            saved = next_tensordict
            next_tensordict = next_tensordict[cond]
            tensordict = tensordict[cond]
        # the policy may be costly or fail on data it is not meant for: index first
        td = self.policy(self._step_mdp(parent)(tensordict.copy().set("next", next_tensordict)))
        if saved is not None:
            full = td.new_zeros(cond.shape)
            full[cond] = td
            td = full.set("_step", cond)
        next_tensordict = parent._step(td)
        if saved is not None:
            return torch.where(cond, next_tensordict, saved)
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        cond = _condition(self.condition(tensordict_reset), tensordict)
        if not bool(cond.any()):
            return tensordict_reset
        reset = tensordict.get("_reset", cond)
        if reset.shape != cond.shape:
            reset = reset.view_as(cond)
        cond = cond & reset
        parent = self.parent
        saved = None
        if not bool(cond.all()):
            saved = tensordict_reset.copy()
            tensordict_reset = tensordict_reset[cond]
        td = self.policy(tensordict_reset)
        if saved is not None:
            full = td.new_zeros(cond.shape)
            full[cond] = td
            td = full.set("_step", cond)
        tensordict_reset = parent._step(td).exclude(*parent.reward_keys)
        if saved is not None:
            return torch.where(cond, tensordict_reset, saved)
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Not available: the switch only runs within an env's step and reset."""
        raise RuntimeError(SWITCH_CALL_ERROR)

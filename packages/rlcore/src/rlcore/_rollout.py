"""The rollout loop of ``EnvBase``: policy adaptation, stepping, auto-reset, recording.

How the steps are recorded (per-leaf lists, or preallocated buffers at large batches) is in
``rlcore._recording``.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

from rlcore._recording import Recorder

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["run_rollout"]

NO_TENSORDICT = "rollout: a tensordict must be provided when auto_reset=False"
BAD_MAX_STEPS = "rollout: max_steps must be a positive integer, got {max_steps!r}"


class TensorPolicy:
    """Adapts an ``nn.Module`` on tensors: observations in, action(s) out."""

    def __init__(self, module: nn.Module, in_keys: list, out_keys: list) -> None:
        self.module = module
        self.in_keys = in_keys
        self.out_keys = out_keys

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = self.module(*[tensordict.get(key) for key in self.in_keys])
        if isinstance(out, tuple):
            for key, value in zip(self.out_keys, out):
                tensordict.set(key, value)
        else:
            tensordict.set(self.out_keys[0], out)
        return tensordict


def _takes_tensordict(function: Callable) -> bool:
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return True
    if set(params) in ({"tensordict"}, {"td"}):
        return True
    if len(params) == 1:
        annotation = next(iter(params.values())).annotation
        return isinstance(annotation, type) and issubclass(annotation, TensorDictBase)
    return False


def adapt_policy(env: EnvBase, policy: Any) -> Callable[[TensorDictBase], Any]:
    """Returns a callable on tensordicts for ``policy`` (see ``EnvBase.rollout``)."""
    if isinstance(policy, TensorDictModuleBase):
        return policy
    if (
        isinstance(policy, nn.Module)
        and not hasattr(policy, "in_keys")
        and not _takes_tensordict(policy.forward)
    ):
        return TensorPolicy(policy, list(env.full_observation_spec.keys()), list(env.action_keys))
    return policy


def _policy_device(policy: Any) -> torch.device | None:
    parameters = getattr(policy, "parameters", None)
    if parameters is None:
        return None
    for param in parameters():
        return param.device
    return None


def run_rollout(
    env: EnvBase,
    max_steps: int,
    policy: Any,
    callback: Callable | None,
    *,
    auto_reset: bool,
    auto_cast_to_device: bool,
    break_when_any_done: bool,
    return_contiguous: bool,
    tensordict: TensorDictBase | None,
) -> TensorDictBase:
    """Implements ``EnvBase.rollout``."""
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(BAD_MAX_STEPS.format(max_steps=max_steps))
    if policy is None:
        act = env.rand_action
        policy_device = None
    else:
        act = adapt_policy(env, policy)
        policy_device = _policy_device(policy) if auto_cast_to_device else None
    env_device = env.device
    cast = policy_device is not None and policy_device != env_device

    if auto_reset:
        td = env.reset(tensordict)
    elif tensordict is None:
        raise RuntimeError(NO_TENSORDICT)
    else:
        td = env.maybe_reset(tensordict)
    batch_dims = td.batch_dims
    recorder = Recorder(batch_dims, max_steps, exact=not break_when_any_done)
    step_mdp = env._step_mdp
    state = env.__dict__
    type_checks = state["_run_type_checks"]
    try:
        for i in range(max_steps):
            if cast:
                td_policy = td.to(policy_device)
                out = act(td_policy)
                if out is not None and out is not td_policy:
                    td_policy.update(out)
                td = td_policy.to(env_device) if env_device is not None else td_policy
            else:
                out = act(td)
                if out is not None and out is not td:
                    td.update(out)
            last = i == max_steps - 1
            if break_when_any_done or last:
                transition = env.step(td)
                if not last:
                    td = step_mdp(transition)
            else:
                transition, td = env.step_and_maybe_reset(td)
            # Type checks run on the first step only (check_env_specs runs a fresh rollout).
            state["_run_type_checks"] = False
            recorder.add(transition)
            if callback is not None:
                callback(env, transition)
            if last or (break_when_any_done and env._any_done(td)):
                break
    finally:
        state["_run_type_checks"] = type_checks
    return recorder.result(return_contiguous)

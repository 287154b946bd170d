"""How ``rollout`` calls a policy: tensordict modules and callables as they are, ``nn.Module``s
on tensors adapted, pre-computed ``actions`` replayed, the policy's device."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["ActionReplay", "TensorPolicy", "adapt_policy", "policy_device"]


class ActionReplay:
    """``rollout(actions=...)``'s policy: writes the next pre-computed action under the env's
    top-level action key (current torchrl's open-loop replay).

    Examples:
        >>> replay = ActionReplay(env, [torch.ones(1, dtype=torch.int8)])
        >>> replay(env.reset())["action"]
        tensor([1], dtype=torch.int8)
    """

    def __init__(self, env: EnvBase, actions: Iterable[Any]) -> None:
        self.key = next(iter(env.full_action_spec.keys()))
        self.actions = iter(actions)

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        return tensordict.set(self.key, next(self.actions))


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


def policy_device(policy: Any) -> torch.device | None:
    parameters = getattr(policy, "parameters", None)
    if parameters is None:
        return None
    for param in parameters():
        return param.device
    return None

"""`ModuleTransform`: a tensordict module (a policy, an encoder) run as a transform."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase
from torch import nn

from rlspecs import TensorSpec

from ._base import Transform

__all__ = ["ModuleTransform"]

MODULE_NONE_ERROR = "At least one of `module` or `module_factory` must be provided."
MODULE_BOTH_ERROR = "Only one of `module` or `module_factory` must be provided."
KEYS_SET_ERROR = "{name} {value} cannot be set for ModuleTransform"
RAY_ERROR = (
    "ModuleTransform(use_ray_service=True): running the module in a Ray actor is not part of "
    "rltransforms; run it in process (use_ray_service=False)"
)

SpecChange = TensorSpec | Callable[[TensorSpec], TensorSpec] | None


def _changed(change: SpecChange, spec: TensorSpec) -> TensorSpec:
    if change is None:
        return spec
    return change.clone() if isinstance(change, TensorSpec) else change(spec)


class ModuleTransform(Transform):
    """Runs a tensordict module on each step's output (or, with `inverse=True`, on its input).

    The keys are the module's: `in_keys`/`out_keys` forward, or `out_keys_inv`/`in_keys_inv`
    (the module's in_keys/out_keys) inverse. Reset outputs are not transformed (torchrl's
    rule). The specs change only as told: each `*_spec_transform` is a new spec or a function
    of the current one.

    Args:
        module: the module (exclusive with `module_factory`).
        module_factory: a callable building it.
        no_grad: run the module under `torch.no_grad()`.
        inverse: transform the env's input instead of its output.
        device: moves the module there; tensordicts are moved there for the call and back.
        use_ray_service: torchrl's Ray option (not available here: must stay False).
        actor_name: torchrl's Ray option (ignored).
        num_gpus: torchrl's Ray option (ignored).
        num_cpus: torchrl's Ray option (ignored).
        observation_spec_transform: the observation spec after the module, or a function.
        action_spec_transform: the action spec, or a function.
        reward_spec_transform: the reward spec, or a function.
        done_spec_transform: the done spec, or a function.
        state_spec_transform: the state spec, or a function.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> double = TensorDictModule(lambda x: x * 2, in_keys=["obs"], out_keys=["obs2"])
        >>> t = ModuleTransform(module=double)
        >>> t.in_keys, t.out_keys
        (['obs'], ['obs2'])
        >>> t(TensorDict(obs=torch.ones(2)))["obs2"]
        tensor([2., 2.])
    """

    def __init__(
        self,
        *,
        module: nn.Module | None = None,
        module_factory: Callable[[], nn.Module] | None = None,
        no_grad: bool = False,
        inverse: bool = False,
        device: torch.device | str | None = None,
        use_ray_service: bool = False,
        actor_name: str | None = None,
        num_gpus: int | None = None,
        num_cpus: int | None = None,
        observation_spec_transform: SpecChange = None,
        action_spec_transform: SpecChange = None,
        reward_spec_transform: SpecChange = None,
        done_spec_transform: SpecChange = None,
        state_spec_transform: SpecChange = None,
    ) -> None:
        if use_ray_service:
            raise ValueError(RAY_ERROR)
        if module is None and module_factory is None:
            raise ValueError(MODULE_NONE_ERROR)
        if module is not None and module_factory is not None:
            raise ValueError(MODULE_BOTH_ERROR)
        super().__init__()
        self.module = module if module is not None else module_factory()
        self._io_device = None
        if device is not None:
            self.module = self.module.to(device)
            self._io_device = torch.device(device)
        self.no_grad = no_grad
        self.inverse = inverse
        self.observation_spec_transform = observation_spec_transform
        self.action_spec_transform = action_spec_transform
        self.reward_spec_transform = reward_spec_transform
        self.done_spec_transform = done_spec_transform
        self.state_spec_transform = state_spec_transform

    # the keys are the module's
    def _module_keys(self, name: str) -> list[NestedKey]:
        module = self.__dict__.get("_modules", {}).get("module")
        return [] if module is None else list(getattr(module, name))

    @property
    def in_keys(self) -> list[NestedKey]:
        return [] if self.inverse else self._module_keys("in_keys")

    @in_keys.setter
    def in_keys(self, value: Any) -> None:
        if value is not None:
            raise RuntimeError(KEYS_SET_ERROR.format(name="in_keys", value=value))

    @property
    def out_keys(self) -> list[NestedKey]:
        return [] if self.inverse else self._module_keys("out_keys")

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        if value is not None:
            raise RuntimeError(KEYS_SET_ERROR.format(name="out_keys", value=value))

    @property
    def in_keys_inv(self) -> list[NestedKey]:
        return self._module_keys("out_keys") if self.inverse else []

    @in_keys_inv.setter
    def in_keys_inv(self, value: Any) -> None:
        if value is not None:
            raise RuntimeError(KEYS_SET_ERROR.format(name="in_keys_inv", value=value))

    @property
    def out_keys_inv(self) -> list[NestedKey]:
        return self._module_keys("in_keys") if self.inverse else []

    @out_keys_inv.setter
    def out_keys_inv(self, value: Any) -> None:
        if value is not None:
            raise RuntimeError(KEYS_SET_ERROR.format(name="out_keys_inv", value=value))

    @property
    def has_inverse(self) -> bool:
        return bool(self.inverse)

    # ------------------------------------------------------------------ data path
    def _run(self, tensordict: TensorDictBase) -> TensorDictBase:
        with torch.no_grad() if self.no_grad else nullcontext():
            device = self._io_device
            if device is None or tensordict.device == device:
                return self.module(tensordict)
            out = self.module(tensordict.to(device))
            return tensordict.update(out.to(tensordict.device) if tensordict.device else out)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict if self.inverse else self._run(next_tensordict)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Run the module on `tensordict` (nothing when `inverse=True`)."""
        return self._call(tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._run(tensordict) if self.inverse else tensordict

    def to(self, *args: Any, **kwargs: Any) -> ModuleTransform:
        """Move the module; a device given here becomes where tensordicts are moved for calls."""
        device = kwargs.get("device", args[0] if args else None)
        result = super().to(*args, **kwargs)
        if self._io_device is not None and isinstance(device, (str, torch.device)):
            self._io_device = torch.device(device)
        return result

    # ------------------------------------------------------------------ specs
    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return _changed(self.observation_spec_transform, observation_spec)

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        return _changed(self.action_spec_transform, action_spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return _changed(self.reward_spec_transform, reward_spec)

    def transform_done_spec(self, done_spec: TensorSpec) -> TensorSpec:
        return _changed(self.done_spec_transform, done_spec)

    def transform_state_spec(self, state_spec: TensorSpec) -> TensorSpec:
        return _changed(self.state_spec_transform, state_spec)

    def __repr__(self) -> str:
        return f"ModuleTransform(module={self.module}, inverse={self.inverse})"

"""``ModelBasedEnvBase``: an env whose step is a learned world model."""

from __future__ import annotations

import warnings
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rlcore._env_base import EnvBase

__all__ = ["ModelBasedEnvBase"]

SEED_WARNING = "Setting a seed has no effect on a model-based env: seed torch globally instead"


class ModelBasedEnvBase(EnvBase):
    """An env whose ``_step`` runs ``world_model`` on a shallow copy of the input.

    The world model reads the observations/state and the action and writes the next
    observations and the reward; missing done flags are completed as False. Subclasses set
    the specs and implement ``_reset``. The env is not batch-locked: tensordicts with extra
    leading dims are accepted when ``batch_size`` is empty.

    Args:
        world_model: a TensorDict module.
        params: optional parameters (a TensorDict) swapped into the world model at each step.
        buffers: optional buffers (a TensorDict) swapped in likewise.
        device: the env device.
        dtype: the default floating dtype of the env (kept as ``self.dtype``).
        batch_size: the env batch size.
        run_type_checks: check output dtypes/shapes at each step.

    Examples:
        >>> from tensordict.nn import TensorDictModule
        >>> from rlspecs import Composite, Unbounded
        >>> class DriftEnv(ModelBasedEnvBase):
        ...     def __init__(self):
        ...         model = TensorDictModule(
        ...             lambda obs, action: (obs + action, -obs.abs().sum(-1, keepdim=True)),
        ...             in_keys=["observation", "action"],
        ...             out_keys=["observation", "reward"],
        ...         )
        ...         super().__init__(model)
        ...         self.observation_spec = Composite(observation=Unbounded(2))
        ...         self.action_spec = Unbounded(2)
        ...         self.reward_spec = Unbounded(1)
        ...
        ...     def _reset(self, tensordict=None, **kwargs):
        ...         return self.full_observation_spec.zero().update(self.full_done_spec.zero())
        >>> DriftEnv().rollout(3)["next", "observation"].shape
        torch.Size([3, 2])
    """

    _batch_locked = False

    def __init__(
        self,
        world_model: nn.Module,
        params: TensorDictBase | None = None,
        buffers: TensorDictBase | None = None,
        device: torch.device | str | None = "cpu",
        dtype: torch.dtype | None = None,
        batch_size: torch.Size | tuple[int, ...] | None = None,
        run_type_checks: bool = False,
    ) -> None:
        super().__init__(device=device, batch_size=batch_size, run_type_checks=run_type_checks)
        self.world_model = world_model.to(self.device) if self.device is not None else world_model
        self.__dict__["world_model_params"] = params
        self.__dict__["world_model_buffers"] = buffers
        self.__dict__["dtype"] = dtype

    def set_specs_from_env(self, env: EnvBase) -> None:
        """Copies the specs of ``env`` (moved to this env's device)."""
        device = self.device
        output_spec = env.output_spec.clone()
        input_spec = env.input_spec.clone()
        if device is not None:
            output_spec, input_spec = output_spec.to(device), input_spec.to(device)
        self.output_spec = output_spec
        self.input_spec = input_spec

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        data = tensordict.copy()
        params = self.__dict__["world_model_params"]
        buffers = self.__dict__["world_model_buffers"]
        if params is None and buffers is None:
            data = self.world_model(data)
        else:
            swapped = (
                params
                if buffers is None
                else params.update(buffers)
                if params is not None
                else buffers
            )
            with swapped.to_module(self.world_model):
                data = self.world_model(data)
        keys = [*self.observation_keys, *self.done_keys, *self.reward_keys]
        return data.select(*keys, strict=False)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _reset(tensordict)")

    def _set_seed(self, seed: int | None) -> None:
        warnings.warn(SEED_WARNING, UserWarning, stacklevel=3)

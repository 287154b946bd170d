"""`GenericTestEnv`: a mock assembled from specs and two plain functions."""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import TensorDictBase

from rlcore import EnvBase
from rlspecs import Categorical, Composite, TensorSpec, Unbounded

from ._spec_utils import as_composite

__all__ = ["GenericTestEnv"]

ResetFunc = Callable[["GenericTestEnv", "TensorDictBase | None"], TensorDictBase]
StepFunc = Callable[["GenericTestEnv", TensorDictBase], TensorDictBase]


class GenericTestEnv(EnvBase):
    """A configurable mock: give it specs and, optionally, what reset and step compute.

    Specs (``*B`` = batch_size): ``observation_spec`` and ``action_spec`` are required (a
    leaf is stored under ``"observation"``/``"action"``); ``reward_spec`` defaults to
    Unbounded (*B, 1), ``done_spec`` to bool (*B, 1) stored as done/terminated, and
    ``state_spec`` to empty.

    ``reset_func(env, tensordict)`` and ``step_func(env, tensordict)`` return the reset
    and next-step entries; done leaves they omit are filled with False. Without them,
    reset returns zero observations and state, and a step returns random observations
    (``observation_spec.rand()``) with a zero reward. Pass module-level functions to use
    the env in spawned workers.

    Examples:
        >>> from rlspecs import Bounded, Unbounded
        >>> def step(env, td):
        ...     obs = td["observation"] + td["action"]
        ...     return td.empty().update({"observation": obs, "reward": obs.clone()})
        >>> env = GenericTestEnv(
        ...     observation_spec=Unbounded(shape=(1,)),
        ...     action_spec=Bounded(1.0, 1.0, shape=(1,)),
        ...     step_func=step,
        ... )
        >>> env.rollout(3)["next", "reward"].squeeze(-1)
        tensor([1., 2., 3.])
    """

    def __init__(
        self,
        *,
        observation_spec: TensorSpec,
        action_spec: TensorSpec,
        reward_spec: TensorSpec | None = None,
        done_spec: TensorSpec | None = None,
        state_spec: Composite | None = None,
        reset_func: ResetFunc | None = None,
        step_func: StepFunc | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        batch_size = self.batch_size
        if reward_spec is None:
            reward_spec = Unbounded(shape=(*batch_size, 1))
        if done_spec is None:
            done_spec = Categorical(2, shape=(*batch_size, 1), dtype=torch.bool)
        if not isinstance(done_spec, Composite):
            done_spec = Composite(
                done=done_spec, terminated=done_spec.clone(), shape=done_spec.shape[:-1]
            )
        self.full_observation_spec = as_composite(observation_spec, "observation", batch_size)
        self.full_action_spec = as_composite(action_spec, "action", batch_size)
        self.full_reward_spec = as_composite(reward_spec, "reward", batch_size)
        self.full_done_spec = done_spec
        self.full_state_spec = state_spec if state_spec is not None else Composite(shape=batch_size)
        self.reset_func = reset_func
        self.step_func = step_func

    def _fill_done(self, result: TensorDictBase) -> TensorDictBase:
        for key in self.done_keys:
            if key not in result.keys(True, True):
                result.set(key, self.full_done_spec[key].zero())
        return result

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if self.reset_func is not None:
            return self._fill_done(self.reset_func(self, tensordict))
        result = self.full_observation_spec.zero()
        result.update(self.full_state_spec.zero())
        return self._fill_done(result)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.step_func is not None:
            return self._fill_done(self.step_func(self, tensordict))
        result = self.full_observation_spec.rand()
        result.update(self.full_reward_spec.zero())
        return self._fill_done(result)

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed)

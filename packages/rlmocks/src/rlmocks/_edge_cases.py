"""Envs at the edges of the env API: empty data, scalar actions, and envs built to fail.

`EnvThatDoesNothing` returns nothing but done flags; `EnvWithScalarAction` takes an action
without a trailing dim; `EnvThatErrorsAfter10Iters` raises from its eleventh step (for
error-propagation tests); `EnvThatErrorsBecauseOfStack` returns a reward (and an action) at
reset, which a rollout cannot stack with the roots of the later steps.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase
from rlspecs import Bounded, Categorical, Composite, Unbounded

__all__ = [
    "EnvThatDoesNothing",
    "EnvThatErrorsAfter10Iters",
    "EnvThatErrorsBecauseOfStack",
    "EnvWithScalarAction",
]

MAX_STEPS_ERROR = "max steps!"


class EnvThatDoesNothing(EnvBase):
    """An env without observation, action or reward: reset and step return empty tensordicts.

    Specs (``*B`` = batch_size): no observation, action, state or reward entries (the
    reward spec is empty, as current torchrl's default is); done/terminated bool (*B, 1),
    which the env base fills with False at every reset and step. For tests of the
    plumbing (rollouts, batching, transforms) on an env that brings no data.

    Examples:
        >>> env = EnvThatDoesNothing(batch_size=(2,))
        >>> env.reward_keys, env.action_keys
        ([], [])
        >>> sorted(env.rollout(3)["next"].keys())
        ['done', 'terminated']
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.full_reward_spec = Composite(shape=self.batch_size, device=self.device)

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        return TensorDict(batch_size=self.batch_size, device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return TensorDict(batch_size=self.batch_size, device=self.device)

    def _set_seed(self, seed: int | None) -> None:
        pass


class EnvWithScalarAction(EnvBase):
    """An env whose action has no trailing dim (``singleton=False``) or a trailing 1.

    Specs (``*B`` = batch_size): action ``action`` Bounded[-1, 1] of shape *B (a scalar
    per sub-env), or (*B, 1) with ``singleton=True``; observation ``observation``
    Unbounded (*B, 3); reward Unbounded (*B, 1); ``done``, ``terminated`` and
    ``truncated`` Unbounded bool (*B, 1).

    Reset and step draw the observation from the global RNG (``torch.randn``); the reward
    is zero and the episode never ends. (Current torchrl's step returns a reward of shape
    (1,) whatever the batch, which only works with an empty batch; this one returns
    (*B, 1).)

    Examples:
        >>> env = EnvWithScalarAction()
        >>> env.action_spec.shape
        torch.Size([])
        >>> env.rollout(4)["action"].shape
        torch.Size([4])
    """

    def __init__(self, singleton: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.singleton = singleton
        batch_size = self.batch_size
        action_shape = (*batch_size, 1) if singleton else batch_size
        self.action_spec = Bounded(-1, 1, shape=action_shape, device=self.device)
        self.observation_spec = Composite(
            observation=Unbounded(shape=(*batch_size, 3)), shape=batch_size, device=self.device
        )
        flag = Unbounded(shape=(*batch_size, 1), dtype=torch.bool)
        self.full_done_spec = Composite(
            done=flag,
            terminated=flag.clone(),
            truncated=flag.clone(),
            shape=batch_size,
            device=self.device,
        )
        self.reward_spec = Unbounded(shape=(*batch_size, 1), device=self.device)

    def _flags(self) -> dict[str, torch.Tensor]:
        false = torch.zeros((*self.batch_size, 1), dtype=torch.bool, device=self.device)
        return {"done": false, "terminated": false.clone(), "truncated": false.clone()}

    def _observation(self) -> torch.Tensor:
        return torch.randn(*self.batch_size, 3, device=self.device)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        return TensorDict(
            {"observation": self._observation(), **self._flags()},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        reward = torch.zeros((*self.batch_size, 1), device=self.device)
        return TensorDict(
            {"observation": self._observation(), "reward": reward, **self._flags()},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        pass


class EnvThatErrorsAfter10Iters(EnvBase):
    """An env that raises ``RuntimeError("max steps!")`` at its eleventh step (of its life).

    Specs: observation ``observation``, action ``action``, reward ``reward`` and done
    ``done`` (completed with ``terminated``), all Unbounded float32 (1,): the done flags
    are floats, as in current torchrl (whose rollouts fail on them unless
    ``break_when_any_done=False``). Meant for error-propagation tests (batched envs,
    collectors).

    ``counter`` counts the steps over the env's whole life (resets do not clear it);
    reset and step return zeros.

    Examples:
        >>> env = EnvThatErrorsAfter10Iters()
        >>> env.rollout(10, break_when_any_done=False).shape
        torch.Size([10])
        >>> env.rand_step(env.reset())
        Traceback (most recent call last):
            ...
        RuntimeError: max steps!
    """

    def __init__(self) -> None:
        # set before EnvBase.__init__, as the current class does
        self.action_spec = Composite(action=Unbounded((1,)))
        self.reward_spec = Composite(reward=Unbounded((1,)))
        self.done_spec = Composite(done=Unbounded((1,)))
        self.observation_spec = Composite(observation=Unbounded((1,)))
        self.counter = 0
        super().__init__()

    def _zeros(self) -> TensorDictBase:
        return self.full_observation_spec.zero().update(self.full_done_spec.zero())

    def _reset(self, tensordict: TensorDictBase | None, **kwargs) -> TensorDictBase:
        return self._zeros()

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.counter >= 10:
            raise RuntimeError(MAX_STEPS_ERROR)
        self.counter += 1
        return self._zeros().update(self.full_reward_spec.zero())

    def _set_seed(self, seed: int | None) -> None:
        pass


class EnvThatErrorsBecauseOfStack(EnvBase):
    """A counter towards ``target`` whose reset wrongly returns a reward (and an action).

    Specs (``*B`` = batch_size): observation ``observation`` Bounded[0, target] int64
    (*B, 1); action ``action`` Categorical(2) int64 (*B, 1); reward Unbounded float32
    (*B, 1); done/terminated bool (*B, 1).

    Reset returns ``observation`` zeros of shape *B (one dim short of its spec), a zero
    ``reward``, zero ``action`` and False done flags. A step adds 1 to the observation
    where the action is 1 (clamped at ``target``), and returns it with
    ``reward = done = terminated = (observation == target)`` and the action it got. The
    root of the first step then holds a reward the later roots lack, so stacking a
    rollout fails: the env exists to test that error.

    Examples:
        >>> env = EnvThatErrorsBecauseOfStack(target=2)
        >>> sorted(env.reset().keys())
        ['action', 'done', 'observation', 'reward', 'terminated']
    """

    def __init__(self, target: int = 5, batch_size: Sequence[int] | int | None = None) -> None:
        if isinstance(batch_size, int):
            batch_size = (batch_size,)
        super().__init__(device="cpu", batch_size=batch_size)
        self.target = target
        batch = self.batch_size
        self.observation_spec = Bounded(
            low=0, high=target, shape=(*batch, 1), dtype=torch.int64, device=self.device
        )
        self.action_spec = Categorical(2, shape=(*batch, 1), dtype=torch.int64, device=self.device)
        self.reward_spec = Unbounded(shape=(*batch, 1), dtype=torch.float32, device=self.device)
        self.done_spec = Categorical(2, shape=(*batch, 1), dtype=torch.bool, device=self.device)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        scalar = (*self.batch_size, 1)
        return TensorDict(
            {
                "observation": torch.zeros(self.batch_size, dtype=torch.int64),
                "reward": torch.zeros(scalar, dtype=torch.float32),
                "done": torch.zeros(scalar, dtype=torch.bool),
                "terminated": torch.zeros(scalar, dtype=torch.bool),
                "action": torch.zeros(scalar, dtype=torch.int64),
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        observation = tensordict.get("observation")
        action = tensordict.get("action").squeeze(-1)
        observation = (observation + (action == 1).to(observation.dtype)).clamp_max(self.target)
        reached = (observation == self.target).unsqueeze(-1)
        return TensorDict(
            {
                "observation": observation,
                "reward": reached.to(torch.float32),
                "done": reached,
                "terminated": reached.clone(),
                "action": action.unsqueeze(-1),
            },
            batch_size=self.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        pass

"""Counting envs: the observation is a counter the action increments; done past ``max_steps``."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase
from rlspecs import Binary, Categorical, Composite, Unbounded

__all__ = ["CountingBatchedEnv", "CountingEnv", "IncrementingEnv"]

MAX_STEPS_SHAPE_ERROR = "batch_size and max_steps shape must match."
START_VAL_SHAPE_ERROR = (
    "CountingBatchedEnv: start_val must hold one value or one per batch element "
    "(batch_size={batch_size}), got shape {shape}."
)


def _counting_specs(batch_size: torch.Size, device: torch.device | None) -> dict[str, Composite]:
    """The spec table of `CountingEnv` for a batch size and device."""
    done = Categorical(2, shape=(*batch_size, 1), dtype=torch.bool, device=device)
    return {
        "observation": Composite(
            observation=Unbounded(shape=(*batch_size, 1), dtype=torch.int32, device=device),
            shape=batch_size,
            device=device,
        ),
        "action": Composite(
            action=Binary(n=1, shape=(*batch_size, 1), dtype=torch.int8, device=device),
            shape=batch_size,
            device=device,
        ),
        "reward": Composite(
            reward=Unbounded(shape=(*batch_size, 1), dtype=torch.float32, device=device),
            shape=batch_size,
            device=device,
        ),
        "done": Composite(done=done, terminated=done.clone(), shape=batch_size, device=device),
        "state": Composite(shape=batch_size, device=device),
    }


def _set_specs(env: EnvBase, specs: dict[str, Composite]) -> None:
    """Install a spec table built by `_counting_specs` (or a variant of it) on ``env``."""
    env.full_observation_spec = specs["observation"]
    env.full_action_spec = specs["action"]
    env.full_reward_spec = specs["reward"]
    env.full_done_spec = specs["done"]
    env.full_state_spec = specs["state"]


def _reset_mask(tensordict: TensorDictBase | None, shape: torch.Size) -> torch.Tensor | None:
    """The root ``"_reset"`` entry of ``tensordict`` reshaped to ``shape``, or None."""
    if tensordict is None:
        return None
    reset = tensordict.get("_reset", None)
    if reset is None:
        return None
    return reset.reshape(shape)


class CountingEnv(EnvBase):
    """An env whose observation counts the actions taken; done once the count exceeds ``max_steps``.

    Specs (``*B`` = batch_size): observation ``observation`` Unbounded int32 (*B, 1);
    action ``action`` Binary(1) int8 (*B, 1); reward ``reward`` Unbounded float32
    (*B, 1); done/terminated bool (*B, 1); no state.

    The buffer ``count`` (int32 (*B, 1), zeros until the first reset) holds the state.
    Reset sets ``count`` to ``start_val`` (only where a root ``"_reset"`` is True, if
    given). A step adds the action to ``count`` and returns ``observation = count``,
    ``done = terminated = count > max_steps`` and a zero reward, so with action 1 done
    flips on step ``max_steps + 1``.

    The reward is float32 whatever the reward spec, as the seed's class has it. Current
    torchrl's class gives it the reward spec's dtype (which matters once that spec is
    edited): pass ``adapt_dtype=True`` (or set the class attribute) to get that.

    Examples:
        >>> env = CountingEnv(max_steps=2)
        >>> td = env.rollout(10, lambda td: td.set("action", torch.ones(1, dtype=torch.int8)))
        >>> td["next", "observation"].squeeze(-1)
        tensor([1, 2, 3], dtype=torch.int32)
    """

    # False: the seed's float32 reward; True: current torchrl's, in the reward spec's dtype
    adapt_dtype: bool = False

    def __init__(
        self,
        max_steps: int = 5,
        start_val: int = 0,
        *,
        adapt_dtype: bool | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.max_steps = max_steps
        self.start_val = start_val
        if adapt_dtype is not None:
            self.adapt_dtype = adapt_dtype
        _set_specs(self, _counting_specs(self.batch_size, self.device))
        self.register_buffer(
            "count", torch.zeros((*self.batch_size, 1), dtype=torch.int32, device=self.device)
        )

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        mask = _reset_mask(tensordict, self.count.shape)
        if mask is None:
            self.count.fill_(self.start_val)
        else:
            self.count[mask] = self.start_val
        done = self.count > self.max_steps
        return TensorDict(
            {"observation": self.count.clone(), "done": done, "terminated": done.clone()},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _increment(self, tensordict: TensorDictBase) -> torch.Tensor:
        return tensordict.get("action").to(dtype=torch.int32, device=self.count.device)

    def _reward_dtype(self) -> torch.dtype:
        if self.adapt_dtype and self.reward_keys:
            return self.full_reward_spec[self.reward_keys[0]].dtype
        return torch.float32

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count += self._increment(tensordict)
        done = self.count > self.max_steps
        return TensorDict(
            {
                "observation": self.count.clone(),
                "done": done,
                "terminated": done.clone(),
                "reward": torch.zeros(
                    self.count.shape, dtype=self._reward_dtype(), device=self.device
                ),
            },
            batch_size=self.batch_size,
            device=self.device,
        )


class IncrementingEnv(CountingEnv):
    """A `CountingEnv` whose count grows by 1 at every step, whatever the action.

    Specs, reset and outputs are those of `CountingEnv`.

    Examples:
        >>> env = IncrementingEnv(max_steps=1)
        >>> env.rollout(10)["next", "observation"].squeeze(-1)
        tensor([1, 2], dtype=torch.int32)
    """

    def _increment(self, tensordict: TensorDictBase) -> torch.Tensor:
        return torch.ones_like(self.count)


class CountingBatchedEnv(EnvBase):
    """A `CountingEnv` where each batch element has its own ``max_steps`` and ``start_val``.

    Specs: as `CountingEnv` (observation int32 (*B, 1), Binary(1) action, float32
    reward, done/terminated bool (*B, 1)).

    ``max_steps`` is a tensor of shape ``batch_size`` (default ``tensor(5)``);
    ``start_val`` holds one value per batch element or a single value (default 0).
    Reset sets each (masked) count to its own ``start_val``; a step adds the action and
    compares each count with its own limit.

    Examples:
        >>> env = CountingBatchedEnv(max_steps=torch.tensor([1, 2]), batch_size=[2])
        >>> td = env.rollout(5, lambda td: td.set("action", torch.ones(2, 1, dtype=torch.int8)))
        >>> td["next", "done"].squeeze(-1)
        tensor([[False,  True],
                [False, False]])
    """

    def __init__(
        self,
        max_steps: torch.Tensor | None = None,
        start_val: torch.Tensor | None = None,
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        if max_steps is None:
            max_steps = torch.tensor(5)
        if start_val is None:
            start_val = torch.zeros((), dtype=torch.int32)
        if max_steps.shape != self.batch_size:
            raise RuntimeError(
                f"{MAX_STEPS_SHAPE_ERROR} Got batch_size={self.batch_size} and "
                f"max_steps.shape={max_steps.shape}."
            )
        self.max_steps = max_steps
        self.count = torch.zeros((*self.batch_size, 1), dtype=torch.int32, device=self.device)
        if start_val.numel() == self.batch_size.numel():
            self.start_val = start_val.reshape(self.count.shape)
        elif start_val.numel() <= 1:
            self.start_val = start_val.reshape(()).expand_as(self.count)
        else:
            raise ValueError(
                START_VAL_SHAPE_ERROR.format(batch_size=self.batch_size, shape=start_val.shape)
            )
        _set_specs(self, _counting_specs(self.batch_size, None))

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed)

    def _outputs(self) -> dict[str, torch.Tensor]:
        done = self.count > self.max_steps.reshape(self.count.shape).to(self.count.device)
        return {"observation": self.count.clone(), "done": done, "terminated": done.clone()}

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        mask = _reset_mask(tensordict, self.count.shape)
        start_val = self.start_val.to(self.count)
        if mask is None:
            self.count.copy_(start_val)
        else:
            self.count[mask] = start_val[mask]
        return TensorDict(self._outputs(), batch_size=self.batch_size, device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count += tensordict.get("action").to(torch.int32).reshape(self.count.shape)
        outputs = self._outputs()
        outputs["reward"] = torch.zeros(self.count.shape, dtype=torch.float32, device=self.device)
        return TensorDict(outputs, batch_size=self.batch_size, device=self.device)

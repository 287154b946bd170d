"""Rewards computed from other signals: `LineariseRewards` (weighted sum of a vector reward)
and `SuccessReward` (a sparse reward from a success flag)."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, unravel_key

from rlspecs import Bounded, Composite, TensorSpec, Unbounded

from ._base import Transform

__all__ = ["LineariseRewards", "SuccessReward"]

WEIGHTS_NDIM_ERROR = "Expected weights to be a unidimensional tensor. Got {ndim} dimension."
DISCRETE_ERROR = "Aggregation of rewards that take discrete values is not supported."
WEIGHTS_COUNT_ERROR = "The number of rewards and weights should match. Got: {rewards} and {weights}"
NO_SHAPE_ERROR = (
    "SuccessReward could not infer the reward shape: {success!r} was not found in the parent "
    "output specs and {reward!r} is not an existing reward entry."
)


class LineariseRewards(Transform):
    """Turns a multi-objective reward (last dim: one entry per objective) into a weighted sum.

    The reward spec follows: a bounded reward keeps bounds (the weighted sums of the bounds,
    negative weights swapping them), an unbounded one stays unbounded; the last dim becomes 1.
    The same weights apply to every in_key; chain several transforms to weigh groups apart.

    Args:
        in_keys: the multi-objective rewards.
        out_keys: where to write the sums (default: `in_keys`).
        weights: one weight per objective (default: all ones).

    Raises:
        ValueError: weights that are not 1-d, or whose count differs from the rewards'.
        NotImplementedError: a discrete reward spec.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = LineariseRewards(in_keys=["reward"], weights=[1.0, -2.0])
        >>> t(TensorDict(reward=torch.tensor([[3.0, 1.0]]), batch_size=[1]))["reward"]
        tensor([[1.]])
        >>> t.transform_reward_spec(Bounded(0.0, 1.0, (2,))).space.low
        tensor([-2.])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        *,
        weights: Sequence[float] | torch.Tensor | None = None,
    ) -> None:
        super().__init__(in_keys=in_keys, out_keys=in_keys if out_keys is None else out_keys)
        if weights is not None:
            weights = weights if isinstance(weights, torch.Tensor) else torch.tensor(weights)
            if weights.ndim >= 2:
                raise ValueError(WEIGHTS_NDIM_ERROR.format(ndim=weights.ndim))
        self.register_buffer("weights", weights)

    def _check_count(self, num_rewards: int) -> None:
        if self.weights is not None and self.weights.numel() != num_rewards:
            raise ValueError(
                WEIGHTS_COUNT_ERROR.format(rewards=num_rewards, weights=self.weights.numel())
            )

    def _linearised(self, spec: TensorSpec) -> TensorSpec:
        if spec.domain != "continuous":
            raise NotImplementedError(DISCRETE_ERROR)
        *batch, num_rewards = spec.shape
        self._check_count(num_rewards)
        if isinstance(spec, Unbounded):
            return Unbounded(shape=(*batch, 1), device=spec.device, dtype=spec.dtype)
        weights = (
            torch.ones(num_rewards, device=spec.device, dtype=spec.dtype)
            if self.weights is None
            else self.weights.to(device=spec.device, dtype=spec.dtype)
        )
        positive, negative = weights.clamp(min=0), weights.clamp(max=0)
        low, high = spec.space.low, spec.space.high
        new_low = (positive * low).sum(-1, keepdim=True) + (negative * high).sum(-1, keepdim=True)
        new_high = (positive * high).sum(-1, keepdim=True) + (negative * low).sum(-1, keepdim=True)
        return Bounded(low=new_low, high=new_high, device=spec.device, dtype=spec.dtype)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._linearised)

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        if self.weights is None:
            return reward.sum(dim=-1, keepdim=True)
        self._check_count(reward.shape[-1])
        return (self.weights.to(reward.device) * reward).sum(dim=-1, keepdim=True)


class SuccessReward(Transform):
    """A sparse reward from a success flag: `scale` where the flag is set, 0 elsewhere.

    Attached to an env, it overwrites the step's reward (never written at reset); the reward
    spec becomes `Bounded` over `{0, scale}`, shaped like the success entry (or, when the
    success entry is not in the specs, like the existing reward).

    Args:
        success_key: the success flag (default `"success"`).
        reward_key: the reward to write (default `"reward"`).
        scale: the reward on success (default 1.0).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = SuccessReward(scale=2.0)
        >>> td = TensorDict({"success": torch.tensor([[True], [False]])}, batch_size=[2])
        >>> t(td)["reward"].squeeze(-1).tolist()
        [2.0, 0.0]
    """

    def __init__(
        self,
        success_key: NestedKey = "success",
        reward_key: NestedKey = "reward",
        *,
        scale: float = 1.0,
    ) -> None:
        super().__init__(in_keys=[success_key], out_keys=[reward_key])
        self.scale = float(scale)

    def _apply_transform(self, success: torch.Tensor) -> torch.Tensor:
        return success.to(torch.get_default_dtype()) * self.scale

    def _reward_leaf(self, shape: torch.Size, device: torch.device | None) -> Bounded:
        return Bounded(
            low=min(0.0, self.scale),
            high=max(0.0, self.scale),
            shape=shape,
            device=device,
            dtype=torch.get_default_dtype(),
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        success_key = unravel_key(self.in_keys[0])
        reward_key = unravel_key(self.out_keys[0])
        source = None
        for group in ("full_observation_spec", "full_done_spec", "full_reward_spec"):
            if group not in output_spec.keys():
                continue
            spec = output_spec[group]
            key = reward_key if group == "full_reward_spec" else success_key
            if key in {unravel_key(k) for k in spec.keys(True, True)}:
                source = spec[key]
                break
        if source is None:
            raise RuntimeError(NO_SHAPE_ERROR.format(success=success_key, reward=reward_key))
        if "full_reward_spec" not in output_spec.keys():
            output_spec["full_reward_spec"] = Composite(
                shape=output_spec.shape, device=output_spec.device
            )
        output_spec["full_reward_spec"][reward_key] = self._reward_leaf(source.shape, source.device)
        return output_spec

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        """The reward spec alone (no success entry to read): the reward leaf's shape is kept."""
        if not isinstance(reward_spec, Composite):
            return self._reward_leaf(reward_spec.shape, reward_spec.device)
        reward_key = unravel_key(self.out_keys[0])
        if reward_key not in {unravel_key(k) for k in reward_spec.keys(True, True)}:
            raise RuntimeError(
                NO_SHAPE_ERROR.format(success=unravel_key(self.in_keys[0]), reward=reward_key)
            )
        leaf = reward_spec[reward_key]
        reward_spec[reward_key] = self._reward_leaf(leaf.shape, leaf.device)
        return reward_spec

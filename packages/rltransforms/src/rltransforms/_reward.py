"""Reward transforms: `RewardSum` (episode return), `RewardClipping`, `RewardScaling`,
`BinarizeReward`."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase

from rlspecs import Binary, Bounded, Composite, TensorSpec, Unbounded

from ._base import (
    Transform,
    _as_key_list,
    _expand_mask,
    _get,
    _group_of,
    _join,
    _key_tuple,
    _set,
    done_roots,
)

__all__ = ["BinarizeReward", "RewardClipping", "RewardScaling", "RewardSum"]

KEY_COUNT_ERROR = (
    "RewardSum expects the same number of input and output keys: got {n_in} in_keys but "
    "{n_out} out_keys"
)
RESET_COUNT_ERROR = (
    "Could not match the env reset_keys {reset_keys} with the in_keys {in_keys}. "
    "Please make sure that these have the same length."
)
NO_RESET_KEYS_ERROR = (
    "reset_keys not provided but parent env not found. Make sure that the reset_keys are "
    "provided during construction if the transform does not have a container env."
)
NO_TIME_DIM_ERROR = (
    "At least one dimension of the tensordict must be named 'time' in offline mode "
    "(RewardSum sums the rewards along it); got dim names {names}"
)
NOT_A_REWARD_ERROR = "RewardSum: in_key {key!r} is not in the reward spec (reward keys: {keys})"
CLIP_SPEC_ERROR = (
    "{cls}: cannot transform the spec of {key!r}: expected Unbounded or Bounded, got {type}"
)
CLIP_NO_BOUND_ERROR = "RewardClipping: give clamp_min, clamp_max or both (got neither)"
BINARIZE_SHAPE_ERROR = (
    "Reward shape last dimension must be singleton, got reward of shape {shape} "
    "(BinarizeReward writes one 0/1 flag per reward)"
)


def _bounds(cls: str, keys: list[NestedKey], spec: TensorSpec) -> tuple[torch.Tensor, torch.Tensor]:
    """The low and high of a Bounded spec, or the dtype's extremes for an Unbounded one."""
    if isinstance(spec, Bounded):
        return spec.low, spec.high
    if isinstance(spec, Unbounded) and spec.dtype.is_floating_point:
        info = torch.finfo(spec.dtype)
        low = torch.full(spec.shape, info.min, dtype=spec.dtype, device=spec.device)
        return low, torch.full_like(low, info.max)
    raise TypeError(CLIP_SPEC_ERROR.format(cls=cls, key=keys, type=type(spec).__name__))


class RewardSum(Transform):
    """Tracks the cumulative reward of the current episode in `episode_<reward>` entries.

    The sum restarts at 0 on reset (only for the sub-envs being reset on a partial reset) and
    grows by the step reward at each step. `in_keys` default to every reward key of the env
    (`["reward"]` outside one); `reset_keys` (one per in_key) to the reset entry of each reward's
    done group. The sums are observations, or rewards with `reward_spec=True`.

    On stored data (`t(td)`) the running sum of each reward is computed along the dim named
    `"time"`.

    Examples:
        >>> from rltransforms import RewardSum, TransformedEnv
        >>> env = TransformedEnv(base_env, RewardSum())  # base_env: a reward of 1 per step
        >>> env.rollout(3)["next", "episode_reward"].squeeze(-1)
        tensor([1., 2., 3.])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        reset_keys: Sequence[NestedKey] | NestedKey | None = None,
        *,
        reward_spec: bool = False,
    ) -> None:
        in_list, out_list = _as_key_list(in_keys), _as_key_list(out_keys)
        if in_list and out_list is not None and len(in_list) != len(out_list):
            raise ValueError(KEY_COUNT_ERROR.format(n_in=len(in_list), n_out=len(out_list)))
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._reset_keys = _as_key_list(reset_keys)
        self.reward_spec = reward_spec
        self._learned_in_keys: list[NestedKey] | None = None
        self._learned_reset_keys: list[NestedKey] | None = None
        self._tails: list[torch.Size] = []  # each reward's shape after the env batch dims
        self._episode_specs: list[TensorSpec] = []
        self._pairs: list[tuple[NestedKey, NestedKey]] = []  # (reward, sum), once in an env

    @property
    def in_keys(self) -> list[NestedKey]:
        """The rewards summed: given, else the env's reward keys, else `["reward"]`."""
        given = self.__dict__.get("_in_keys")
        if given:
            return given
        learned = self.__dict__.get("_learned_in_keys")
        return learned if learned is not None else ["reward"]

    @in_keys.setter
    def in_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        self.__dict__["_in_keys"] = _as_key_list(value)

    @property
    def out_keys(self) -> list[NestedKey]:
        """The sums: given, else `episode_<name>` next to each reward."""
        out_keys = self.__dict__.get("_out_keys")
        if out_keys is None:
            return [_join(_key_tuple(k)[:-1], f"episode_{_key_tuple(k)[-1]}") for k in self.in_keys]
        return out_keys

    @out_keys.setter
    def out_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        self.__dict__["_out_keys"] = _as_key_list(value)

    @property
    def reset_keys(self) -> list[NestedKey]:
        """The reset entry followed by each sum (given, else the reward's done group's)."""
        reset_keys = self.__dict__.get("_reset_keys")
        if reset_keys is None:
            reset_keys = self.__dict__.get("_learned_reset_keys")
            if reset_keys is None:
                parent = self.parent
                if parent is None:
                    raise TypeError(NO_RESET_KEYS_ERROR)
                self.transform_output_spec(parent.output_spec.clone().unlock_())
                reset_keys = self._learned_reset_keys
        if len(reset_keys) != len(self.in_keys):
            raise ValueError(RESET_COUNT_ERROR.format(reset_keys=reset_keys, in_keys=self.in_keys))
        return reset_keys

    @reset_keys.setter
    def reset_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        self._reset_keys = _as_key_list(value)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        reward_spec = output_spec["full_reward_spec"]
        reward_keys = list(reward_spec.keys(True, True))
        if not self.__dict__.get("_in_keys"):
            self._learned_in_keys = reward_keys
        batch_ndim = len(output_spec.shape)
        roots = done_roots(output_spec["full_done_spec"])
        target = output_spec["full_reward_spec" if self.reward_spec else "full_observation_spec"]
        self._learned_reset_keys, self._tails, self._episode_specs = [], [], []
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key not in reward_keys:
                raise KeyError(NOT_A_REWARD_ERROR.format(key=in_key, keys=reward_keys))
            leaf = reward_spec[in_key]
            spec = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
            target[out_key] = spec
            self._episode_specs.append(spec)
            self._tails.append(leaf.shape[batch_ndim:])
            self._learned_reset_keys.append(_join(_group_of(in_key, roots), "_reset"))
        self._pairs = list(zip(self.in_keys, self.out_keys))
        return super().transform_output_spec(output_spec)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        input_spec = super().transform_input_spec(input_spec)
        state_spec = input_spec["full_state_spec"]
        for out_key, spec in zip(self.out_keys, self._episode_specs):
            state_spec[out_key] = spec.clone()
        return input_spec

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        n = len(self.in_keys)
        tails = self._tails or [torch.Size([1])] * n
        dtypes = [spec.dtype for spec in self._episode_specs] or [torch.get_default_dtype()] * n
        for out_key, reset_key, tail, dtype in zip(self.out_keys, self.reset_keys, tails, dtypes):
            reset = _get(tensordict, reset_key)
            previous = _get(tensordict, out_key)
            if previous is None:
                value = torch.zeros(
                    (*tensordict_reset.batch_size, *tail),
                    dtype=dtype,
                    device=tensordict_reset.device,
                )
            elif reset is None:
                value = torch.zeros_like(previous)
            else:
                value = torch.where(_expand_mask(reset, previous), 0, previous)
            tensordict_reset.set(out_key, value)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        pairs = self._pairs or list(zip(self.in_keys, self.out_keys))
        for in_key, out_key in pairs:
            reward = _get(next_tensordict, in_key)
            if reward is None:
                self._missing(in_key, next_tensordict)
                continue
            previous = _get(tensordict, out_key)
            _set(next_tensordict, out_key, reward if previous is None else previous + reward)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """On stored data with a dim named "time": the running sum of each reward along it."""
        names = tensordict.names if tensordict.batch_dims else []
        if "time" not in names:
            raise ValueError(NO_TIME_DIM_ERROR.format(names=names))
        time_dim = names.index("time")
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            reward = _get(tensordict, in_key)
            if reward is None:
                self._missing(in_key, tensordict)
                continue
            tensordict.set(out_key, reward.cumsum(time_dim))
        return tensordict

    def __repr__(self) -> str:
        return f"RewardSum(in_keys={self.in_keys}, out_keys={self.out_keys})"


class RewardClipping(Transform):
    """Clamps rewards to `[clamp_min, clamp_max]` (either bound may be None).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> RewardClipping(0, 0.1)(TensorDict(reward=torch.tensor([-1.0, 0.05, 2.0])))["reward"]
        tensor([0.0000, 0.0500, 0.1000])
    """

    def __init__(
        self,
        clamp_min: float | None = None,
        clamp_max: float | None = None,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        if clamp_min is None and clamp_max is None:
            raise ValueError(CLIP_NO_BOUND_ERROR)
        super().__init__(in_keys=["reward"] if in_keys is None else in_keys, out_keys=out_keys)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        return reward.clamp(self.clamp_min, self.clamp_max)

    def _clip_spec(self, spec: TensorSpec) -> Bounded:
        low, high = _bounds("RewardClipping", self.in_keys, spec)
        return Bounded(
            low=low.clamp(self.clamp_min, self.clamp_max),
            high=high.clamp(self.clamp_min, self.clamp_max),
            shape=spec.shape,
            dtype=spec.dtype,
            device=spec.device,
        )

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._clip_spec)

    def __repr__(self) -> str:
        return (
            f"RewardClipping(clamp_min={self.clamp_min}, clamp_max={self.clamp_max}, "
            f"keys={self.in_keys})"
        )


class RewardScaling(Transform):
    """Affine map of rewards: `reward * scale + loc`, or `(reward - loc) / scale` if `standard_normal`.

    `scale` is clamped to at least 1e-6. A Bounded reward spec gets its bounds mapped; an
    Unbounded one stays Unbounded.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> RewardScaling(loc=1.0, scale=2.0)(TensorDict(reward=torch.ones(1)))["reward"]
        tensor([3.])
    """

    def __init__(
        self,
        loc: float | torch.Tensor,
        scale: float | torch.Tensor,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        standard_normal: bool = False,
    ) -> None:
        super().__init__(in_keys=["reward"] if in_keys is None else in_keys, out_keys=out_keys)
        self.register_buffer("standard_normal", torch.as_tensor(standard_normal))
        self.register_buffer("loc", torch.as_tensor(loc, dtype=torch.get_default_dtype()))
        scale = torch.as_tensor(scale, dtype=torch.get_default_dtype())
        self.register_buffer("scale", scale.clamp_min(1e-6))

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        if self.standard_normal:
            return (reward - self.loc) / self.scale
        return reward * self.scale + self.loc

    def _scale_spec(self, spec: TensorSpec) -> TensorSpec:
        if isinstance(spec, Unbounded):
            return spec.clone()
        low, high = _bounds("RewardScaling", self.in_keys, spec)
        low, high = self._apply_transform(low), self._apply_transform(high)
        return Bounded(
            low=torch.minimum(low, high).to(spec.dtype),
            high=torch.maximum(low, high).to(spec.dtype),
            shape=spec.shape,
            dtype=spec.dtype,
            device=spec.device,
        )

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._scale_spec)

    def __repr__(self) -> str:
        loc = self.loc.item() if self.loc.numel() == 1 else self.loc
        scale = self.scale.item() if self.scale.numel() == 1 else self.scale
        return f"RewardScaling(loc={loc}, scale={scale}, keys={self.in_keys})"


class BinarizeReward(Transform):
    """Maps each reward to 1 if it is positive, 0 otherwise (int8, last dim of size 1).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> BinarizeReward()(TensorDict(reward=torch.tensor([[-1.0], [0.0], [2.0]])))["reward"]
        tensor([[0],
                [0],
                [1]], dtype=torch.int8)
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(in_keys=["reward"] if in_keys is None else in_keys, out_keys=out_keys)

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        if not reward.shape or reward.shape[-1] != 1:
            raise RuntimeError(BINARIZE_SHAPE_ERROR.format(shape=tuple(reward.shape)))
        return (reward > 0.0).to(torch.int8)

    def _binary_spec(self, spec: TensorSpec) -> Binary:
        return Binary(n=1, shape=spec.shape, dtype=torch.int8, device=spec.device)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._binary_spec)

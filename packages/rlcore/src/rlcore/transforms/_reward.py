"""Reward transforms: `RewardSum` (episode return) and `RewardClipping`."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase

from rlspecs import Bounded, Composite, TensorSpec, Unbounded

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

KEY_COUNT_ERROR = "RewardSum: got {n_in} in_keys but {n_out} out_keys; give one out_key per in_key"
NOT_A_REWARD_ERROR = "RewardSum: in_key {key!r} is not in the reward spec (reward keys: {keys})"
CLIP_SPEC_ERROR = (
    "RewardClipping: cannot clip the spec of {key!r}: expected Unbounded or Bounded, got {type}"
)


class RewardSum(Transform):
    """Tracks the cumulative reward of the current episode in `episode_<reward>` entries.

    The sum restarts at 0 on reset (only for the sub-envs being reset on a partial reset) and
    grows by the step reward at each step. `in_keys` default to every reward key of the env.

    Examples:
        >>> from rlcore.transforms import RewardSum, TransformedEnv
        >>> env = TransformedEnv(base_env, RewardSum())  # base_env: a reward of 1 per step
        >>> env.rollout(3)["next", "episode_reward"].squeeze(-1)
        tensor([1., 2., 3.])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        reset_keys: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        in_list, out_list = _as_key_list(in_keys), _as_key_list(out_keys)
        if in_list is not None and out_list is not None and len(in_list) != len(out_list):
            raise ValueError(KEY_COUNT_ERROR.format(n_in=len(in_list), n_out=len(out_list)))
        super().__init__(in_keys=in_keys, out_keys=out_keys)
        self._given_in_keys = in_list
        self._given_reset_keys = _as_key_list(reset_keys)
        self._reset_key_list: list[NestedKey] = []
        self._shapes: list[torch.Size] = []
        self._episode_specs: list[TensorSpec] = []

    @property
    def out_keys(self) -> list[NestedKey]:
        out_keys = self.__dict__.get("_out_keys")
        if out_keys is None:
            return [_join(_key_tuple(k)[:-1], f"episode_{_key_tuple(k)[-1]}") for k in self.in_keys]
        return out_keys

    @out_keys.setter
    def out_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        self.__dict__["_out_keys"] = _as_key_list(value)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        reward_spec = output_spec["full_reward_spec"]
        reward_keys = list(reward_spec.keys(True, True))
        if self._given_in_keys is None:
            self.in_keys = reward_keys
        batch_ndim = len(output_spec.shape)
        roots = done_roots(output_spec["full_done_spec"])
        observation_spec = output_spec["full_observation_spec"]
        self._reset_key_list, self._shapes = [], []
        self._episode_specs = specs = []
        for index, (in_key, out_key) in enumerate(zip(self.in_keys, self.out_keys)):
            if in_key not in reward_keys:
                raise KeyError(NOT_A_REWARD_ERROR.format(key=in_key, keys=reward_keys))
            leaf = reward_spec[in_key]
            spec = Unbounded(shape=leaf.shape, dtype=leaf.dtype, device=leaf.device)
            observation_spec[out_key] = spec
            specs.append(spec)
            self._shapes.append(leaf.shape[batch_ndim:])
            if self._given_reset_keys is not None:
                given = self._given_reset_keys
                self._reset_key_list.append(given[index] if len(given) > 1 else given[0])
            else:
                self._reset_key_list.append(_join(_group_of(in_key, roots), "_reset"))
        return super().transform_output_spec(output_spec)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        state_spec = input_spec["full_state_spec"]
        for out_key, spec in zip(self.out_keys, self._episode_specs):
            state_spec[out_key] = spec.clone()
        return super().transform_input_spec(input_spec)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for out_key, reset_key, tail in zip(self.out_keys, self._reset_key_list, self._shapes):
            reset = tensordict.get(reset_key, None)
            previous = None if reset is None else tensordict.get(out_key, None)
            if previous is None:
                value = torch.zeros(
                    (*tensordict_reset.batch_size, *tail), device=tensordict_reset.device
                )
            else:
                value = torch.where(_expand_mask(reset, previous), 0, previous)
            tensordict_reset.set(out_key, value)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            reward = _get(next_tensordict, in_key)
            if reward is None:
                self._missing(in_key, next_tensordict)
                continue
            previous = _get(tensordict, out_key)
            _set(next_tensordict, out_key, reward if previous is None else previous + reward)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """On stored data with a dim named "time": the running sum of each reward along it."""
        time_dim = list(tensordict.names).index("time")
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            tensordict.set(out_key, tensordict.get(in_key).cumsum(time_dim))
        return tensordict


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
        super().__init__(in_keys=["reward"] if in_keys is None else in_keys, out_keys=out_keys)
        self.clamp_min = clamp_min
        self.clamp_max = clamp_max

    def _apply_transform(self, reward: torch.Tensor) -> torch.Tensor:
        return reward.clamp(self.clamp_min, self.clamp_max)

    def _clip_spec(self, spec: TensorSpec) -> Bounded:
        if isinstance(spec, Bounded):
            low, high = spec.low, spec.high
        elif isinstance(spec, Unbounded):
            info = torch.finfo(spec.dtype)
            low = torch.full(spec.shape, info.min, dtype=spec.dtype, device=spec.device)
            high = torch.full(spec.shape, info.max, dtype=spec.dtype, device=spec.device)
        else:
            raise TypeError(CLIP_SPEC_ERROR.format(key=self.in_keys, type=type(spec).__name__))
        return Bounded(
            low=low.clamp(self.clamp_min, self.clamp_max),
            high=high.clamp(self.clamp_min, self.clamp_max),
            shape=spec.shape,
            dtype=spec.dtype,
            device=spec.device,
        )

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._clip_spec)

    def __repr__(self) -> str:
        return f"RewardClipping(clamp_min={self.clamp_min}, clamp_max={self.clamp_max}, keys={self.in_keys})"

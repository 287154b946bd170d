"""Elementwise value maps for any entry (observation, reward or input): `ClipTransform`,
`SignTransform`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NestedKey

from rlspecs import Bounded, TensorSpec

from ._base import Transform

__all__ = ["ClipTransform", "SignTransform"]

CLIP_NO_BOUND_ERROR = "Either one or both of `high` and `low` must be provided."
CLIP_SCALAR_ERROR = "low and high must be scalars or None. Got low={low} and high={high}."
CLIP_ORDER_ERROR = "`low` must be stricly lower than `high` (got low={low}, high={high})."


def _scalar(value: Any, low: Any, high: Any) -> torch.Tensor | None:
    if value is None:
        return None
    value = torch.as_tensor(value)
    if value.numel() > 1:
        raise TypeError(CLIP_SCALAR_ERROR.format(low=low, high=high))
    return value if value.is_floating_point() else value.to(torch.get_default_dtype())


def _extremes(dtype: torch.dtype) -> tuple[float, float]:
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    return info.min, info.max


class ClipTransform(Transform):
    """Clamps `in_keys` (outputs) and `in_keys_inv` (inputs) to `[low, high]`.

    One bound may be None. Clipped outputs get a Bounded spec; the input specs are unchanged (the
    outside may send anything, the base env gets values in range).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ClipTransform(in_keys=["obs"], low=-1.0, high=0.5)
        >>> t(TensorDict(obs=torch.tensor([-3.0, 0.0, 3.0])))["obs"]
        tensor([-1.0000,  0.0000,  0.5000])
    """

    _call_on_reset = True
    invertible = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        *,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
    ) -> None:
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        if low is None and high is None:
            raise TypeError(CLIP_NO_BOUND_ERROR)
        low_t, high_t = _scalar(low, low, high), _scalar(high, low, high)
        if low_t is not None and high_t is not None and low_t >= high_t:
            raise ValueError(CLIP_ORDER_ERROR.format(low=low, high=high))
        self.register_buffer("low", low_t)
        self.register_buffer("high", high_t)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.clamp(self.low, self.high)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return state.clamp(self.low, self.high)

    def _clip_spec(self, spec: TensorSpec) -> Bounded:
        lowest, highest = _extremes(spec.dtype)
        low = lowest if self.low is None else self.low.item()
        high = highest if self.high is None else self.high.item()
        if isinstance(spec, Bounded):
            low, high = spec.low.clamp(low, high), spec.high.clamp(low, high)
        return Bounded(low=low, high=high, shape=spec.shape, dtype=spec.dtype, device=spec.device)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(observation_spec, self.in_keys, self.out_keys, self._clip_spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._clip_spec)

    def __repr__(self) -> str:
        return (
            f"ClipTransform(low={self.low}, high={self.high}, in_keys={self.in_keys}, "
            f"in_keys_inv={self.in_keys_inv})"
        )


class SignTransform(Transform):
    """Replaces `in_keys` (outputs) and `in_keys_inv` (inputs) by their sign (-1, 0 or 1).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> SignTransform(in_keys=["obs"])(TensorDict(obs=torch.tensor([-3.0, 0.0, 2.0])))["obs"]
        tensor([-1.,  0.,  1.])
    """

    _call_on_reset = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.sign()

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return state.sign()

    def _sign_spec(self, spec: TensorSpec) -> Bounded:
        return Bounded(low=-1, high=1, shape=spec.shape, dtype=spec.dtype, device=spec.device)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(observation_spec, self.in_keys, self.out_keys, self._sign_spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._sign_spec)

"""Dtype casts: `DTypeCastTransform` and its everyday case `DoubleToFloat`."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey

from rlspecs import Bounded, Composite, TensorSpec, Unbounded

from ._base import Transform


def cast_spec(spec: TensorSpec, dtype: torch.dtype) -> TensorSpec:
    """A copy of `spec` whose values have `dtype` (bounds cast too)."""
    if isinstance(spec, Bounded):
        return Bounded(
            low=spec.low.to(dtype),
            high=spec.high.to(dtype),
            shape=spec.shape,
            dtype=dtype,
            device=spec.device,
        )
    if isinstance(spec, Unbounded):
        return Unbounded(shape=spec.shape, dtype=dtype, device=spec.device)
    spec = spec.clone()
    spec.dtype = dtype
    return spec


def _leaves_of_dtype(specs: Sequence[Composite], dtype: torch.dtype) -> list[NestedKey]:
    return [
        key
        for spec in specs
        for key, leaf in spec.items(True, True)
        if getattr(leaf, "dtype", None) == dtype
    ]


class DTypeCastTransform(Transform):
    """Casts outputs at `in_keys` from `dtype_in` to `dtype_out`, and inputs back at `in_keys_inv`.

    With no keys at all, every `dtype_in` leaf of the observation and reward specs is cast, and
    every `dtype_in` leaf of the action and state specs is cast back before the base env steps.
    With `in_keys` only, nothing is cast on the way in.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DTypeCastTransform(torch.float64, torch.float32, in_keys=["obs"])
        >>> t(TensorDict(obs=torch.zeros(2, dtype=torch.float64)))["obs"].dtype
        torch.float32
    """

    _call_on_reset = True

    def __init__(
        self,
        dtype_in: torch.dtype,
        dtype_out: torch.dtype,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        self._find_keys = in_keys is None
        self._find_keys_inv = in_keys is None and in_keys_inv is None
        self.dtype_in = dtype_in
        self.dtype_out = dtype_out

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.to(self.dtype_out)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return state.to(self.dtype_in)

    def _cast_out(self, spec: TensorSpec) -> TensorSpec:
        return cast_spec(spec, self.dtype_out)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self._find_keys:
            groups = [output_spec["full_observation_spec"], output_spec["full_reward_spec"]]
            self.in_keys = _leaves_of_dtype(groups, self.dtype_in)
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._map_specs(observation_spec, self.in_keys, self.out_keys, self._cast_out)

    def transform_reward_spec(self, reward_spec: Composite) -> Composite:
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._cast_out)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        groups = [input_spec["full_action_spec"], input_spec["full_state_spec"]]
        if self._find_keys_inv:
            self.in_keys_inv = _leaves_of_dtype(groups, self.dtype_in)
        for spec in groups:
            self._map_specs(spec, self.in_keys_inv, self.out_keys_inv, self._cast_out)
        return input_spec

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv}, "
            f"dtype_in={self.dtype_in}, dtype_out={self.dtype_out})"
        )


class DoubleToFloat(DTypeCastTransform):
    """Casts float64 outputs to float32, and float32 inputs back to float64 (see DTypeCastTransform).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DoubleToFloat(in_keys=["obs"], in_keys_inv=["action"])
        >>> t.inv(TensorDict(action=torch.zeros(1)))["action"].dtype
        torch.float64
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(
            torch.float64,
            torch.float32,
            in_keys=in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
        )

"""Dtype and device casts: `DTypeCastTransform`, `DoubleToFloat`, `DeviceCastTransform`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase

from rlspecs import Composite, TensorSpec, parse_device

from ._base import Transform

__all__ = ["DTypeCastTransform", "DeviceCastTransform", "DoubleToFloat"]

SCAN_OUT_KEYS_ERROR = (
    "{cls}: {keys} weren't provided and couldn't be retrieved (no env), so every {dtype} entry "
    "is cast in place; {out} cannot be passed then, as the order of the entries is unknown. "
    "Pass {keys} or drop {out}."
)
INPUT_KEY_ERROR = "{cls}: in_key_inv {key!r} not found in the action spec nor the state spec"
SPEC_DTYPE_ERROR = "{cls}: the spec of {key!r} has dtype {dtype}, expected {expected}"


def _leaves_of_dtype(specs: Sequence[Composite], dtype: torch.dtype) -> list[NestedKey]:
    return [
        key
        for spec in specs
        for key, leaf in spec.items(True, True)
        if not isinstance(leaf, Composite) and leaf.dtype == dtype
    ]


class DTypeCastTransform(Transform):
    """Casts outputs at `in_keys` from `dtype_in` to `dtype_out`, and inputs back at `in_keys_inv`.

    Keys not given are found: in an env, every `dtype_in` leaf of the observation and reward
    specs (`in_keys`) and of the action and state specs (`in_keys_inv`); outside an env, every
    `dtype_in` entry of the tensordict (`forward`) and every `dtype_out` entry (`inv`). Pass
    `in_keys_inv=[]` to cast nothing on the way in.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DTypeCastTransform(torch.float64, torch.float32, in_keys=["obs"], in_keys_inv=[])
        >>> t(TensorDict(obs=torch.zeros(2, dtype=torch.float64)))["obs"].dtype
        torch.float32
    """

    _call_on_reset = True
    invertible = True

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
        # keys not given are found in the specs (in an env) or by scanning the data (outside)
        self._scan = in_keys is None
        self._scan_inv = in_keys_inv is None
        self.dtype_in = dtype_in
        self.dtype_out = dtype_out

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        return obs.to(self.dtype_out)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return state.to(self.dtype_in)

    def _cast_all(
        self, tensordict: TensorDictBase, src: torch.dtype, dst: torch.dtype
    ) -> TensorDictBase:
        for key, value in list(tensordict.items(True, True)):
            if isinstance(value, torch.Tensor) and value.dtype == src:
                tensordict.set(key, value.to(dst))
        return tensordict

    def _check_scan(self, given_out: bool, names: tuple[str, str], dtype: torch.dtype) -> None:
        if given_out:
            raise ValueError(
                SCAN_OUT_KEYS_ERROR.format(
                    cls=type(self).__name__, keys=names[0], out=names[1], dtype=dtype
                )
            )

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self._scan:
            self._check_scan(
                self.__dict__["_out_keys"] is not None, ("in_keys", "out_keys"), self.dtype_in
            )
            return self._cast_all(next_tensordict, self.dtype_in, self.dtype_out)
        return super()._call(next_tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self._scan_inv:
            self._check_scan(
                self.__dict__["_out_keys_inv"] is not None,
                ("in_keys_inv", "out_keys_inv"),
                self.dtype_out,
            )
            return self._cast_all(tensordict, self.dtype_out, self.dtype_in)
        return super()._inv_call(tensordict)

    @property
    def has_inverse(self) -> bool:
        return self._scan_inv or bool(self.in_keys_inv)

    def _cast_spec(self, key: NestedKey, spec: TensorSpec) -> TensorSpec:
        if spec.dtype != self.dtype_in:
            raise TypeError(
                SPEC_DTYPE_ERROR.format(
                    cls=type(self).__name__, key=key, dtype=spec.dtype, expected=self.dtype_in
                )
            )
        return spec.to(self.dtype_out)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self._scan:
            groups = [output_spec["full_observation_spec"], output_spec["full_reward_spec"]]
            self.in_keys = _leaves_of_dtype(groups, self.dtype_in)
            self._scan = False
        return super().transform_output_spec(output_spec)

    def _map_keyed(self, spec: TensorSpec) -> TensorSpec:
        if not isinstance(spec, Composite):
            if self._scan and spec.dtype != self.dtype_in:
                return spec
            return self._cast_spec(self.in_keys, spec)
        keys = {k: None for k in spec.keys(True, True)}
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in keys:
                spec[out_key] = self._cast_spec(in_key, spec[in_key])
        return spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if self._scan and isinstance(observation_spec, Composite):
            self.in_keys = _leaves_of_dtype([observation_spec], self.dtype_in)
            self._scan = False
        return self._map_keyed(observation_spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._map_keyed(reward_spec)

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        if not isinstance(input_spec, Composite) or "full_action_spec" not in input_spec.keys():
            return (
                self._map_keyed(input_spec) if not self._scan_inv else input_spec.to(self.dtype_out)
            )
        input_spec = super().transform_input_spec(input_spec)
        groups = [input_spec["full_action_spec"], input_spec["full_state_spec"]]
        if self._scan_inv:
            self.in_keys_inv = _leaves_of_dtype(groups, self.dtype_in)
            self._scan_inv = False
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            for spec in groups:
                if in_key in spec.keys(True, True):
                    spec[out_key] = self._cast_spec(in_key, spec[in_key])
                    if out_key != in_key:
                        del spec[in_key]
                    break
            else:
                raise KeyError(INPUT_KEY_ERROR.format(cls=type(self).__name__, key=in_key))
        return input_spec

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(in_keys={self.in_keys}, out_keys={self.out_keys}, "
            f"in_keys_inv={self.in_keys_inv}, out_keys_inv={self.out_keys_inv}, "
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


class DeviceCastTransform(Transform):
    """Moves data to `device` on the way out and back to `orig_device` on the way in.

    Without keys the whole env moves: its device and specs become `device`, and the base env
    receives its inputs on its own device. With `in_keys` / `in_keys_inv` only those entries
    move (the env then has no single device). `orig_device` defaults to the container's device.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DeviceCastTransform("meta", "cpu")
        >>> t(TensorDict(a=torch.zeros(1), device="cpu")).device
        device(type='meta')
    """

    _call_on_reset = True
    invertible = True

    def __init__(
        self,
        device: torch.device | str | int,
        orig_device: torch.device | str | int | None = None,
        *,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        self.device = parse_device(device)
        self.orig_device = parse_device(orig_device)
        self._map_env_device = not self.in_keys and not self.in_keys_inv

    @property
    def has_inverse(self) -> bool:
        return True

    def set_container(self, container: Any) -> None:
        super().set_container(container)
        if self.orig_device is None and container is not None:
            if isinstance(container, Transform):
                parent = self.parent
                self.orig_device = parent.device if parent is not None else None
            else:
                self.orig_device = container.base_env.device

    def _move(
        self,
        tensordict: TensorDictBase,
        device: torch.device,
        src: list[NestedKey],
        dst: list[NestedKey],
    ) -> TensorDictBase:
        if self._map_env_device:
            return tensordict.to(device)
        out = tensordict.clone(False)
        if out.device is not None and out.device != device:
            out = out.clear_device_()
        return self._map_entries(tensordict, out, src, dst, lambda value: value.to(device))

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._move(next_tensordict, self.device, self.in_keys, self.out_keys)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        parent = self.parent
        device = parent.device if parent is not None else self.orig_device
        if device is None:
            return tensordict
        return self._move(tensordict, device, self.out_keys_inv, self.in_keys_inv)

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        return self.device if self._map_env_device else None

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self._map_env_device:
            return output_spec.to(self.device)
        # the entries now live on two devices: no composite has a single one
        return super().transform_output_spec(output_spec.clear_device_())

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        if self._map_env_device:
            return input_spec.to(self.device)
        if isinstance(input_spec, Composite):
            input_spec.clear_device_()
        return self._map_input_specs(input_spec, self._to_device)

    def _to_device(self, spec: TensorSpec) -> TensorSpec:
        return spec.to(self.device)

    def _keyed(self, spec: TensorSpec) -> TensorSpec:
        if isinstance(spec, Composite):
            spec.clear_device_()
        return self._map_specs(spec, self.in_keys, self.out_keys, self._to_device)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._keyed(observation_spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._keyed(reward_spec)

    def transform_done_spec(self, done_spec: TensorSpec) -> TensorSpec:
        return self._keyed(done_spec)

    def __repr__(self) -> str:
        keys = (
            ""
            if self._map_env_device
            else f", in_keys={self.in_keys}, in_keys_inv={self.in_keys_inv}"
        )
        return f"DeviceCastTransform(device={self.device}, orig_device={self.orig_device}{keys})"

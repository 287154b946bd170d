"""`Stack`: several entries (tensors or tensordicts of identical shapes) stacked into one."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Composite, TensorSpec

from ._base import MISSING_KEY_ERROR, Transform, _get

__all__ = ["Stack"]

POSITIVE_DIM_ERROR = (
    "dim should be negative to accommodate for envs of different "
    "batch_sizes. If you need dim to be positive, set "
    "allow_positive_dim=True."
)
OUT_KEYS_INV_ERROR = "out_keys_inv was specified, but in_key_inv was not"
IN_KEY_INV_ERROR = "in_key_inv was specified, but out_keys_inv was not"
OUT_KEY_ERROR = "Stack: out_key cannot be in in_keys (out_key={out_key!r}, in_keys={in_keys})"
NOT_COMPOSITE_ERROR = "Stack: Only specs of type Composite can be transformed (got {type})"


class Stack(Transform):
    """Stacks the entries at `in_keys` (same shapes) along a new dim `dim` into `out_key`.

    Useful to gather agents with identical specs under separate keys into one batched entry.
    With `del_keys=True` (default) the inputs, and parent entries left empty, are removed. The
    inverse (`in_key_inv`, `out_keys_inv`) unstacks an entry into several.

    Args:
        in_keys: the entries to stack.
        out_key: where to write the stack.
        in_key_inv: the stacked entry unstacked by the inverse.
        out_keys_inv: the entries the inverse writes (one per stacked slice).
        dim: the new dim (negative unless `allow_positive_dim`; default -1).
        allow_positive_dim: accept a non-negative `dim`.
        del_keys: remove the inputs after stacking (default True).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"key1": torch.zeros(3), "key2": torch.ones(3)}, [])
        >>> out = Stack(in_keys=["key1", "key2"], out_key="out", dim=-2)(td)
        >>> out["out"]
        tensor([[0., 0., 0.],
                [1., 1., 1.]])
        >>> sorted(out.keys())
        ['out']
    """

    invertible = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_key: NestedKey,
        in_key_inv: NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | None = None,
        dim: int = -1,
        allow_positive_dim: bool = False,
        *,
        del_keys: bool = True,
    ) -> None:
        if not allow_positive_dim and dim >= 0:
            raise ValueError(POSITIVE_DIM_ERROR)
        if in_key_inv is None and out_keys_inv is not None:
            raise ValueError(OUT_KEYS_INV_ERROR)
        if in_key_inv is not None and out_keys_inv is None:
            raise ValueError(IN_KEY_INV_ERROR)
        super().__init__(
            in_keys=in_keys,
            out_keys=[out_key],
            in_keys_inv=None if in_key_inv is None else [in_key_inv],
            out_keys_inv=out_keys_inv,
        )
        if self.out_keys[0] in self.in_keys:
            raise ValueError(OUT_KEY_ERROR.format(out_key=self.out_keys[0], in_keys=self.in_keys))
        parents: list[tuple[str, ...]] = []
        for key in self.in_keys:
            if isinstance(key, tuple):
                for level in range(1, len(key)):
                    parent = tuple(key[:-level])
                    if parent not in parents:
                        parents.append(parent)
        self._maybe_del_parent_keys = sorted(parents, key=len, reverse=True)
        self.dim = dim
        self._del_keys = del_keys

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        values = []
        for key in self.in_keys:
            value = _get(next_tensordict, key)
            if value is not None:
                values.append(value)
            elif not self.missing_tolerance:
                raise KeyError(
                    MISSING_KEY_ERROR.format(
                        cls="Stack", key=key, keys=sorted(map(str, next_tensordict.keys(True)))
                    )
                )
        if not values:
            return next_tensordict
        next_tensordict.set(self.out_keys[0], torch.stack(values, dim=self.dim))
        if self._del_keys:
            next_tensordict.exclude(*self.in_keys, inplace=True)
            for parent in self._maybe_del_parent_keys:
                sub = next_tensordict.get(parent, None)
                if isinstance(sub, TensorDictBase) and sub.is_empty():
                    next_tensordict.exclude(parent, inplace=True)
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.in_keys_inv:
            return tensordict
        stacked = _get(tensordict, self.in_keys_inv[0])
        if stacked is None:
            return tensordict
        for value, key in zip(torch.unbind(stacked, dim=self.dim), self.out_keys_inv):
            tensordict.set(key, value)
        return tensordict.exclude(self.in_keys_inv[0])

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        with self._tolerate_missing():
            return self._call(tensordict_reset)

    # ------------------------------------------------------------------ specs
    def _transform_spec(self, spec: TensorSpec) -> TensorSpec:
        if not isinstance(spec, Composite):
            raise TypeError(NOT_COMPOSITE_ERROR.format(type=type(spec).__name__))
        keys = {unravel_key(k) for k in spec.keys(True)}
        to_stack = [key for key in self.in_keys if key in keys]
        if not to_stack:
            return spec
        spec[self.out_keys[0]] = torch.stack([spec[key] for key in to_stack], dim=self.dim)
        if self._del_keys:
            for key in to_stack:
                del spec[key]
            for parent in self._maybe_del_parent_keys:
                if parent in {unravel_key(k) for k in spec.keys(True)} and not len(spec[parent]):
                    del spec[parent]
        return spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if "full_state_spec" in input_spec.keys() and input_spec["full_state_spec"] is not None:
            input_spec["full_state_spec"] = self._transform_spec(input_spec["full_state_spec"])
        if "full_action_spec" in input_spec.keys():
            input_spec["full_action_spec"] = self._transform_spec(input_spec["full_action_spec"])
        return input_spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._transform_spec(observation_spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._transform_spec(reward_spec)

    def transform_done_spec(self, done_spec: TensorSpec) -> TensorSpec:
        return self._transform_spec(done_spec)

    def __repr__(self) -> str:
        return f"Stack(in_keys={self.in_keys}, out_key={self.out_keys[0]}, dim={self.dim})"

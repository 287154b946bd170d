"""Key-level transforms: `RenameTransform`, `ExcludeTransform`, `SelectTransform`."""

from __future__ import annotations

from collections.abc import Sequence

from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Composite

from ._base import Transform, _as_key_list, _key_tuple, _spec_keys

RENAME_COUNT_ERROR = (
    "RenameTransform: {a} has {n_a} keys but {b} has {n_b}; give one new name per key"
)
_OUTPUT_GROUPS = ("full_observation_spec", "full_reward_spec", "full_done_spec")


def _move_spec(spec: Composite, src: NestedKey, dst: NestedKey, keep_src: bool) -> None:
    if src in _spec_keys(spec):
        spec[dst] = spec[src].clone()
        if not keep_src:
            del spec[src]


class RenameTransform(Transform):
    """Renames outputs from `in_keys` to `out_keys`, and inputs from `out_keys_inv` to `in_keys_inv`.

    `in_keys_inv` are the names the base env expects; `out_keys_inv` the names the outside uses
    (e.g. an action renamed for the policy). `create_copy=True` keeps the old entries too.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> RenameTransform(["a"], ["b"])(TensorDict(a=torch.zeros(1))).keys()
        _StringKeys(dict_keys(['b']))
    """

    _call_on_reset = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey,
        out_keys: Sequence[NestedKey] | NestedKey,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        create_copy: bool = False,
    ) -> None:
        for a, b, x, y in (
            ("in_keys", "out_keys", in_keys, out_keys),
            ("in_keys_inv", "out_keys_inv", in_keys_inv, out_keys_inv),
        ):
            xs, ys = _as_key_list(x) or [], _as_key_list(y)
            if ys is not None and len(xs) != len(ys):
                raise ValueError(RENAME_COUNT_ERROR.format(a=a, n_a=len(xs), b=b, n_b=len(ys)))
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        self.create_copy = create_copy

    @property
    def has_inverse(self) -> bool:
        return bool(self.in_keys_inv)

    def _rename(self, tensordict: TensorDictBase, src: list, dst: list) -> TensorDictBase:
        for old, new in zip(src, dst):
            value = tensordict.get(old, None)
            if value is None:
                self._missing(old, tensordict)
                continue
            tensordict.set(new, value)
            if not self.create_copy:
                del tensordict[old]
        return tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self._rename(next_tensordict, self.in_keys, self.out_keys)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._rename(tensordict, self.out_keys_inv, self.in_keys_inv)

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        if tensordict is None or not self.in_keys_inv:
            return tensordict
        with self._tolerate_missing():
            return self._inv_call(tensordict)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        for group in _OUTPUT_GROUPS:
            if group in output_spec.keys():
                for old, new in zip(self.in_keys, self.out_keys):
                    _move_spec(output_spec[group], old, new, self.create_copy)
        return super().transform_output_spec(output_spec)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        for group in ("full_action_spec", "full_state_spec"):
            for old, new in zip(self.in_keys_inv, self.out_keys_inv):
                _move_spec(input_spec[group], old, new, self.create_copy)
        return input_spec


class ExcludeTransform(Transform):
    """Drops the given entries from reset and step outputs (and from the output specs).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> ExcludeTransform("b")(TensorDict(a=torch.zeros(1), b=torch.zeros(1))).keys()
        _StringKeys(dict_keys(['a']))
    """

    _call_on_reset = True

    def __init__(self, *excluded_keys: NestedKey) -> None:
        super().__init__()
        self.excluded_keys = [unravel_key(k) for k in excluded_keys]

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict.exclude(*self.excluded_keys, inplace=True)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        for group in _OUTPUT_GROUPS:
            if group in output_spec.keys():
                spec = output_spec[group]
                known = _spec_keys(spec)
                for key in self.excluded_keys:
                    if key in known:
                        del spec[key]
        return output_spec

    def __repr__(self) -> str:
        return f"ExcludeTransform(excluded_keys={self.excluded_keys})"


class SelectTransform(Transform):
    """Keeps only the given observation entries (plus rewards and done flags unless told otherwise).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> SelectTransform("a")(TensorDict(a=torch.zeros(1), b=torch.zeros(1))).keys()
        _StringKeys(dict_keys(['a']))
    """

    _call_on_reset = True

    def __init__(
        self, *selected_keys: NestedKey, keep_rewards: bool = True, keep_dones: bool = True
    ) -> None:
        super().__init__()
        self.selected_keys = [unravel_key(k) for k in selected_keys]
        self.keep_rewards = keep_rewards
        self.keep_dones = keep_dones
        self._kept = list(self.selected_keys)

    def _selected(self, key: NestedKey) -> bool:
        path = _key_tuple(key)
        return any(path[: len(_key_tuple(k))] == _key_tuple(k) for k in self.selected_keys)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict.select(*self._kept, strict=False)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        kept = list(self.selected_keys)
        for group, keep_all in (
            ("full_observation_spec", False),
            ("full_reward_spec", self.keep_rewards),
            ("full_done_spec", self.keep_dones),
        ):
            if group not in output_spec.keys():
                continue
            spec = output_spec[group]
            for key in list(spec.keys(True, True)):
                if keep_all:
                    kept.append(key)
                elif not self._selected(key):
                    del spec[key]
        self._kept = kept
        return output_spec

    def __repr__(self) -> str:
        return f"SelectTransform(selected_keys={self.selected_keys})"

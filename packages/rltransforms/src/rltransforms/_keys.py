"""Key-level transforms: `RenameTransform`, `ExcludeTransform`, `SelectTransform`,
`RemoveEmptySpecs`."""

from __future__ import annotations

from collections.abc import Sequence

from tensordict import NestedKey, TensorDictBase, is_non_tensor, is_tensor_collection, unravel_key

from rlspecs import Composite, TensorSpec

from ._base import Transform, _as_key_list, _key_tuple, _spec_keys

__all__ = ["ExcludeTransform", "RemoveEmptySpecs", "RenameTransform", "SelectTransform"]

RENAME_COUNT_ERROR = (
    "The number of {a} ({n_a}) should match the number of {b} ({n_b}): give one new name per key"
)
RENAME_OVERLAP_ERROR = (
    "Cannot have matching in and out_keys because order is unclear. Please use separated "
    "transforms. Got in_keys={in_keys} and out_keys={out_keys}."
)
EXCLUDE_MISSING_ERROR = (
    "ExcludeTransform: key {key!r} not found in the environment outputs (keys: {keys})"
)
KEY_TYPE_ERROR = "{cls}: keys must be strings or tuples of strings, got {key!r}"
_OUTPUT_GROUPS = ("full_observation_spec", "full_reward_spec", "full_done_spec")
_INPUT_GROUPS = ("full_action_spec", "full_state_spec")


def _key_list(cls: str, keys: Sequence[NestedKey]) -> list[NestedKey]:
    try:
        return [unravel_key(k) for k in keys]
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(KEY_TYPE_ERROR.format(cls=cls, key=keys)) from err


def _move_spec(spec: Composite, src: NestedKey, dst: NestedKey, keep_src: bool) -> None:
    if src in _spec_keys(spec):
        spec[dst] = spec[src].clone()
        if not keep_src:
            del spec[src]


def _by_depth(item: tuple[NestedKey, object]) -> int:
    """Deepest keys first, so that an emptied parent is seen after its children go."""
    return -len(_key_tuple(item[0]))


class RenameTransform(Transform):
    """Renames outputs from `in_keys` to `out_keys`, and inputs from `out_keys_inv` to `in_keys_inv`.

    `in_keys_inv` are the names the base env expects; `out_keys_inv` the names the outside uses
    (e.g. an action renamed for the policy). `create_copy=True` keeps the old entries too (to
    expose a reward or done flag under a second name).

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
        if set(self.in_keys) & set(self.out_keys):
            raise ValueError(
                RENAME_OVERLAP_ERROR.format(in_keys=self.in_keys, out_keys=self.out_keys)
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
        for group in _INPUT_GROUPS:
            if group in input_spec.keys() and input_spec[group] is not None:
                for old, new in zip(self.in_keys_inv, self.out_keys_inv):
                    _move_spec(input_spec[group], old, new, self.create_copy)
        return input_spec


class ExcludeTransform(Transform):
    """Drops the given entries from reset and step outputs (and from the output specs).

    With `inverse=True` the entries are dropped from the inputs instead, before the base env
    sees them. Excluding an entry the env does not output is an error.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> ExcludeTransform("b")(TensorDict(a=torch.zeros(1), b=torch.zeros(1))).keys()
        _StringKeys(dict_keys(['a']))
    """

    def __init__(self, *excluded_keys: NestedKey, inverse: bool = False) -> None:
        super().__init__()
        if len(excluded_keys) == 1 and isinstance(excluded_keys[0], list):
            excluded_keys = tuple(excluded_keys[0])
        self.excluded_keys = _key_list("ExcludeTransform", excluded_keys)
        self.inverse = inverse

    @property
    def has_inverse(self) -> bool:
        return self.inverse

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.inverse:
            return next_tensordict
        return next_tensordict.exclude(*self.excluded_keys, inplace=True)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if not self.inverse:
            return tensordict
        return tensordict.exclude(*self.excluded_keys, inplace=True)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self.inverse:
            return output_spec
        groups = [output_spec[g] for g in _OUTPUT_GROUPS if g in output_spec.keys()]
        for key in self.excluded_keys:
            for spec in groups:
                if key in _spec_keys(spec):
                    del spec[key]
                    break
            else:
                known = sorted(str(k) for spec in groups for k in spec.keys(True, True))
                raise KeyError(EXCLUDE_MISSING_ERROR.format(key=key, keys=known))
        return output_spec

    def __repr__(self) -> str:
        return f"ExcludeTransform(excluded_keys={self.excluded_keys}, inverse={self.inverse})"


class SelectTransform(Transform):
    """Keeps only the given observation entries (plus rewards and done flags unless told otherwise).

    Entries the env needs as inputs (its state keys) are kept too. A selected key keeps the
    entries nested under it.

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
        if len(selected_keys) == 1 and isinstance(selected_keys[0], list):
            selected_keys = tuple(selected_keys[0])
        self.selected_keys = _key_list("SelectTransform", selected_keys)
        self.keep_rewards = keep_rewards
        self.keep_dones = keep_dones
        self._kept = list(self.selected_keys)
        if keep_rewards:
            self._kept.append("reward")
        if keep_dones:
            self._kept.append("done")

    def _selected(self, key: NestedKey) -> bool:
        path = _key_tuple(key)
        return any(path[: len(_key_tuple(k))] == _key_tuple(k) for k in self.selected_keys)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return next_tensordict.select(*self._kept, strict=False)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        kept = list(self.selected_keys)
        parent = self.parent
        states = set(parent.full_state_spec.keys(True, True)) if parent is not None else set()
        for group, keep_all in (
            ("full_observation_spec", False),
            ("full_reward_spec", self.keep_rewards),
            ("full_done_spec", self.keep_dones),
        ):
            if group not in output_spec.keys():
                continue
            spec = output_spec[group]
            for key in list(spec.keys(True, True)):
                if keep_all or key in states:
                    kept.append(key)
                elif not self._selected(key):
                    del spec[key]
        self._kept = kept + [k for k in states if k not in kept]
        return output_spec

    def __repr__(self) -> str:
        return f"SelectTransform(selected_keys={self.selected_keys})"


class RemoveEmptySpecs(Transform):
    """Removes empty Composite specs and the empty tensordicts they describe.

    Empty inputs the base env declares are recreated before it steps.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(1), b=TensorDict(c=TensorDict()))
        >>> RemoveEmptySpecs()(td).keys()
        _StringKeys(dict_keys(['a']))
    """

    def __init__(self) -> None:
        super().__init__()
        self._empty_inputs: list[NestedKey] = []

    @property
    def has_inverse(self) -> bool:
        return bool(self._empty_inputs)

    @staticmethod
    def _remove_empty(spec: Composite) -> list[NestedKey]:
        removed = []
        for key, leaf in sorted(spec.items(True), key=_by_depth):
            if isinstance(leaf, Composite) and leaf.is_empty():
                del spec[key]
                removed.append(key)
        return removed

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        for group in _OUTPUT_GROUPS:
            if group in output_spec.keys():
                self._remove_empty(output_spec[group])
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        self._empty_inputs = []
        for group in _INPUT_GROUPS:
            if group in input_spec.keys() and input_spec[group] is not None:
                self._empty_inputs += self._remove_empty(input_spec[group])
        return input_spec

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key, value in sorted(next_tensordict.items(True), key=_by_depth):
            if is_tensor_collection(value) and not is_non_tensor(value) and value.is_empty():
                del next_tensordict[key]
        return next_tensordict

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for key in reversed(self._empty_inputs):
            if key not in tensordict.keys(True):
                tensordict.create_nested(key)
        return tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if isinstance(observation_spec, Composite):
            self._remove_empty(observation_spec)
        return observation_spec

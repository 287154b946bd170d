"""`UnaryTransform` (any function of one entry, specs inferred from its output) and `Hash`."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from copy import copy
from typing import Any

import torch
from tensordict import NestedKey, NonTensorData, NonTensorStack, TensorDictBase

from rlspecs import Composite, TensorSpec, make_composite_from_td

from ._base import Transform, _spec_keys

__all__ = ["Hash", "UnaryTransform"]

MISSING_INV_KEY_ERROR = "UnaryTransform: {key!r} not found in the input spec (keys: {keys})"
NOT_COMPOSITE_ERROR = "{cls}: Only specs of type Composite can be transformed (got {type})"
NO_REPERTOIRE_ERROR = "An inverse transform was queried but the repertoire is None."
NOT_A_TENSOR_ERROR = "Hash function must return a tensor, but got {type}"


def _unwrap(value: Any) -> Any:
    """The python data held by non-tensor entries (a list for a stack); anything else as is."""
    if isinstance(value, NonTensorData):
        return value.get("data") if value.dim() == 0 else value.tolist()
    if isinstance(value, NonTensorStack):
        return value.tolist()
    return value


class UnaryTransform(Transform):
    """Writes `fn(value)` at each out_key for the value at its in_key (and `inv_fn` inversely).

    The specs of the outputs are those of `fn` applied to zero-filled inputs (any type `fn`
    returns: a tensor, a string held as non-tensor data, ...). Non-tensor inputs reach `fn` as
    their python data unless `use_raw_nontensor=True`.

    Args:
        in_keys: the inputs of `fn`.
        out_keys: where to write its outputs.
        in_keys_inv: the base env's entries written by the inverse.
        out_keys_inv: the entries the inverse reads.
        fn: the function.
        inv_fn: the inverse's function (default: `fn`).
        use_raw_nontensor: pass non-tensor entries to `fn` as they are stored.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = UnaryTransform(in_keys=["obs"], out_keys=["obs_str"], fn=lambda x: str(x.tolist()))
        >>> t(TensorDict(obs=torch.tensor([1, 2])))["obs_str"]
        '[1, 2]'
    """

    _call_on_reset = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey,
        out_keys: Sequence[NestedKey] | NestedKey,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        *,
        fn: Callable[[Any], Any],
        inv_fn: Callable[[Any], Any] | None = None,
        use_raw_nontensor: bool = False,
    ) -> None:
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        self._fn = fn
        self._inv_fn = inv_fn
        self._use_raw_nontensor = use_raw_nontensor

    def _apply_transform(self, value: Any) -> Any:
        return self._fn(value if self._use_raw_nontensor else _unwrap(value))

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        # torchrl runs the inverse on a reset's input too (entries it lacks are skipped)
        if tensordict is not None and self.in_keys_inv:
            with self._tolerate_missing():
                tensordict = self._inv_call(tensordict)
        return tensordict

    def _inv_apply_transform(self, state: Any) -> Any:
        state = state if self._use_raw_nontensor else _unwrap(state)
        return (self._fn if self._inv_fn is None else self._inv_fn)(state)

    # ------------------------------------------------------------------ specs
    def _set_from(self, spec: TensorSpec, inferred: Composite, pairs: Any) -> TensorSpec:
        if not isinstance(spec, Composite):
            raise TypeError(NOT_COMPOSITE_ERROR.format(cls=type(self).__name__, type=type(spec)))
        keys = _spec_keys(spec)
        for in_key, out_key in pairs:
            if in_key in keys:
                spec[out_key] = inferred[out_key]
        return spec

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        groups = [
            g
            for g in ("full_observation_spec", "full_reward_spec", "full_done_spec")
            if g in output_spec.keys()
        ]
        probe = output_spec[groups[0]].zero()
        for group in groups[1:]:
            probe.update(output_spec[group].zero())
        inferred = make_composite_from_td(self._call(probe), unsqueeze_null_shapes=False)
        for group in groups:
            output_spec[group] = self._set_from(
                output_spec[group], inferred, list(zip(self.in_keys, self.out_keys))
            )
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if "full_state_spec" not in input_spec.keys() or input_spec["full_state_spec"] is None:
            input_spec["full_state_spec"] = Composite(
                shape=input_spec.shape, device=input_spec.device
            )
        probe = input_spec["full_action_spec"].zero()
        probe.update(input_spec["full_state_spec"].zero())
        # the outside's spec of an inverse input: the forward map of the base env's entry
        present = _spec_keys(probe)
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            if in_key in present:
                probe.set(out_key, self._apply_transform(probe.get(in_key)))
            elif not self.missing_tolerance:
                raise KeyError(MISSING_INV_KEY_ERROR.format(key=in_key, keys=sorted(present)))
        inferred = make_composite_from_td(probe, unsqueeze_null_shapes=False)
        pairs = list(zip(self.in_keys_inv, self.out_keys_inv))
        for group in ("full_action_spec", "full_state_spec"):
            input_spec[group] = self._set_from(input_spec[group], inferred, pairs)
        return input_spec


class Hash(UnaryTransform):
    """Writes a hash (a `uint8` tensor, 32 bytes by default) of each in_key's value.

    The default hash is `Hash.reproducible_hash` (SHA-256 of the value's string, prefixed by
    `seed`); a list of values (a batch of strings) gets one hash per item. With
    `in_keys_inv`/`out_keys_inv` (or a `repertoire`), the inputs are remembered by hash and
    the inverse maps a hash back to its input.

    Args:
        in_keys: the values to hash.
        out_keys: where to write the hashes.
        in_keys_inv: entries the inverse writes (the inputs looked up by hash).
        out_keys_inv: entries holding the hashes the inverse reads.
        hash_fn: `(value, seed) -> tensor` (`seed` only passed when given).
        seed: the seed of the hash function.
        use_raw_nontensor: pass non-tensor entries to `hash_fn` as they are stored.
        repertoire: a dict (hash key -> input) to record the inputs in (not copied).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = Hash(in_keys=["text"], out_keys=["hash"])
        >>> out = t(TensorDict(text="hello"))
        >>> out["hash"].shape, out["hash"].dtype
        (torch.Size([32]), torch.uint8)
        >>> bytes(out["hash"][:4].tolist()).hex()
        '2cf24dba'
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey,
        out_keys: Sequence[NestedKey] | NestedKey,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        *,
        hash_fn: Callable[..., torch.Tensor] | None = None,
        seed: Any | None = None,
        use_raw_nontensor: bool = False,
        repertoire: dict[Any, Any] | None = None,
    ) -> None:
        if repertoire is None and in_keys_inv is not None and len(in_keys_inv) > 0:
            repertoire = {}
        self._repertoire = repertoire
        self._seed = seed
        self._default_hash = hash_fn is None
        self._hash_fn = Hash.reproducible_hash if hash_fn is None else hash_fn
        super().__init__(
            in_keys=in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
            fn=self.call_hash_fn,
            inv_fn=self.get_input_from_hash,
            use_raw_nontensor=use_raw_nontensor,
        )

    @classmethod
    def hash_to_repertoire_key(cls, hash_tensor: Any) -> Any:
        """A hashable key for a hash (nested tuples of ints for a tensor or a list)."""
        if isinstance(hash_tensor, torch.Tensor):
            if hash_tensor.dim() == 0:
                return hash_tensor.tolist()
            return tuple(cls.hash_to_repertoire_key(t) for t in hash_tensor.tolist())
        if isinstance(hash_tensor, list):
            return tuple(cls.hash_to_repertoire_key(t) for t in hash_tensor)
        return hash_tensor

    def get_input_from_hash(self, hash_tensor: torch.Tensor) -> Any:
        """The input that gave `hash_tensor` (needs a repertoire; an unknown hash: KeyError)."""
        if self._repertoire is None:
            raise RuntimeError(NO_REPERTOIRE_ERROR)
        return self._repertoire[self.hash_to_repertoire_key(hash_tensor)]

    def _hash_one(self, value: Any) -> torch.Tensor:
        out = self._hash_fn(value) if self._seed is None else self._hash_fn(value, self._seed)
        if not torch.is_tensor(out):
            raise ValueError(NOT_A_TENSOR_ERROR.format(type=type(out)))
        return out

    def call_hash_fn(self, value: Any) -> torch.Tensor:
        """Hash `value` (item by item for a list, with the default hash) and record it."""
        if isinstance(value, list) and self._default_hash:
            return torch.stack([self.call_hash_fn(item) for item in value])
        hashed = self._hash_one(value)
        if self._repertoire is not None:
            self._repertoire[self.hash_to_repertoire_key(hashed)] = copy(value)
        return hashed

    @classmethod
    def reproducible_hash(cls, string: str | None, seed: str | None = None) -> torch.Tensor:
        """SHA-256 of `seed + string` (`""` for None) as a `(32,)` `uint8` tensor.

        Examples:
            >>> Hash.reproducible_hash("a").equal(Hash.reproducible_hash("a"))
            True
        """
        if string is None:
            string = ""
        text = seed + string if seed is not None else str(string)
        digest = hashlib.sha256(text.encode("utf-8")).digest()
        return torch.frombuffer(bytearray(digest), dtype=torch.uint8)

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        # torchrl's state of a Hash: its repertoire
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "_repertoire"] = self._repertoire

    def _load_from_state_dict(
        self,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list,
        unexpected_keys: list,
        error_msgs: list,
    ) -> None:
        key = prefix + "_repertoire"
        if key in state_dict:
            self._repertoire = state_dict.pop(key)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, error_msgs
        )

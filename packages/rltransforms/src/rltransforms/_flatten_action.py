"""`FlattenAction`: the policy sees a flat action, the env its original shape."""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Bounded, Composite, ContinuousBox, TensorSpec

from ._base import Transform, _get

__all__ = ["FlattenAction"]

POSITIVE_DIM_ERROR = (
    "{arg} should be smaller than 0 to accommodate for "
    "envs of different batch_sizes. Set allow_positive_dim=True "
    "to allow positive dimensions."
)
DIM_ORDER_ERROR = "first_dim ({first}) must be <= last_dim ({last})."
NO_SHAPE_ERROR = (
    "FlattenAction has no stored unflatten shape for key {key!r}. Pass ``action_shape`` to the "
    "constructor or attach the transform to a TransformedEnv with an action spec for this key."
)
AMBIGUOUS_KEY_ERROR = (
    "FlattenAction._inv_apply_transform cannot disambiguate between {n} action keys. Use "
    "``FlattenAction.inv(td)`` / ``_inv_call(td)`` instead, which know which key each tensor "
    "belongs to."
)
SPAN_ERROR = (
    "FlattenAction(first_dim={first}, last_dim={last}) is not compatible with an action of "
    "shape {shape}."
)
MISSING_ERROR = "FlattenAction: {key!r} not found in the tensordict (keys: {keys})"


def _as_list(keys: Sequence[NestedKey] | NestedKey) -> list[NestedKey]:
    return [keys] if isinstance(keys, (str, tuple)) else list(keys)


class FlattenAction(Transform):
    """Flattens adjacent dims `[first_dim, last_dim]` of an action (FlattenObservation's twin).

    The policy writes a flat action; it is unflattened to the env's shape before the base env
    steps. The forward map (`t(td)`, e.g. on stored data) flattens env-shaped actions.

    Args:
        first_dim: first dim to flatten (negative unless `allow_positive_dim`).
        last_dim: last dim to flatten, inclusive (negative unless `allow_positive_dim`).
        in_keys_inv: the env's action keys (default `["action"]`, several allowed).
        out_keys_inv: the keys the policy writes (default: `in_keys_inv`).
        in_keys: keys flattened by the forward map (default: `in_keys_inv`).
        out_keys: where the forward map writes them (default: `in_keys`).
        allow_positive_dim: accept dims counted after the env's batch dims.
        action_shape: the pre-flatten shape of the span, for use without an env.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlmocks import ContinuousActionVecMockEnv
        >>> from rlspecs import Bounded
        >>> from rltransforms import TransformedEnv
        >>> base = ContinuousActionVecMockEnv(action_spec=Bounded(-1.0, 1.0, (1, 7)))
        >>> env = TransformedEnv(base, FlattenAction(first_dim=-2, last_dim=-1))
        >>> env.action_spec.shape
        torch.Size([7])
        >>> env.transform.inv(TensorDict(action=torch.zeros(7)))["action"].shape
        torch.Size([1, 7])
    """

    invertible = True

    def __init__(
        self,
        first_dim: int = -2,
        last_dim: int = -1,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        allow_positive_dim: bool = False,
        *,
        action_shape: Sequence[int] | None = None,
    ) -> None:
        in_keys_inv = ["action"] if in_keys_inv is None else _as_list(in_keys_inv)
        super().__init__(
            in_keys=list(in_keys_inv) if in_keys is None else in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
        )
        if not allow_positive_dim and first_dim >= 0:
            raise ValueError(POSITIVE_DIM_ERROR.format(arg="first_dim"))
        if not allow_positive_dim and last_dim >= 0:
            raise ValueError(POSITIVE_DIM_ERROR.format(arg="last_dim"))
        if first_dim > last_dim:
            raise ValueError(DIM_ORDER_ERROR.format(first=first_dim, last=last_dim))
        self._first_dim = first_dim
        self._last_dim = last_dim
        self.allow_positive_dim = bool(allow_positive_dim)
        self._unflatten_shapes: dict[NestedKey, tuple[int, ...]] = {}
        if action_shape is not None:
            shape = tuple(int(s) for s in action_shape)
            for key in self.in_keys_inv:
                self._unflatten_shapes[key] = shape

    def _batch_dims(self) -> int:
        container = self.container
        return len(container.batch_size) if container is not None else 0

    @property
    def first_dim(self) -> int:
        """The first flattened dim (positive dims counted after the env's batch dims)."""
        if self._first_dim >= 0:
            return self._batch_dims() + self._first_dim
        return self._first_dim

    @property
    def last_dim(self) -> int:
        """The last flattened dim (positive dims counted after the env's batch dims)."""
        if self._last_dim >= 0:
            return self._batch_dims() + self._last_dim
        return self._last_dim

    @property
    def _flat_dim(self) -> int:
        # where the merged dim sits once flattened: at first_dim when counted from the left, at
        # last_dim when counted from the right (the dims collapsed lie on its left)
        return self.first_dim if self._first_dim >= 0 else self.last_dim

    # ------------------------------------------------------------------ data path
    def _apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        return torch.flatten(action, self.first_dim, self.last_dim)

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        if len(self.in_keys_inv) != 1:
            raise RuntimeError(AMBIGUOUS_KEY_ERROR.format(n=len(self.in_keys_inv)))
        return torch.unflatten(action, self._flat_dim, self._shape_of(self.in_keys_inv[0]))

    def _shape_of(self, key: NestedKey) -> tuple[int, ...]:
        shape = self._unflatten_shapes.get(key)
        if shape is None:
            container = self.container
            if container is not None:
                container.input_spec  # noqa: B018  (building the specs records the shapes)
                shape = self._unflatten_shapes.get(key)
        if shape is None:
            raise RuntimeError(NO_SHAPE_ERROR.format(key=key))
        return shape

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            value = _get(tensordict, out_key)
            if value is None:
                if not self.missing_tolerance:
                    raise KeyError(
                        MISSING_ERROR.format(
                            key=out_key, keys=sorted(map(str, tensordict.keys(True)))
                        )
                    )
                continue
            tensordict.set(in_key, torch.unflatten(value, self._flat_dim, self._shape_of(in_key)))
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        # the action only travels towards the env; a step's output holds none
        return next_tensordict

    # ------------------------------------------------------------------ specs
    def _span(self, spec: TensorSpec) -> tuple[int, ...]:
        ndim = len(spec.shape)
        first = self.first_dim if self.first_dim >= 0 else ndim + self.first_dim
        last = self.last_dim if self.last_dim >= 0 else ndim + self.last_dim
        if first < 0 or last >= ndim or first > last:
            raise RuntimeError(
                SPAN_ERROR.format(
                    first=self._first_dim, last=self._last_dim, shape=tuple(spec.shape)
                )
            )
        return tuple(int(s) for s in spec.shape[first : last + 1])

    def _flatten_leaf(self, spec: TensorSpec) -> TensorSpec:
        space = getattr(spec, "space", None)
        if isinstance(space, ContinuousBox):
            low = torch.flatten(space.low, self.first_dim, self.last_dim)
            high = torch.flatten(space.high, self.first_dim, self.last_dim)
            return Bounded(
                low=low, high=high, shape=low.shape, device=spec.device, dtype=spec.dtype
            )
        shape = list(spec.shape)
        ndim = len(shape)
        first = self.first_dim if self.first_dim >= 0 else ndim + self.first_dim
        last = self.last_dim if self.last_dim >= 0 else ndim + self.last_dim
        spec = spec.clone()
        spec.shape = torch.Size(
            (*shape[:first], math.prod(shape[first : last + 1]), *shape[last + 1 :])
        )
        return spec

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        if not isinstance(action_spec, Composite):
            self._unflatten_shapes[self.in_keys_inv[0]] = self._span(action_spec)
            return self._flatten_leaf(action_spec)
        keys = {unravel_key(k) for k in action_spec.keys(True, True)}
        for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
            if in_key in keys:
                leaf = action_spec[in_key]
                self._unflatten_shapes[in_key] = self._span(leaf)
                action_spec[out_key] = self._flatten_leaf(leaf)
                if in_key != out_key:
                    del action_spec[in_key]
        return action_spec

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(first_dim={int(self.first_dim)}, "
            f"last_dim={int(self.last_dim)}, in_keys_inv={self.in_keys_inv}, "
            f"out_keys_inv={self.out_keys_inv})"
        )

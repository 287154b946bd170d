"""Normalisation with fixed statistics: `ObservationNorm` (its statistics estimated once by
`init_stats`). Running statistics are `VecNorm`'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NestedKey, unravel_key

from rlspecs import Bounded, Composite, TensorSpec, Unbounded

from ._base import ObservationTransform

__all__ = ["ObservationNorm"]

NORM_NO_IN_KEYS_ERROR = (
    "Not passing in_keys to ObservationNorm is a deprecated behaviour: name the entries to "
    "normalise (e.g. in_keys=['observation'])."
)
NORM_MIXED_INIT_ERROR = (
    "Cannot have an mixed initialized and uninitialized loc and scale: pass both or neither "
    "(and call init_stats)"
)
NORM_UNINITIALIZED_ERROR = (
    "Loc/Scale have not been initialized. Either pass in values in the constructor or call "
    "the init_stats method"
)
NORM_CAT_DIM_ERROR = "cat_dim must be specified if reduce_dim is not an integer (got {reduce_dim})."
NORM_CAT_DIM_PART_ERROR = (
    "cat_dim must be part of or equal to reduce_dim (got cat_dim={cat_dim}, "
    "reduce_dim={reduce_dim})."
)
NORM_ALREADY_INITIALIZED_ERROR = "Loc/Scale are already initialized: ({loc}, {scale})"
NORM_MANY_KEYS_ERROR = (
    "Transform has multiple in_keys but no specific key was passed as an argument "
    "(in_keys: {keys}); pass key= to init_stats"
)
NORM_NO_PARENT_ERROR = (
    "Cannot initialize the transform if parent env is not defined: put the ObservationNorm "
    "in a TransformedEnv before calling init_stats."
)
# torchrl's text, kept whole (its regex users match "order.Trying")
NORM_ORDER_ERROR = (
    "ObservationNorms need to be initialized in the right order."
    "Trying to initialize an ObservationNorm while a parent ObservationNorm transform is "
    "still uninitialized"
)
NORM_KEEP_DIMS_ERROR = (
    "keep_dim elements must be part of reduce_dim list (keep_dims={keep_dims}, "
    "reduce_dim={reduce_dim})."
)
NORM_STATS_KEY_ERROR = (
    "ObservationNorm.init_stats: {key!r} is not in the parent env's rollouts (keys: {keys}); "
    "pass key= naming an entry of the env before this transform"
)
NORM_SHAPE_ERROR = (
    "ObservationNorm: loc {loc} and scale {scale} do not broadcast to the shape {shape} of "
    "{key!r}; give statistics of the entry's shape (or one that broadcasts to it)"
)
NORM_NON_FINITE_ERROR = "Non-finite values found in {name} (estimated from key {key!r})"


def _as_tensor(value: float | torch.Tensor | None) -> torch.Tensor | None:
    """Python numbers become default-dtype tensors (an int loc must not make outputs integral)."""
    if value is None or isinstance(value, torch.Tensor):
        return value
    return torch.tensor(value, dtype=torch.get_default_dtype())


class ObservationNorm(ObservationTransform):
    """Affine map of observations: `obs * scale + loc`, or `(obs - loc) / scale` if `standard_normal`.

    `loc` and `scale` are given together, or both left unset and estimated from random rollouts
    of the parent env by `init_stats`. With `in_keys_inv`, inputs are mapped back before the
    base env steps. Bounded specs get their bounds mapped.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ObservationNorm(loc=0.5, scale=2.0, in_keys=["observation"])
        >>> t(TensorDict(observation=torch.ones(2)))["observation"]
        tensor([2.5000, 2.5000])
    """

    _call_on_reset = True
    invertible = True

    def __init__(
        self,
        loc: float | torch.Tensor | None = None,
        scale: float | torch.Tensor | None = None,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        standard_normal: bool = False,
    ) -> None:
        if in_keys is None:
            raise RuntimeError(NORM_NO_IN_KEYS_ERROR)
        if (loc is None) != (scale is None):
            raise ValueError(NORM_MIXED_INIT_ERROR)
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        self.eps = 1e-6
        self.register_buffer("standard_normal", torch.as_tensor(standard_normal))
        scale_tensor = _as_tensor(scale)
        if scale is not None and not isinstance(scale, torch.Tensor):
            scale_tensor = scale_tensor.clamp_min(self.eps)
        self.register_buffer("loc", _as_tensor(loc))
        self.register_buffer("scale", scale_tensor)

    @property
    def initialized(self) -> bool:
        """Whether loc and scale are set."""
        return self.loc is not None and self.scale is not None

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        loc, scale = self.loc, self.scale
        if loc is None or scale is None:
            raise RuntimeError(NORM_UNINITIALIZED_ERROR)
        if self.standard_normal:
            return (obs - loc) / scale
        return obs * scale + loc

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        loc, scale = self.loc, self.scale
        if loc is None or scale is None:
            raise RuntimeError(NORM_UNINITIALIZED_ERROR)
        if self.standard_normal:
            return state * scale + loc
        return (state - loc) / scale

    def _map_spec(self, spec: TensorSpec) -> TensorSpec:
        if not self.initialized or not isinstance(spec, (Bounded, Unbounded)):
            return spec.clone()
        # the data's dtype after the map (uint8 pixels come out as floats)
        dtype = self._apply_transform(torch.zeros((), dtype=spec.dtype, device=spec.device)).dtype
        if isinstance(spec, Unbounded):
            return Unbounded(shape=spec.shape, dtype=dtype, device=spec.device)
        a, b = self._apply_transform(spec.low), self._apply_transform(spec.high)
        return Bounded(
            low=torch.minimum(a, b).expand(spec.shape),
            high=torch.maximum(a, b).expand(spec.shape),
            shape=spec.shape,
            dtype=dtype,
            device=spec.device,
        )

    def _check_stats_shape(self, spec: TensorSpec, keys: Sequence[NestedKey]) -> None:
        """Raise, naming the key, if loc/scale cannot normalise an entry of `spec` (once per build)."""
        if not self.initialized:
            return
        leaves = {keys[0]: spec} if keys and not isinstance(spec, Composite) else {}
        if isinstance(spec, Composite):
            present = {unravel_key(k) for k in spec.keys(True, True)}
            leaves = {key: spec[key] for key in keys if key in present}
        for key, leaf in leaves.items():
            try:
                shape = torch.broadcast_shapes(self.loc.shape, self.scale.shape, leaf.shape)
            except RuntimeError:
                shape = None
            if shape != leaf.shape:
                raise ValueError(
                    NORM_SHAPE_ERROR.format(
                        loc=tuple(self.loc.shape),
                        scale=tuple(self.scale.shape),
                        shape=tuple(leaf.shape),
                        key=key,
                    )
                )

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        self._check_stats_shape(observation_spec, self.in_keys)
        return self._map_specs(observation_spec, self.in_keys, self.out_keys, self._map_spec)

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        if isinstance(input_spec, Composite):
            for group in ("full_action_spec", "full_state_spec"):
                if group in input_spec.keys() and input_spec[group] is not None:
                    self._check_stats_shape(input_spec[group], self.in_keys_inv)
        else:
            self._check_stats_shape(input_spec, self.in_keys_inv)
        return self._map_input_specs(input_spec, self._map_spec)

    def init_stats(
        self,
        num_iter: int,
        reduce_dim: int | Sequence[int] = 0,
        cat_dim: int | None = None,
        key: NestedKey | None = None,
        keep_dims: Sequence[int] | None = None,
    ) -> None:
        """Estimate loc and scale from at least `num_iter` random steps of the parent env.

        The observations read at `key` (default: the only in_key) are concatenated along
        `cat_dim` (default: `reduce_dim`, which must then be an int), then reduced over
        `reduce_dim` to a mean and a standard deviation; dims in `keep_dims` (part of
        `reduce_dim`) stay as singletons. Transforms before this one must be initialized.
        """
        reduce_dims = [reduce_dim] if isinstance(reduce_dim, int) else list(reduce_dim)
        if cat_dim is None:
            if not isinstance(reduce_dim, int):
                raise ValueError(NORM_CAT_DIM_ERROR.format(reduce_dim=reduce_dim))
            cat_dim = reduce_dim
        if cat_dim not in reduce_dims:
            raise ValueError(NORM_CAT_DIM_PART_ERROR.format(cat_dim=cat_dim, reduce_dim=reduce_dim))
        if self.initialized:
            raise RuntimeError(
                NORM_ALREADY_INITIALIZED_ERROR.format(loc=self.loc, scale=self.scale)
            )
        if len(self.in_keys) > 1 and key is None:
            raise RuntimeError(NORM_MANY_KEYS_ERROR.format(keys=self.in_keys))
        key = self.in_keys[0] if key is None else key
        parent = self.parent
        if parent is None:
            raise RuntimeError(NORM_NO_PARENT_ERROR)
        for module in parent.modules():
            if isinstance(module, ObservationNorm) and not module.initialized:
                raise RuntimeError(NORM_ORDER_ERROR)

        chunks, collected = [], 0
        while collected < num_iter:
            rollout = parent.rollout(max_steps=num_iter)
            collected += rollout.numel()
            chunk = rollout.get(key, None)
            if chunk is None:
                keys = sorted(map(str, rollout.keys(True, True)))
                raise KeyError(NORM_STATS_KEY_ERROR.format(key=key, keys=keys))
            chunks.append(chunk)
        data = torch.cat(chunks, cat_dim)
        if not data.is_floating_point():  # e.g. uint8 pixels: statistics in the default dtype
            data = data.to(torch.get_default_dtype())

        # every dim negative, so that they name the same dims before and after squeezing
        dims = sorted(d if d < 0 else d - data.ndim for d in reduce_dims)
        kept = [] if keep_dims is None else [d if d < 0 else d - data.ndim for d in keep_dims]
        if any(d not in dims for d in kept):
            raise ValueError(
                NORM_KEEP_DIMS_ERROR.format(keep_dims=keep_dims, reduce_dim=reduce_dim)
            )
        loc = data.mean(dims, keepdim=True)
        scale = data.std(dims, keepdim=True)
        for d in dims:
            if d not in kept:
                loc, scale = loc.squeeze(d), scale.squeeze(d)
        if not self.standard_normal:
            scale = 1 / scale.clamp_min(self.eps)
            loc = -loc * scale
        for name, value in (("loc", loc), ("scale", scale)):
            if not torch.isfinite(value).all():
                raise RuntimeError(NORM_NON_FINITE_ERROR.format(name=name, key=key))
        self.loc, self.scale = loc, scale.clamp_min(self.eps)
        try:
            self._on_transform_change()
        except Exception:
            # statistics the env's specs refuse (e.g. a batch dim left in by reduce_dim) are
            # dropped, so that init_stats can be called again with other dims
            self.loc = self.scale = None
            self._on_transform_change()
            raise

    def _load_from_state_dict(self, state_dict: dict[str, Any], prefix: str, *args: Any) -> None:
        # statistics saved by an initialized transform load into an uninitialized one
        for name in ("loc", "scale"):
            value = state_dict.get(prefix + name)
            if value is not None and getattr(self, name) is None:
                setattr(self, name, value.clone())
        super()._load_from_state_dict(state_dict, prefix, *args)

    def __repr__(self) -> str:
        if self.initialized and self.loc.numel() == 1 and self.scale.numel() == 1:
            stats = f"loc={float(self.loc):4.4f}, scale={float(self.scale):4.4f}"
        else:
            stats = f"initialized={self.initialized}"
        return f"ObservationNorm({stats}, keys={self.in_keys})"

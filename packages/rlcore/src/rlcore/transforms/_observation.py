"""Observation transforms: `CatTensors`, `ObservationNorm`."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Bounded, Composite, TensorSpec, Unbounded

from ._base import MISSING_KEY_ERROR, Transform, _spec_keys

CAT_MISSING_SPEC_ERROR = (
    "CatTensors: in_keys {keys} are not in the observation spec (keys: {known})"
)
NORM_UNINITIALIZED_ERROR = (
    "ObservationNorm: loc and scale are not set; pass them to the constructor or call init_stats()"
)
NORM_NO_PARENT_ERROR = (
    "ObservationNorm.init_stats needs an env: wrap the transform in a TransformedEnv"
)
NORM_CAT_DIM_ERROR = "ObservationNorm.init_stats: cat_dim must be given when reduce_dim is a tuple"


def _as_float_tensor(value: float | torch.Tensor | None) -> torch.Tensor | None:
    """Python numbers become default-dtype tensors (an int loc must not make outputs integral)."""
    if value is None or isinstance(value, torch.Tensor):
        return value
    return torch.tensor(value, dtype=torch.get_default_dtype())


def _sort_key(key: NestedKey) -> str:
    return key if isinstance(key, str) else ".".join(key)


class CatTensors(Transform):
    """Concatenates `in_keys` along `dim` into `out_key`, deleting the inputs unless `del_keys=False`.

    The inputs are sorted by name first (`sort=False` keeps the given order).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(a=torch.zeros(2), b=torch.ones(1))
        >>> CatTensors(["a", "b"], "ab")(td)["ab"]
        tensor([0., 0., 1.])
    """

    _call_on_reset = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey],
        out_key: NestedKey = "observation_vector",
        dim: int = -1,
        *,
        del_keys: bool = True,
        sort: bool = True,
    ) -> None:
        in_keys = [unravel_key(k) for k in in_keys]
        if sort:
            in_keys = sorted(in_keys, key=_sort_key)
        super().__init__(in_keys=in_keys, out_keys=[out_key])
        self.dim = dim
        self.del_keys = del_keys
        out = self.out_keys[0]
        self._deleted = [k for k in self.in_keys if k != out] if del_keys else []

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        values = [next_tensordict.get(key, None) for key in self.in_keys]
        if any(value is None for value in values):
            missing = [k for k, v in zip(self.in_keys, values) if v is None]
            if not self._missing_tolerance:
                raise KeyError(
                    MISSING_KEY_ERROR.format(
                        cls="CatTensors",
                        key=missing[0] if len(missing) == 1 else missing,
                        keys=sorted(map(str, next_tensordict.keys(True))),
                    )
                )
            return next_tensordict
        next_tensordict.set(self.out_keys[0], torch.cat(values, self.dim))
        if self._deleted:
            next_tensordict.exclude(*self._deleted, inplace=True)
        return next_tensordict

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        known = _spec_keys(observation_spec)
        missing = [k for k in self.in_keys if k not in known]
        if missing:
            raise KeyError(
                CAT_MISSING_SPEC_ERROR.format(keys=missing, known=sorted(map(str, known)))
            )
        specs = [observation_spec[k] for k in self.in_keys]
        shape = list(specs[0].shape)
        shape[self.dim] = sum(spec.shape[self.dim] for spec in specs)
        observation_spec[self.out_keys[0]] = Unbounded(
            shape=torch.Size(shape), dtype=specs[0].dtype, device=specs[0].device
        )
        for key in self._deleted:
            del observation_spec[key]
        return observation_spec

    def __repr__(self) -> str:
        return f"CatTensors(in_keys={self.in_keys}, out_key={self.out_keys[0]!r}, dim={self.dim})"


class ObservationNorm(Transform):
    """Affine map of observations: `obs * scale + loc`, or `(obs - loc) / scale` when `standard_normal`.

    `loc` and `scale` may be left unset and estimated from rollouts with `init_stats`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = ObservationNorm(loc=0.5, scale=2.0, in_keys=["observation"])
        >>> t(TensorDict(observation=torch.ones(2)))["observation"]
        tensor([2.5000, 2.5000])
    """

    _call_on_reset = True

    def __init__(
        self,
        loc: float | torch.Tensor | None = None,
        scale: float | torch.Tensor | None = None,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        standard_normal: bool = False,
        eps: float = 1e-6,
    ) -> None:
        super().__init__(
            in_keys=["observation"] if in_keys is None else in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
        )
        self.standard_normal = standard_normal
        self.eps = eps
        self.register_buffer("loc", _as_float_tensor(loc))
        self.register_buffer("scale", _as_float_tensor(scale))

    @property
    def initialized(self) -> bool:
        """Whether loc and scale are set."""
        return self.loc is not None and self.scale is not None

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        loc, scale = self.loc, self.scale
        if loc is None or scale is None:
            raise RuntimeError(NORM_UNINITIALIZED_ERROR)
        if self.standard_normal:
            return (obs - loc) / scale.clamp_min(self.eps)
        return obs * scale + loc

    def _inv_apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        loc, scale = self.loc, self.scale
        if loc is None or scale is None:
            raise RuntimeError(NORM_UNINITIALIZED_ERROR)
        if self.standard_normal:
            return obs * scale + loc
        return (obs - loc) / scale

    def _map_spec(self, spec: TensorSpec) -> TensorSpec:
        if not isinstance(spec, Bounded) or not self.initialized:
            return spec.clone()
        a = self._apply_transform(spec.low)
        b = self._apply_transform(spec.high)
        return Bounded(
            low=torch.minimum(a, b).to(spec.dtype),
            high=torch.maximum(a, b).to(spec.dtype),
            shape=spec.shape,
            dtype=spec.dtype,
            device=spec.device,
        )

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        return self._map_specs(observation_spec, self.in_keys, self.out_keys, self._map_spec)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        for group in ("full_action_spec", "full_state_spec"):
            self._map_specs(input_spec[group], self.in_keys_inv, self.out_keys_inv, self._map_spec)
        return input_spec

    def init_stats(
        self,
        num_iter: int,
        reduce_dim: int | tuple[int, ...] = 0,
        cat_dim: int | None = None,
        key: NestedKey | None = None,
        keep_dims: tuple[int, ...] | None = None,
    ) -> None:
        """Estimate loc and scale from at least `num_iter` random steps of the parent env.

        The observations read at `key` (default: the first in_key) are concatenated along
        `cat_dim` (default: `reduce_dim`), then reduced over `reduce_dim` to a mean and a standard
        deviation; dims in `keep_dims` stay as singletons.
        """
        parent = self.parent
        if parent is None:
            raise RuntimeError(NORM_NO_PARENT_ERROR)
        if cat_dim is None:
            if isinstance(reduce_dim, tuple):
                raise ValueError(NORM_CAT_DIM_ERROR)
            cat_dim = reduce_dim
        key = self.in_keys[0] if key is None else key
        chunks, collected = [], 0
        while collected < num_iter:
            rollout = parent.rollout(max_steps=num_iter)
            collected += rollout.numel()
            chunks.append(rollout.get(key))
        data = torch.cat(chunks, cat_dim)
        dims = reduce_dim if isinstance(reduce_dim, tuple) else (reduce_dim,)
        loc = data.mean(dims, keepdim=True)
        scale = data.std(dims, keepdim=True).clamp_min(self.eps)
        squeeze = [d for d in dims if keep_dims is None or d not in keep_dims]
        for dim in sorted((d % data.ndim for d in squeeze), reverse=True):
            loc, scale = loc.squeeze(dim), scale.squeeze(dim)
        if not self.standard_normal:
            scale = 1 / scale
            loc = -loc * scale
        self.loc, self.scale = loc, scale
        self._on_transform_change()

    def __repr__(self) -> str:
        return (
            f"ObservationNorm(keys={self.in_keys}, standard_normal={self.standard_normal}, "
            f"initialized={self.initialized})"
        )

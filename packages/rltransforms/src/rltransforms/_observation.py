"""Observation layout transforms: `CatTensors`, `FlattenObservation`, `UnsqueezeTransform`,
`SqueezeTransform`, `PermuteTransform`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Bounded, Composite, TensorSpec, Unbounded

from ._base import MISSING_KEY_ERROR, Transform, _get, _spec_keys

__all__ = [
    "CatTensors",
    "FlattenObservation",
    "PermuteTransform",
    "SqueezeTransform",
    "UnsqueezeTransform",
]

CAT_MISSING_SPEC_ERROR = (
    "CatTensor got a list of keys that does not match the keys in observation_spec: in_keys "
    "{keys} are not in the observation spec (keys: {known})"
)
CAT_ONE_SPEC_ERROR = (
    "CatTensor cannot infer the output observation spec as there are multiple input keys but "
    "only one observation_spec (in_keys: {keys}); pass a Composite holding each of them"
)
CAT_LAZY_DIM_ERROR = "Lazy call to CatTensors is only supported when `dim=-1` (got dim={dim})."
CAT_OUT_KEY_ERROR = "CatTensors requires out_key to be of type NestedKey, got {type}"
CAT_NO_KEYS_ERROR = (
    "CatTensors: in_keys were not given and there is no env to read them from; pass in_keys "
    "or put the transform in a TransformedEnv"
)
POSITIVE_DIM_ERROR = (
    "{arg} should be smaller than 0 to accomodate for envs of different batch_sizes. Turn "
    "allow_positive_dim to accomodate for positive {arg} ({cls} got {value}; a positive dim "
    "counts after the parent env's batch dims, or from the first dim without env)."
)
DIM_ALIAS_CONFLICT_ERROR = "{cls}: got dim={dim} and {arg}={value}; pass one of them"
DIM_ALIAS_MISSING_ERROR = "{cls} needs the dim to act on: pass dim= (or {arg}=, torchrl 0.4's name)"
PERMUTE_DIMS_ERROR = (
    "Only tailing dims with negative indices are supported by PermuteTransform: dims must "
    "reorder [-{n}, ..., -1]. Got {dims} instead."
)


def _one_dim(cls: str, arg: str, value: int | None, dim: int | None) -> int:
    """The dim given as `dim` (later torchrl releases) or under its torchrl 0.4 name `arg`."""
    if value is None and dim is None:
        raise TypeError(DIM_ALIAS_MISSING_ERROR.format(cls=cls, arg=arg))
    if value is not None and dim is not None and value != dim:
        raise ValueError(DIM_ALIAS_CONFLICT_ERROR.format(cls=cls, dim=dim, arg=arg, value=value))
    return value if dim is None else dim


def _sort_key(key: NestedKey) -> str:
    # torchrl's ordering of mixed plain and nested keys, so that concatenations line up
    return key if isinstance(key, str) else "_-|-_".join(key)


def _layout_spec(spec: TensorSpec, fn: Callable[[torch.Tensor], torch.Tensor]) -> TensorSpec:
    """The spec of `fn(value)` for a layout map `fn` (unsqueeze, permute, ...) of `spec`'s values.

    Layout maps only move elements, so every kind of leaf survives them: a Bounded spec's bounds
    go through `fn`, any other leaf (OneHot, Categorical, ...) keeps its kind with the new shape.
    """
    if isinstance(spec, Bounded):
        low, high = fn(spec.low), fn(spec.high)
        return Bounded(low=low, high=high, shape=low.shape, dtype=spec.dtype, device=spec.device)
    shape = fn(torch.empty(spec.shape, device="meta")).shape
    if isinstance(spec, Unbounded):
        return Unbounded(shape=shape, dtype=spec.dtype, device=spec.device)
    out = spec.clone()
    out.shape = shape
    return out


class CatTensors(Transform):
    """Concatenates `in_keys` along `dim` into `out_key`, deleting the inputs unless `del_keys=False`.

    The inputs are sorted by name first (`sort=False` keeps the given order). Without `in_keys`
    every observation with one feature dim is concatenated (found in the env's observation spec,
    only with `dim=-1`). `unsqueeze_if_oor=True` first unsqueezes inputs that lack `dim`.

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
        in_keys: Sequence[NestedKey] | None = None,
        out_key: NestedKey = "observation_vector",
        dim: int = -1,
        *,
        del_keys: bool = True,
        unsqueeze_if_oor: bool = False,
        sort: bool = True,
    ) -> None:
        if not isinstance(out_key, (str, tuple)):
            raise TypeError(CAT_OUT_KEY_ERROR.format(type=type(out_key).__name__))
        self._initialized = in_keys is not None
        if in_keys is None:
            if dim != -1:
                raise ValueError(CAT_LAZY_DIM_ERROR.format(dim=dim))
        else:
            in_keys = [unravel_key(k) for k in in_keys]
            if sort:
                in_keys = sorted(in_keys, key=_sort_key)
        super().__init__(in_keys=in_keys, out_keys=[out_key])
        self.dim = dim
        self.del_keys = del_keys
        self.unsqueeze_if_oor = unsqueeze_if_oor

    @property
    def keys_to_exclude(self) -> list[NestedKey]:
        """The inputs deleted after concatenation (none unless `del_keys`)."""
        if not self.del_keys:
            return []
        return [k for k in self.in_keys if k != self.out_keys[0]]

    def _find_in_keys(self, observation_spec: Composite) -> None:
        """Every observation with exactly one dim after the batch dims, sorted."""
        batch_ndim = len(observation_spec.shape)
        keys = [
            key
            for key, leaf in observation_spec.items(True, True)
            if len(leaf.shape) - batch_ndim == 1
        ]
        self.in_keys = sorted(keys, key=_sort_key)
        self._initialized = True

    def _cat(self, values: list[torch.Tensor]) -> torch.Tensor:
        if self.unsqueeze_if_oor:
            dim = self.dim
            values = [
                v if (dim if dim >= 0 else -dim - 1) < v.ndim else v.unsqueeze(0 if dim < 0 else -1)
                for v in values
            ]
        return torch.cat(values, self.dim)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if not self._initialized:
            parent = self.parent
            if parent is None:
                raise RuntimeError(CAT_NO_KEYS_ERROR)
            self._find_in_keys(parent.observation_spec)
        values = [_get(next_tensordict, key) for key in self.in_keys]
        if any(value is None for value in values):
            if self._missing_tolerance:
                return next_tensordict
            missing = [k for k, v in zip(self.in_keys, values) if v is None]
            raise KeyError(
                MISSING_KEY_ERROR.format(
                    cls="CatTensors",
                    key=missing[0] if len(missing) == 1 else missing,
                    keys=sorted(map(str, next_tensordict.keys(True))),
                )
            )
        # inputs go first: the output may replace a tensordict holding some of them
        excluded = self.keys_to_exclude
        if excluded:
            next_tensordict.exclude(*excluded, inplace=True)
        next_tensordict.set(self.out_keys[0], self._cat(values))
        return next_tensordict

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if not self._initialized and isinstance(observation_spec, Composite):
            self._find_in_keys(observation_spec)
        if not isinstance(observation_spec, Composite):
            if len(self.in_keys) > 1:
                raise ValueError(CAT_ONE_SPEC_ERROR.format(keys=self.in_keys))
            return observation_spec  # one input: the concatenation is the input itself
        known = _spec_keys(observation_spec)
        missing = [k for k in self.in_keys if k not in known]
        if missing:
            raise ValueError(
                CAT_MISSING_SPEC_ERROR.format(keys=missing, known=sorted(map(str, known)))
            )
        if not self.in_keys:
            return observation_spec
        specs = [observation_spec[key] for key in self.in_keys]
        shape = self._cat([torch.empty(spec.shape, device="meta") for spec in specs]).shape
        observation_spec[self.out_keys[0]] = Unbounded(
            shape=shape, dtype=specs[0].dtype, device=specs[0].device
        )
        for key in self.keys_to_exclude:
            del observation_spec[key]
        return observation_spec

    def __repr__(self) -> str:
        return f"CatTensors(in_keys={self.in_keys}, out_key={self.out_keys[0]!r}, dim={self.dim})"


class _PositiveDimError(RuntimeError, ValueError):
    """A non-negative dim without `allow_positive_dim` (torchrl 0.4 raises RuntimeError for the
    (un)squeeze transforms and ValueError for FlattenObservation: both catch this)."""


class _FeatureDims(Transform):
    """Shared by the layout transforms: dims counted from the end, or after the env batch dims."""

    _call_on_reset = True

    def _check_dim(self, arg: str, value: int, allow_positive_dim: bool) -> None:
        if value >= 0 and not allow_positive_dim:
            raise _PositiveDimError(
                POSITIVE_DIM_ERROR.format(cls=type(self).__name__, arg=arg, value=value)
            )

    def _feature_dim(self, dim: int) -> int:
        """`dim` as torchrl 0.4 reads it: a non-negative dim counts after the parent env's batch
        dims (for its specs and its data alike); without env it is used as given, counted from
        the first dim of each tensor whatever the tensordict's batch size."""
        if dim < 0:
            return dim
        parent = self.parent
        return dim if parent is None else len(parent.batch_size) + dim

    def _spec(self, spec: TensorSpec) -> TensorSpec:
        return _layout_spec(spec, self._apply_transform)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._map_specs(observation_spec, self.in_keys, self.out_keys, self._spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        if not isinstance(reward_spec, Composite):
            return reward_spec  # a lone reward spec is only transformed through a Composite
        return self._map_specs(reward_spec, self.in_keys, self.out_keys, self._spec)

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        # the outside sends what the forward map gives; the inverse undoes it for the base env
        return self._map_input_specs(input_spec, self._spec)


class FlattenObservation(_FeatureDims):
    """Flattens the dims `first_dim` to `last_dim` (negative, i.e. counted from the end) of `in_keys`.

    `allow_positive_dim=True` accepts non-negative dims, read as torchrl 0.4 does: in an env
    they count after the env's batch dims (specs and data alike); without env they are used as
    given, from the first dim of each tensor, whatever the tensordict's batch size.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(pixels=torch.zeros(3, 4, 5))
        >>> FlattenObservation(-2, -1)(td)["pixels"].shape
        torch.Size([3, 20])
    """

    def __init__(
        self,
        first_dim: int,
        last_dim: int,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        allow_positive_dim: bool = False,
    ) -> None:
        super().__init__(in_keys=["pixels"] if in_keys is None else in_keys, out_keys=out_keys)
        self._check_dim("first_dim", first_dim, allow_positive_dim)
        self._check_dim("last_dim", last_dim, allow_positive_dim)
        self._first_dim = first_dim
        self._last_dim = last_dim

    @property
    def first_dim(self) -> int:
        """The first flattened dim."""
        return self._feature_dim(self._first_dim)

    @property
    def last_dim(self) -> int:
        """The last flattened dim."""
        return self._feature_dim(self._last_dim)

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        return torch.flatten(observation, self.first_dim, self.last_dim)

    def __repr__(self) -> str:
        return (
            f"FlattenObservation(first_dim={self.first_dim}, last_dim={self.last_dim}, "
            f"in_keys={self.in_keys}, out_keys={self.out_keys})"
        )


class UnsqueezeTransform(_FeatureDims):
    """Inserts a dim of size one at `unsqueeze_dim` in `in_keys`; squeezes it back in `in_keys_inv`.

    The dim is given as `unsqueeze_dim` (torchrl 0.4) or `dim` (later releases). It must be
    negative unless `allow_positive_dim=True`. A positive dim is read as torchrl 0.4 does: in an
    env it counts after the env's batch dims (`unsqueeze_dim` then reports
    `len(env.batch_size) + dim`, for the specs and the data alike); without env it is used as
    given, from the first dim of each tensor, whatever the tensordict's batch size. With
    `in_keys_inv`, the outside sends the unsqueezed entry and the base env gets it squeezed.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> UnsqueezeTransform(-1, in_keys=["obs"])(TensorDict(obs=torch.zeros(3)))["obs"].shape
        torch.Size([3, 1])
        >>> t = UnsqueezeTransform(1, allow_positive_dim=True, in_keys=["obs"])
        >>> t(TensorDict(obs=torch.zeros(2, 3, 4), batch_size=[2]))["obs"].shape  # no env
        torch.Size([2, 1, 3, 4])
    """

    invertible = True

    def __init__(
        self,
        unsqueeze_dim: int | None = None,
        allow_positive_dim: bool = False,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        *,
        dim: int | None = None,
    ) -> None:
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        unsqueeze_dim = _one_dim(type(self).__name__, self._dim_name, unsqueeze_dim, dim)
        self.allow_positive_dim = allow_positive_dim
        self._check_dim(self._dim_name, unsqueeze_dim, allow_positive_dim)
        self._unsqueeze_dim = unsqueeze_dim

    _dim_name = "unsqueeze_dim"

    @property
    def unsqueeze_dim(self) -> int:
        """The inserted dim."""
        return self._feature_dim(self._unsqueeze_dim)

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        return observation.unsqueeze(self.unsqueeze_dim)

    def _inv_apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        return observation.squeeze(self.unsqueeze_dim)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({self._dim_name}={self._feature_dim(self._unsqueeze_dim)}, "
            f"in_keys={self.in_keys}, out_keys={self.out_keys}, in_keys_inv={self.in_keys_inv}, "
            f"out_keys_inv={self.out_keys_inv})"
        )


class SqueezeTransform(UnsqueezeTransform):
    """Removes the dim of size one at `squeeze_dim` from `in_keys`; puts it back in `in_keys_inv`.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> SqueezeTransform(-1, in_keys=["obs"])(TensorDict(obs=torch.zeros(3, 1)))["obs"].shape
        torch.Size([3])
    """

    _dim_name = "squeeze_dim"

    def __init__(
        self,
        squeeze_dim: int | None = None,
        allow_positive_dim: bool = False,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        *,
        dim: int | None = None,
    ) -> None:
        super().__init__(
            squeeze_dim,
            allow_positive_dim,
            in_keys=in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
            dim=dim,
        )

    @property
    def squeeze_dim(self) -> int:
        """The removed dim."""
        return self.unsqueeze_dim

    _apply_transform = UnsqueezeTransform._inv_apply_transform
    _inv_apply_transform = UnsqueezeTransform._apply_transform


class PermuteTransform(_FeatureDims):
    """Permutes the trailing dims of `in_keys` (`dims` reorders `[-len(dims), ..., -1]`).

    With `in_keys_inv`, the outside sends permuted entries and the base env gets them in its
    own order.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = PermuteTransform((-1, -3, -2), in_keys=["pixels"])  # channels last -> first
        >>> t(TensorDict(pixels=torch.zeros(4, 5, 3)))["pixels"].shape
        torch.Size([3, 4, 5])
    """

    def __init__(
        self,
        dims: Sequence[int],
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        dims = list(dims)
        if sorted(dims) != list(range(-len(dims), 0)):
            raise ValueError(PERMUTE_DIMS_ERROR.format(n=len(dims), dims=dims))
        self.dims = dims
        # the inverse permutation, in the same negative convention
        inverse = [0] * len(dims)
        for position, dim in enumerate(dims):
            inverse[dim + len(dims)] = position - len(dims)
        self._inverse_dims = inverse

    def _permute(self, tensor: torch.Tensor, dims: list[int]) -> torch.Tensor:
        lead = tensor.ndim - len(dims)
        return tensor.permute(*range(lead), *(lead + len(dims) + d for d in dims))

    def _apply_transform(self, observation: torch.Tensor) -> torch.Tensor:
        return self._permute(observation, self.dims)

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        return self._permute(state, self._inverse_dims)

    def __repr__(self) -> str:
        return (
            f"PermuteTransform(dims={self.dims}, in_keys={self.in_keys}, "
            f"in_keys_inv={self.in_keys_inv})"
        )

"""`ActionScaling`: a normalised action space ([-1, 1] or [0, 1]) over the env's bounds."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Bounded, Composite, ContinuousBox, TensorSpec, Unbounded

from ._base import Transform

__all__ = ["ActionScaling"]

SINGLE_KEY_ERROR = (
    "ActionScaling only supports a single action key per instance. "
    "Compose several ActionScaling transforms to scale multiple actions."
)
LOC_SCALE_PAIR_ERROR = "loc and scale must either both be provided or both be None."
FORWARD_ONLY_ERROR = (
    "in_keys_inv=[] (forward-only mode) requires explicit loc and "
    "scale: without an inverse action key there is no action spec "
    "to derive them from."
)
ZERO_SCALE_ERROR = "scale must not contain zero entries (would cause division by zero)."
NOT_INITIALIZED_ERROR = (
    "ActionScaling has not been initialized: pass explicit ``loc`` "
    "and ``scale`` to the constructor, or attach this transform to "
    "a TransformedEnv whose action spec is bounded so that the "
    "values can be derived automatically."
)
NOT_CONTINUOUS_ERROR = (
    "ActionScaling requires a bounded continuous action spec, got {cls} with space {space}. "
    "Unbounded or discrete action specs are not supported."
)
EXPLICIT_NOT_CONTINUOUS_ERROR = (
    "ActionScaling requires a continuous action spec, got {cls}. "
    "Discrete action specs are not supported."
)
UNBOUNDED_ERROR = (
    "ActionScaling cannot be used with an Unbounded action spec. "
    "The action spec must be fully bounded for spec-based normalization."
)
PARTLY_UNBOUNDED_ERROR = (
    "ActionScaling requires fully bounded actions: at least one "
    "entry of the action spec is unbounded (low equals finfo.min or "
    "high equals finfo.max)."
)
NON_FINITE_ERROR = (
    "ActionScaling requires fully bounded actions: every entry of the "
    "action spec must have a finite lower and upper bound. Got "
    "non-finite values in low or high."
)
EMPTY_RANGE_ERROR = (
    "ActionScaling requires high > low for every entry of the action "
    "spec. Got entries with high <= low."
)
DIM_ERROR = "action shape {shape} does not match the loc/scale dimension {dim} on its last dim."
STATS_PAIR_ERROR = "{a} and {b} must be provided together."
STATS_ONE_ERROR = "Provide exactly one of (mean, std) or (low, high)."
STATS_SHAPE_ERROR = "loc and scale must have the same shape, got {loc} and {scale}."


def _as_list(keys: Sequence[NestedKey] | NestedKey | None) -> list[NestedKey] | None:
    if keys is None:
        return None
    return [keys] if isinstance(keys, (str, tuple)) else list(keys)


def _finitely_bounded(spec: TensorSpec) -> bool:
    """Whether every bound of `spec` is finite (`Unbounded` marks open sides with finfo extremes)."""
    if isinstance(spec, Unbounded):
        return False
    low, high = spec.space.low, spec.space.high
    if low.dtype.is_floating_point and (
        (low == torch.finfo(low.dtype).min).any() or (high == torch.finfo(high.dtype).max).any()
    ):
        return False
    return bool(torch.isfinite(low).all() and torch.isfinite(high).all())


class ActionScaling(Transform):
    r"""Exposes a bounded action as a normalised one, rescaled to the env's bounds on the way in.

    With `loc = (high + low) / 2` and `scale = (high - low) / 2` read from the env's action
    spec, the policy acts in [-1, 1] (`standard_normal=True`, default) or [0, 1], and the env
    gets `action * scale + loc` (for [0, 1]: `(2 * action - 1) * scale + loc`). Outside an env
    (`t(td)`, a replay-buffer sample), the forward map normalises env-scale actions.

    With explicit `loc` and `scale` (or `from_stats`) nothing is read from the spec: a bounded
    action spec is mapped through the affine map, an unbounded one stays unbounded. With
    `in_keys_inv=[]` the transform is forward-only (the env's action is left as is).

    Args:
        in_keys_inv: the env's action key (default `["action"]`; one key per instance).
        out_keys_inv: the key the policy writes (default: `in_keys_inv`).
        in_keys: keys normalised by the forward map (default: `in_keys_inv`, or `["action"]`).
        out_keys: where the forward map writes them (default: `in_keys`).
        loc: explicit location (give `scale` too).
        scale: explicit scale (no zero entry).
        standard_normal: [-1, 1] (True, default) or [0, 1] (False).

    Raises:
        RuntimeError: spec-derived bounds that are not all finite, or `high <= low`.

    Examples:
        >>> import torch
        >>> from rlmocks import ContinuousActionVecMockEnv
        >>> from rlspecs import Bounded
        >>> from rltransforms import TransformedEnv
        >>> base = ContinuousActionVecMockEnv(action_spec=Bounded(-2.0, 4.0, (7,)))
        >>> env = TransformedEnv(base, ActionScaling())
        >>> env.action_spec.space.low[:2], env.action_spec.space.high[:2]
        (tensor([-1., -1.]), tensor([1., 1.]))
        >>> env.transform.denormalize(torch.ones(7))[:2]
        tensor([4., 4.])
        >>> from tensordict import TensorDict
        >>> t = ActionScaling.from_stats(mean=torch.tensor([1.0, 2.0]), std=torch.tensor([2.0, 4.0]))
        >>> t(TensorDict(action=torch.tensor([[3.0, 6.0]]), batch_size=[1]))["action"]
        tensor([[1., 1.]])
    """

    invertible = True

    def __init__(
        self,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        *,
        loc: torch.Tensor | float | None = None,
        scale: torch.Tensor | float | None = None,
        standard_normal: bool = True,
    ) -> None:
        in_keys_inv = ["action"] if in_keys_inv is None else _as_list(in_keys_inv)
        if len(in_keys_inv) > 1:
            raise ValueError(SINGLE_KEY_ERROR)
        out_keys_inv = list(in_keys_inv) if out_keys_inv is None else _as_list(out_keys_inv)
        if in_keys is None:
            in_keys = list(in_keys_inv) if in_keys_inv else ["action"]
        super().__init__(
            in_keys=in_keys, out_keys=out_keys, in_keys_inv=in_keys_inv, out_keys_inv=out_keys_inv
        )
        self.standard_normal = bool(standard_normal)
        if (loc is None) != (scale is None):
            raise ValueError(LOC_SCALE_PAIR_ERROR)
        self._explicit = loc is not None
        if not in_keys_inv and not self._explicit:
            raise ValueError(FORWARD_ONLY_ERROR)
        if loc is not None:
            loc, scale = torch.as_tensor(loc), torch.as_tensor(scale)
            if not loc.dtype.is_floating_point:
                loc = loc.to(torch.get_default_dtype())
            if not scale.dtype.is_floating_point:
                scale = scale.to(torch.get_default_dtype())
            if (scale == 0).any():
                raise ValueError(ZERO_SCALE_ERROR)
        self.register_buffer("loc", loc)
        self.register_buffer("scale", scale)

    @property
    def initialized(self) -> bool:
        """Whether `loc` and `scale` are known (given, or read from an env's action spec)."""
        return self.loc is not None

    # ------------------------------------------------------------------ statistics
    @staticmethod
    def _validate_bounded(spec: TensorSpec) -> tuple[torch.Tensor, torch.Tensor]:
        space = getattr(spec, "space", None)
        if not isinstance(space, ContinuousBox):
            space_name = type(space).__name__ if space is not None else None
            raise RuntimeError(
                NOT_CONTINUOUS_ERROR.format(cls=type(spec).__name__, space=space_name)
            )
        if isinstance(spec, Unbounded):
            raise RuntimeError(UNBOUNDED_ERROR)
        low, high = space.low, space.high
        if low.dtype.is_floating_point and (
            (low == torch.finfo(low.dtype).min).any() or (high == torch.finfo(high.dtype).max).any()
        ):
            raise RuntimeError(PARTLY_UNBOUNDED_ERROR)
        if not torch.isfinite(low).all() or not torch.isfinite(high).all():
            raise RuntimeError(NON_FINITE_ERROR)
        if (high <= low).any():
            raise RuntimeError(EMPTY_RANGE_ERROR)
        return low, high

    def _init_from_spec(self, spec: TensorSpec) -> None:
        low, high = self._validate_bounded(spec)
        dtype = low.dtype if low.dtype.is_floating_point else torch.get_default_dtype()
        self.loc = ((high + low) / 2).to(dtype)
        self.scale = ((high - low) / 2).to(dtype)

    def _ensure_initialized(self) -> None:
        if self.initialized:
            return
        container = self.container
        if container is not None:
            container.input_spec  # noqa: B018  (building the specs reads the bounds)
        if not self.initialized:
            raise RuntimeError(NOT_INITIALIZED_ERROR)

    def _loc_scale(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        loc, scale = self.loc, self.scale
        if loc.device != device:
            loc, scale = loc.to(device), scale.to(device)
        return loc, scale

    # ------------------------------------------------------------------ specs
    def _transform_leaf(self, spec: TensorSpec) -> TensorSpec:
        dtype = spec.dtype if spec.dtype.is_floating_point else torch.get_default_dtype()
        if self._explicit:
            space = getattr(spec, "space", None)
            if not isinstance(space, ContinuousBox):
                raise RuntimeError(EXPLICIT_NOT_CONTINUOUS_ERROR.format(cls=type(spec).__name__))
            if not _finitely_bounded(spec):
                return Unbounded(shape=spec.shape, device=spec.device, dtype=spec.dtype)
            loc, scale = self._loc_scale(space.low.device)
            low = (space.low.to(dtype) - loc) / scale
            high = (space.high.to(dtype) - loc) / scale
            if not self.standard_normal:
                low, high = (low + 1) / 2, (high + 1) / 2
        else:
            if not self.initialized:
                self._init_from_spec(spec)
            else:
                self._validate_bounded(spec)
            low = spec.space.low.to(dtype)
            high = spec.space.high.to(dtype)
            if self.standard_normal:
                low, high = torch.full_like(low, -1.0), torch.full_like(high, 1.0)
            else:
                low, high = torch.zeros_like(low), torch.ones_like(high)
        return Bounded(low=low, high=high, shape=spec.shape, device=spec.device, dtype=spec.dtype)

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        if not self.in_keys_inv:
            return action_spec  # forward-only: the env's action is untouched
        if not isinstance(action_spec, Composite):
            return self._transform_leaf(action_spec)
        in_key = unravel_key(self.in_keys_inv[0])
        out_key = unravel_key(self.out_keys_inv[0])
        if in_key in {unravel_key(k) for k in action_spec.keys(True, True)}:
            action_spec[out_key] = self._transform_leaf(action_spec[in_key])
            if in_key != out_key:
                del action_spec[in_key]
        return action_spec

    # ------------------------------------------------------------------ data path
    def _check_dim(self, action: torch.Tensor) -> None:
        if self.loc.numel() > 1 and (action.ndim == 0 or action.shape[-1] != self.loc.shape[-1]):
            raise ValueError(DIM_ERROR.format(shape=tuple(action.shape), dim=self.loc.shape[-1]))

    def _apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        self._ensure_initialized()
        self._check_dim(action)
        loc, scale = self._loc_scale(action.device)
        normalized = (action - loc) / scale
        return normalized if self.standard_normal else (normalized + 1) / 2

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        self._ensure_initialized()
        self._check_dim(action)
        loc, scale = self._loc_scale(action.device)
        if not self.standard_normal:
            action = action * 2 - 1
        return action * scale + loc

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        # the action only travels towards the env; a step's output holds none
        return next_tensordict

    def normalize(self, action: torch.Tensor) -> torch.Tensor:
        """Map an env-scale action to the normalised space (the forward map)."""
        return self._apply_transform(action)

    def denormalize(self, action: torch.Tensor) -> torch.Tensor:
        """Map a normalised action back to the env's scale (the inverse map)."""
        return self._inv_apply_transform(action)

    @classmethod
    def from_stats(
        cls,
        *,
        mean: torch.Tensor | None = None,
        std: torch.Tensor | None = None,
        low: torch.Tensor | None = None,
        high: torch.Tensor | None = None,
        eps: float = 1e-6,
        **kwargs,
    ) -> ActionScaling:
        """An `ActionScaling` from dataset statistics: `mean` and `std`, or `low` and `high`.

        The scale is floored at `eps`; `kwargs` go to the constructor (`in_keys_inv`, ...).

        Examples:
            >>> t = ActionScaling.from_stats(low=torch.tensor([0.0]), high=torch.tensor([4.0]))
            >>> t.loc, t.scale
            (tensor([2.]), tensor([2.]))
        """
        if (mean is None) != (std is None):
            raise ValueError(STATS_PAIR_ERROR.format(a="mean", b="std"))
        if (low is None) != (high is None):
            raise ValueError(STATS_PAIR_ERROR.format(a="low", b="high"))
        if (mean is not None) == (low is not None):
            raise ValueError(STATS_ONE_ERROR)
        dtype = torch.get_default_dtype()
        if mean is not None:
            loc = torch.as_tensor(mean, dtype=dtype)
            scale = torch.as_tensor(std, dtype=dtype)
        else:
            low = torch.as_tensor(low, dtype=dtype)
            high = torch.as_tensor(high, dtype=dtype)
            loc, scale = (low + high) / 2, (high - low) / 2
        if loc.shape != scale.shape:
            raise ValueError(
                STATS_SHAPE_ERROR.format(loc=tuple(loc.shape), scale=tuple(scale.shape))
            )
        return cls(loc=loc, scale=scale.clamp_min(eps), **kwargs)

    def __repr__(self) -> str:
        loc = self.loc if self.initialized else "<uninitialized>"
        scale = self.scale if self.initialized else "<uninitialized>"
        return (
            f"{type(self).__name__}(loc={loc}, scale={scale}, "
            f"standard_normal={self.standard_normal}, in_keys_inv={self.in_keys_inv})"
        )

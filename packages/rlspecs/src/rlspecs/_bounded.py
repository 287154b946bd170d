"""``Bounded``: values in a box ``[low, high]``."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from ._api import is_current
from ._base import (
    NO_ENUMERATE,
    DeviceLike,
    ShapeLike,
    TensorSpec,
    _is_floating,
    parse_shape,
    spec_class,
)
from ._spaces import ContinuousBox
from .errors import SpecShapeError

BOUNDS_MISSING = "Bounded needs both bounds: pass low/high (or minimum/maximum)"
BOUNDS_TWICE = "Bounded got both {new}= and {old}=; pass only one"
BOUNDS_KWARG = "Bounded got an unexpected keyword argument {key!r}"
BOUNDS_SHAPE = (
    "Bounded bounds of shapes low={low} and high={high} do not broadcast to shape {shape}"
)
BOUNDS_ORDER = "Bounded needs low <= high everywhere, got low={low} and high={high}"
BOUNDS_ND_SHAPE = (
    "Bounded requires the shape to be explicitly (via the shape argument) or implicitly defined "
    "(via either the minimum or the maximum or both). If the maximum and/or the minimum have a "
    "non-singleton shape, they must match the provided shape if this one is set explicitly: got "
    "{name} of shape {got} for shape {shape}."
)
BOUNDS_REMOVED = "'{old}' has been removed. Please use '{new}' instead."
IS_IN_SHAPE = (
    "Got a shape mismatch: a value of shape {got} does not broadcast with the shape {shape} of "
    "this {cls}"
)
UNBIND_LAST = (
    "Final dimension of {cls} must remain unchanged: cannot unbind dim {dim} of shape {shape} "
    "(unbind a leading dim instead)"
)
UNBIND_RANGE = "Cannot unbind along dim {dim} with shape {shape}."
NO_INDEX = (
    "Indexing not implemented for Bounded: only one-hot and categorical specs index tensors "
    "with their values"
)


class Bounded(TensorSpec):
    """A tensor whose values lie in ``[low, high]`` (elementwise; bounds are scalars or tensors).

    ``minimum``/``maximum`` are accepted for ``low``/``high`` as in torchrl 0.4 (current
    torchrl's ``TypeError`` under ``set_spec_api("current")``), and ``domain=`` as in torchrl.
    The shape defaults to the broadcast shape of the bounds; with an explicit shape, a bound
    that is not a scalar must have exactly that shape (``SpecShapeError``, a ``RuntimeError``
    as in torchrl). Integer dtypes sample integers with ``high`` included. A ``Bounded`` whose
    bounds span its dtype's whole range equals the ``Unbounded`` of that dtype, as in torchrl.
    ``space`` is the box of the bounds: setting ``spec.space.low`` sets ``spec.low``.

    Cardinality is infinite; ``enumerate`` raises. ``unbind(-1)`` raises, as in torchrl.

    Examples:
        >>> spec = Bounded(-1.0, 1.0, shape=(2,))
        >>> spec.is_in(spec.rand())
        True
        >>> spec.project(torch.tensor([3.0, -5.0]))
        tensor([ 1., -1.])
    """

    _tensor_attrs = ("low", "high")
    _nested_list_index = False  # torchrl refuses nested-list indices on Bounded

    def __init__(
        self,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = None,
        **kwargs: Any,
    ) -> None:
        for old, new in (("maximum", "high"), ("minimum", "low")):
            if old in kwargs and is_current():
                raise TypeError(BOUNDS_REMOVED.format(old=old, new=new))
        for new, old in (("low", "minimum"), ("high", "maximum")):
            if old in kwargs:
                if (low if new == "low" else high) is not None:
                    raise TypeError(BOUNDS_TWICE.format(new=new, old=old))
                if new == "low":
                    low = kwargs.pop(old)
                else:
                    high = kwargs.pop(old)
        domain = kwargs.pop("domain", None)
        if kwargs:
            raise TypeError(BOUNDS_KWARG.format(key=next(iter(kwargs))))
        if low is None or high is None:
            raise TypeError(BOUNDS_MISSING)
        if dtype is None:
            dtype = torch.get_default_dtype()
        super().__init__(shape, device, dtype)
        low_t = torch.as_tensor(low, device=self.device).to(dtype)
        high_t = torch.as_tensor(high, device=self.device).to(dtype)
        if shape is None:
            try:
                self.shape = torch.broadcast_shapes(low_t.shape, high_t.shape)
            except RuntimeError as err:
                raise SpecShapeError(
                    BOUNDS_SHAPE.format(low=low_t.shape, high=high_t.shape, shape=None)
                ) from err
        else:
            self.shape = parse_shape(shape)
            # as torchrl: the bound that fixes the shape (high, or low when high is a scalar)
            name, ref = ("high", high_t) if high_t.ndim else ("low", low_t)
            if ref.ndim and ref.shape != self.shape:
                raise SpecShapeError(
                    BOUNDS_ND_SHAPE.format(name=name, got=tuple(ref.shape), shape=tuple(self.shape))
                )
        try:
            self.low = low_t.expand(self.shape).clone()
            self.high = high_t.expand(self.shape).clone()
        except RuntimeError as err:
            raise SpecShapeError(
                BOUNDS_SHAPE.format(low=low_t.shape, high=high_t.shape, shape=self.shape)
            ) from err
        if (self.low > self.high).any():
            raise ValueError(BOUNDS_ORDER.format(low=low_t, high=high_t))
        if domain is not None:
            self.domain = domain

    @property
    def low(self) -> torch.Tensor:
        """Lower bound, with the spec's full shape."""
        return self._low

    @low.setter
    def low(self, value: torch.Tensor) -> None:
        self._low = value
        self._cache = None

    @property
    def high(self) -> torch.Tensor:
        """Upper bound, with the spec's full shape."""
        return self._high

    @high.setter
    def high(self, value: torch.Tensor) -> None:
        self._high = value
        self._cache = None

    def _sampling(self) -> tuple[torch.Tensor | None, bool, tuple[float, float] | None]:
        """``(high - low for floats, bounds finite, (low, high) when every entry shares them)``.

        Cached until a bound is reassigned.
        """
        if self._cache is None:
            low, high = self._low, self._high
            finite = bool(torch.isfinite(low).all() and torch.isfinite(high).all())
            scalar = None
            if finite and low.numel():
                lo, hi = low.reshape(-1)[0], high.reshape(-1)[0]
                if bool((low == lo).all() and (high == hi).all()):
                    scalar = (lo.item(), hi.item())
            span = high - low if _is_floating(high.dtype) else None  # only floats need it
            self._cache = (span, finite, scalar)
        return self._cache

    # seed-era names of the bounds
    @property
    def minimum(self) -> torch.Tensor:
        """Alias of ``low``."""
        return self.low

    @property
    def maximum(self) -> torch.Tensor:
        """Alias of ``high``."""
        return self.high

    def _default_space(self) -> ContinuousBox:
        """The box ``[low, high]``, tied to this spec (assigning its bounds sets the spec's)."""
        return ContinuousBox(self.low, self.high, owner=self)

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Not defined for a box (``NotImplementedError``, as in torchrl)."""
        raise NotImplementedError(NO_INDEX)

    def enumerate(self, use_mask: bool = False) -> Any:
        """Not defined for a box (``NotImplementedError``, as in current torchrl)."""
        raise NotImplementedError(NO_ENUMERATE.format(cls=type(self).__name__))

    def cardinality(self) -> float:
        """``inf``: a box holds infinitely many values (as in current torchrl)."""
        return float("inf")

    def is_in(self, val: Any) -> bool:
        """Whether ``val`` has the spec's dtype and trailing shape and lies in ``[low, high]``.

        A tensor whose shape does not broadcast with the spec's gives ``False`` with a
        ``UserWarning`` (torchrl 0.4), or raises ``SpecShapeError`` (a ``RuntimeError``) under
        ``set_spec_api("current")``.
        """
        if isinstance(val, torch.Tensor):
            try:
                torch.broadcast_shapes(val.shape, self.shape)
            except RuntimeError as err:
                message = IS_IN_SHAPE.format(
                    got=tuple(val.shape), shape=tuple(self.shape), cls=type(self).__name__
                )
                if is_current():
                    raise SpecShapeError(message) from err
                warnings.warn(message, UserWarning, stacklevel=2)
                return False
        return super().is_in(val)

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """Split along ``dim``; as in torchrl, ``-1`` (and ``ndim``) raise ``ValueError``."""
        cls, shape = type(self).__name__, tuple(self.shape)
        if dim in (self.ndim, -1):
            raise ValueError(UNBIND_LAST.format(cls=cls, dim=dim, shape=shape))
        if dim < -self.ndim:
            raise ValueError(UNBIND_RANGE.format(dim=dim, shape=shape))
        return super().unbind(dim)

    def __eq__(self, other: object) -> bool:
        # an assigned space replaces the bounds in the comparison, as torchrl compares spaces
        if type(other) is type(self) and ("_space" in self.__dict__ or "_space" in other.__dict__):
            return (
                self.shape == other.shape
                and self.dtype == other.dtype
                and self.device == other.device
                and self.space == other.space
            )
        return super().__eq__(other)

    def _cast_attrs(self, dtype: torch.dtype) -> dict[str, Any]:
        return {"low": self.low.to(dtype), "high": self.high.to(dtype)}

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample uniformly in ``[low, high]`` (integers: ``high`` included).

        Values are drawn in place (``uniform_``, or ``random_`` for integers with bounds shared
        by every entry) into one new tensor: float bounds shared by every entry take one more
        in-place clamp (rounding, in float16 above all, could step past
        ``high``), per-entry bounds one in-place ``lerp`` (whose formula cannot leave
        ``[low, high]``).
        """
        full = self._full_shape(shape)
        if _is_floating(self.dtype):
            span, finite, scalar = self._sampling()
            out = torch.empty(full, dtype=self.dtype, device=self.device)
            if scalar is not None:
                return out.uniform_(*scalar).clamp_(max=scalar[1])
            if finite:
                return torch.lerp(self._low, self._high, out.uniform_(), out=out)
            # infinite bounds: fall back to normal samples clamped into the box
            out.uniform_().mul_(span).add_(self._low)
            normal = torch.randn(full, dtype=self.dtype, device=self.device)
            return torch.where(torch.isfinite(out), out, normal.clamp(self._low, self._high))
        low, high = self._low, self._high
        _, _, scalar = self._sampling()
        if scalar is not None and (
            self.dtype == torch.bool or scalar[1] < torch.iinfo(self.dtype).max
        ):
            out = torch.empty(full, dtype=self.dtype, device=self.device)
            return out.random_(int(scalar[0]), int(scalar[1]) + 1)
        r = torch.rand(full, dtype=torch.float64, device=self.device)
        low_d, high_d = low.to(torch.float64), high.to(torch.float64)
        out = (low_d + r * (high_d - low_d + 1)).floor().to(self.dtype)
        return torch.minimum(out, high)

    def _in_domain(self, val: torch.Tensor) -> bool:
        return bool(((val >= self.low) & (val <= self.high)).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if not _is_floating(self.dtype) and _is_floating(val.dtype):
            val = val.round()
        val = val.to(self.dtype)
        return torch.maximum(torch.minimum(val, self.high), self.low)

    def _eq_other_class(self, other: object) -> bool:
        return isinstance(other, spec_class("Unbounded")) and other._eq_other_class(self)

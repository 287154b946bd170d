"""``Bounded``: values in a box ``[low, high]``."""

from __future__ import annotations

from typing import Any

import torch

from ._base import DeviceLike, ShapeLike, TensorSpec, _is_floating, parse_shape
from ._spaces import ContinuousBox

BOUNDS_MISSING = "Bounded needs both bounds: pass low/high (or minimum/maximum)"
BOUNDS_TWICE = "Bounded got both {new}= and {old}=; pass only one"
BOUNDS_KWARG = "Bounded got an unexpected keyword argument {key!r}"
BOUNDS_SHAPE = (
    "Bounded bounds of shapes low={low} and high={high} do not broadcast to shape {shape}"
)
BOUNDS_ORDER = "Bounded needs low <= high everywhere, got low={low} and high={high}"


class Bounded(TensorSpec):
    """A tensor whose values lie in ``[low, high]`` (elementwise; bounds are scalars or tensors).

    ``minimum``/``maximum`` are accepted for ``low``/``high`` (and ``domain=`` as in torchrl).
    The shape defaults to the broadcast shape of the bounds. Integer dtypes sample integers
    with ``high`` included. A ``Bounded`` whose bounds span its dtype's whole range equals the
    ``Unbounded`` of that dtype, as in torchrl 0.4.

    Examples:
        >>> spec = Bounded(-1.0, 1.0, shape=(2,))
        >>> spec.is_in(spec.rand())
        True
        >>> spec.project(torch.tensor([3.0, -5.0]))
        tensor([ 1., -1.])
    """

    _tensor_attrs = ("low", "high")

    def __init__(
        self,
        low: float | torch.Tensor | None = None,
        high: float | torch.Tensor | None = None,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = None,
        **kwargs: Any,
    ) -> None:
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
                raise ValueError(
                    BOUNDS_SHAPE.format(low=low_t.shape, high=high_t.shape, shape=None)
                ) from err
        else:
            self.shape = parse_shape(shape)
        try:
            self.low = low_t.expand(self.shape).clone()
            self.high = high_t.expand(self.shape).clone()
        except RuntimeError as err:
            raise ValueError(
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
        """The box ``[low, high]``."""
        return ContinuousBox(self.low, self.high)

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
        from ._unbounded import Unbounded

        return isinstance(other, Unbounded) and other._eq_other_class(self)

    def _repr_fields(self) -> str:
        return f"low={self.low}, high={self.high}"

"""``Unbounded``: any value of a dtype (continuous for float dtypes, discrete otherwise)."""

from __future__ import annotations

from typing import Any

import torch

from ._api import is_current
from ._base import DeviceLike, ShapeLike, TensorSpec, _is_floating, spec_class
from ._spaces import ContinuousBox
from .errors import SpecShapeError

_DEFAULT_SHAPE = torch.Size((1,))


def dtype_range(dtype: torch.dtype) -> tuple[float | int | bool, float | int | bool]:
    """The smallest and largest finite values of ``dtype``.

    Examples:
        >>> dtype_range(torch.int8)
        (-128, 127)
    """
    if dtype == torch.bool:
        return False, True
    info = torch.finfo(dtype) if _is_floating(dtype) else torch.iinfo(dtype)
    return info.min, info.max


# integer samples are drawn from this range (clipped to the dtype's own range)
_INT_SAMPLE_RANGE = (-100, 100)

IS_IN_SHAPE = (
    "Shape mismatch: objects cannot be broadcast to a single shape: a value of shape {got} "
    "against an {cls} of shape {shape}"
)
NO_CARDINALITY = "`cardinality` is not implemented for Unbounded specs."
NO_INDEX = "`index` is not implemented for Unbounded specs."
NO_ENUMERATE = "enumerate cannot be called with continuous specs."


def spans_dtype(space: Any, dtype: torch.dtype) -> bool:
    """Whether a box covers the whole range of ``dtype`` (a missing box does, as in torchrl 0.4)."""
    if space is None:
        return True
    if not isinstance(space, ContinuousBox) or space.low.dtype != dtype:
        return False
    low, high = dtype_range(dtype)
    if _is_floating(dtype):
        kw = {"dtype": dtype, "device": space.low.device}
        return bool(
            torch.isclose(space.low, torch.tensor(low, **kw)).all()
            and torch.isclose(space.high, torch.tensor(high, **kw)).all()
        )
    return bool((space.low == low).all() and (space.high == high).all())


class Unbounded(TensorSpec):
    """A tensor of any value: ``randn`` samples for float dtypes, small integers otherwise.

    ``Unbounded(3)`` has shape ``(3,)``; the default shape is ``(1,)`` and the default dtype is
    torch's default float dtype. It equals a ``Bounded`` of the same shape, dtype and device
    whose ``space`` spans the dtype's whole range (as in torchrl); ``domain=`` overrides the
    reported domain. Its ``space`` is the dtype's finite range, except for a float spec of
    shape ``(1,)``, whose box is ``[-inf, inf]`` as in torchrl 0.4 (the finite range under
    ``set_spec_api("current")``).

    ``is_in`` raises ``SpecShapeError`` (a ``RuntimeError``, as in torchrl) for a tensor whose
    shape does not broadcast with the spec's. ``cardinality``, ``enumerate`` and ``index``
    raise ``NotImplementedError``, as in current torchrl.

    Examples:
        >>> spec = Unbounded(3)
        >>> spec.rand().shape, spec.dtype
        (torch.Size([3]), torch.float32)
        >>> Unbounded((2,), dtype=torch.int64).domain
        'discrete'
    """

    def __init__(
        self,
        shape: ShapeLike | None = _DEFAULT_SHAPE,
        device: DeviceLike = None,
        dtype: torch.dtype | None = None,
        domain: str | None = None,
    ) -> None:
        super().__init__(shape, device, dtype or torch.get_default_dtype())
        if domain is not None:
            self.domain = domain

    def _default_space(self) -> ContinuousBox:
        """The dtype's full range as a box (``[-inf, inf]`` for a float ``(1,)`` spec in 0.4)."""
        low, high = dtype_range(self.dtype)
        if self.shape == _DEFAULT_SHAPE and _is_floating(self.dtype) and not is_current():
            low, high = -float("inf"), float("inf")
        kw = {"dtype": self.dtype, "device": self.device}
        return ContinuousBox(torch.full(self.shape, low, **kw), torch.full(self.shape, high, **kw))

    def _eq_other_class(self, other: object) -> bool:
        """Equal to a ``Bounded`` of the same shape, dtype and device whose space spans the dtype."""
        return (
            isinstance(other, spec_class("Bounded"))
            and other.shape == self.shape
            and other.dtype == self.dtype
            and other.device == self.device
            and spans_dtype(other.space, self.dtype)
        )

    def is_in(self, val: Any) -> bool:
        """Whether ``val`` is a tensor of the spec's dtype whose trailing dims are the spec's.

        A tensor whose shape does not broadcast with the spec's raises ``SpecShapeError`` (a
        ``RuntimeError``, as in torchrl).
        """
        if isinstance(val, torch.Tensor):
            try:
                torch.broadcast_shapes(val.shape, self.shape)
            except RuntimeError as err:
                raise SpecShapeError(
                    IS_IN_SHAPE.format(
                        got=tuple(val.shape), cls=type(self).__name__, shape=tuple(self.shape)
                    )
                ) from err
        return super().is_in(val)

    def cardinality(self) -> int:
        """Not defined for unbounded values (``NotImplementedError``, as in current torchrl)."""
        raise NotImplementedError(NO_CARDINALITY)

    def enumerate(self, use_mask: bool = False) -> Any:
        """Not defined for unbounded values (``NotImplementedError``, as in current torchrl)."""
        raise NotImplementedError(NO_ENUMERATE)

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Not defined for unbounded values (``NotImplementedError``, as in current torchrl)."""
        raise NotImplementedError(NO_INDEX)

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample standard-normal floats, or integers in a small range for integer dtypes."""
        full = self._full_shape(shape)
        dtype = self.dtype
        if _is_floating(dtype):
            return torch.randn(full, dtype=dtype, device=self.device)
        if dtype == torch.bool:
            return torch.randint(0, 2, full, dtype=torch.uint8, device=self.device).bool()
        info = torch.iinfo(dtype)
        low, high = max(_INT_SAMPLE_RANGE[0], info.min), min(_INT_SAMPLE_RANGE[1], info.max)
        return torch.randint(low, high, full, dtype=dtype, device=self.device)

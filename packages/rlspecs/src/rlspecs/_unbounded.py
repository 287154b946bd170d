"""``Unbounded``: any value of a dtype (continuous for float dtypes, discrete otherwise)."""

from __future__ import annotations

import torch

from ._base import DeviceLike, ShapeLike, TensorSpec, _is_floating
from ._spaces import ContinuousBox

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


class Unbounded(TensorSpec):
    """A tensor of any value: ``randn`` samples for float dtypes, small integers otherwise.

    ``Unbounded(3)`` has shape ``(3,)``; the default shape is ``(1,)`` and the default dtype is
    torch's default float dtype. It equals a ``Bounded`` spanning its dtype's whole range (as
    in torchrl 0.4); ``domain=`` overrides the reported domain.

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
        """The dtype's full range as a box."""
        low, high = dtype_range(self.dtype)
        kw = {"dtype": self.dtype, "device": self.device}
        return ContinuousBox(torch.full(self.shape, low, **kw), torch.full(self.shape, high, **kw))

    def _eq_other_class(self, other: object) -> bool:
        """Equal to a ``Bounded`` of the same shape, dtype and device spanning the whole dtype."""
        from ._bounded import Bounded

        if not (
            isinstance(other, Bounded)
            and other.shape == self.shape
            and other.dtype == self.dtype
            and other.device == self.device
        ):
            return False
        low, high = dtype_range(self.dtype)
        return bool((other.low == low).all() and (other.high == high).all())

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

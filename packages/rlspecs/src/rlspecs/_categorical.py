"""``Categorical`` and ``MultiCategorical``: integer labels ``0..n-1``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from ._base import DeviceLike, ShapeLike, TensorSpec, _is_floating, parse_shape
from ._spaces import BoxList, CategoricalBox

BAD_N = "{cls} needs n >= 1 categories, got n={n}"
BAD_NVEC = "{cls} needs every entry of nvec >= 1, got nvec={nvec}"
NVEC_SHAPE = "{cls} nvec of shape {nvec} does not broadcast to shape {shape}"
BINARY_NO_SIZE = "Binary needs n or shape"
BINARY_N_SHAPE = "Binary got n={n} but shape {shape}: the last dim must be n"
NVEC_NOT_UNIFORM = "{cls}.to_one_hot needs the same nvec across batch dims, got nvec={nvec}"


def _randint(n: int, shape: torch.Size, dtype: torch.dtype, device) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.randint(0, min(n, 2), shape, dtype=torch.uint8, device=device).bool()
    return torch.randint(0, n, shape, dtype=dtype, device=device)


class Categorical(TensorSpec):
    """A tensor of integer labels in ``0..n-1`` (no trailing one-hot dim).

    The default shape is ``()`` and the default dtype ``int64``; a ``bool`` dtype with ``n=2``
    describes done flags.

    Examples:
        >>> spec = Categorical(4, shape=(2,))
        >>> spec.rand().shape
        torch.Size([2])
        >>> Categorical(2, shape=(2, 1), dtype=torch.bool).zero().dtype
        torch.bool
    """

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.int64,
    ) -> None:
        n = int(n)
        if n < 1:
            raise ValueError(BAD_N.format(cls=type(self).__name__, n=n))
        super().__init__(shape, device, dtype or torch.int64)
        self.n = n

    @property
    def space(self) -> CategoricalBox:
        """The labels ``0..n-1``."""
        return CategoricalBox(self.n)

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample labels uniformly in ``0..n-1``."""
        return _randint(self.n, self._full_shape(shape), self.dtype, self.device)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype == torch.bool:
            return True
        return bool(((val >= 0) & (val < self.n)).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if _is_floating(val.dtype):
            val = val.round()
        return val.clamp(0, self.n - 1).to(self.dtype)

    def to_one_hot(self, val: torch.Tensor) -> torch.Tensor:
        """Turn labels into one-hot booleans with a trailing dim of size ``n``."""
        return F.one_hot(val.long(), self.n).bool()

    def to_one_hot_spec(self) -> TensorSpec:
        """The ``OneHot`` spec matching ``to_one_hot``'s output."""
        from ._one_hot import OneHot

        return OneHot(self.n, shape=(*self.shape, self.n), device=self.device)

    def _eq_fields(self) -> tuple:
        return (self.n,)

    def _repr_fields(self) -> str:
        return f"n={self.n}"


class MultiCategorical(TensorSpec):
    """A tensor whose last dim holds one label per entry of ``nvec`` (entry i in ``0..nvec[i]-1``).

    Examples:
        >>> spec = MultiCategorical([2, 3])
        >>> spec.shape, spec.is_in(spec.rand())
        (torch.Size([2]), True)
    """

    _tensor_attrs = ("nvec",)

    def __init__(
        self,
        nvec: Sequence[int] | torch.Tensor,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.int64,
    ) -> None:
        nvec_t = torch.as_tensor(nvec, dtype=torch.int64)
        if nvec_t.ndim == 0:
            nvec_t = nvec_t.unsqueeze(0)
        if (nvec_t < 1).any():
            raise ValueError(BAD_NVEC.format(cls=type(self).__name__, nvec=nvec_t.tolist()))
        super().__init__(nvec_t.shape if shape is None else shape, device, dtype or torch.int64)
        try:
            self.nvec = nvec_t.to(self.device).expand(self.shape).clone()
        except RuntimeError as err:
            raise ValueError(
                NVEC_SHAPE.format(cls=type(self).__name__, nvec=nvec_t.shape, shape=self.shape)
            ) from err

    @property
    def space(self) -> BoxList:
        """One ``CategoricalBox`` per entry of the last dim."""
        return BoxList(tuple(CategoricalBox(int(n)) for n in self._row()))

    def _row(self) -> list[int]:
        flat = self.nvec.reshape(-1, self.shape[-1]) if self.shape else self.nvec.reshape(1, 1)
        if flat.shape[0] and not (flat == flat[0]).all():
            raise ValueError(
                NVEC_NOT_UNIFORM.format(cls=type(self).__name__, nvec=self.nvec.tolist())
            )
        return flat[0].tolist()

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample each entry uniformly in ``0..nvec[i]-1``."""
        full = self._full_shape(shape)
        r = torch.rand(full, device=self.device, dtype=torch.float64)
        return (r * self.nvec).floor().to(self.dtype)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype == torch.bool:
            return True
        return bool(((val >= 0) & (val < self.nvec)).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if _is_floating(val.dtype):
            val = val.round()
        val = val.to(torch.int64)
        return torch.minimum(val.clamp_min(0), self.nvec - 1).to(self.dtype)

    def to_one_hot(self, val: torch.Tensor) -> torch.Tensor:
        """Concatenate the one-hot encodings of each entry along the last dim."""
        row = self._row()
        return torch.cat([F.one_hot(v.long(), n) for v, n in zip(val.unbind(-1), row)], -1).bool()

    def to_one_hot_spec(self) -> TensorSpec:
        """The ``MultiOneHot`` spec matching ``to_one_hot``'s output."""
        from ._one_hot import MultiOneHot

        row = self._row()
        return MultiOneHot(row, shape=(*self.shape[:-1], sum(row)), device=self.device)

    def _repr_fields(self) -> str:
        return f"nvec={self.nvec.tolist()}"


class Binary(Categorical):
    """A tensor of independent 0/1 flags; ``n`` (the last dim) flags per sample.

    It is a ``Categorical`` with two categories; the default dtype is ``int8``.

    Examples:
        >>> spec = Binary(4)
        >>> spec.shape, spec.dtype
        (torch.Size([4]), torch.int8)
    """

    def __init__(
        self,
        n: int | None = None,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.int8,
    ) -> None:
        if shape is None:
            if n is None:
                raise TypeError(BINARY_NO_SIZE)
            shape = (int(n),)
        shape = parse_shape(shape)
        if n is not None and (not shape or shape[-1] != n):
            raise ValueError(BINARY_N_SHAPE.format(n=n, shape=tuple(shape)))
        super().__init__(2, shape=shape, device=device, dtype=dtype or torch.int8)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype == torch.bool:
            return True
        return bool(((val == 0) | (val == 1)).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return (val > 0.5).to(self.dtype)

"""``Categorical``, ``MultiCategorical`` and ``Binary``: integer labels ``0..n-1``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ._api import is_current
from ._base import (
    CHECK_SPEC_ENCODE,
    DeviceLike,
    ShapeLike,
    TensorSpec,
    _is_floating,
    parse_shape,
    spec_class,
)
from ._enumerate import (
    binary_values,
    categorical_values,
    multi_categorical_values,
    nvec_row,
)
from ._indexing import pick
from ._masks import check_mask, labels_allowed, mask_row, masked_labels, replace_disallowed
from ._spaces import BinaryBox, Box, BoxList, CategoricalBox

BAD_N = "{cls} needs n >= 1 categories, got n={n}"
BAD_NVEC = "{cls} needs every entry of nvec >= 1, got nvec={nvec}"
NVEC_SHAPE = "{cls} nvec of shape {nvec} does not broadcast to shape {shape}"
BINARY_NO_SIZE = "Binary needs n or shape"
BINARY_N_SHAPE = "Binary got n={n} but shape {shape}: the last dim must be n"
BINARY_EMPTY_SHAPE = "'n' must be zero for spec Binary when using an empty shape (got n={n})"
BINARY_NO_MASK = "Binary specs take no mask: use a Categorical or MultiCategorical to mask actions"
NVEC_NOT_UNIFORM = "{cls}.to_one_hot needs the same nvec across batch dims, got nvec={nvec}"


def _randint(n: int, shape: torch.Size, dtype: torch.dtype, device) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.empty(shape, dtype=dtype, device=device).random_(0, min(n, 2))
    return torch.randint(0, n, shape, dtype=dtype, device=device)


def _check(spec: TensorSpec, val: torch.Tensor, safe: bool | None) -> None:
    if CHECK_SPEC_ENCODE if safe is None else safe:
        spec.assert_is_in(val)


class Categorical(TensorSpec):
    """A tensor of integer labels in ``0..n-1`` (no trailing one-hot dim).

    The default shape is ``()`` and the default dtype ``int64``; a ``bool`` dtype with ``n=2``
    describes done flags. An optional boolean ``mask`` of shape ``(*shape, n)`` lists the allowed
    categories: ``rand`` samples only those, ``is_in`` rejects the others and ``project`` replaces
    them with random allowed ones.

    Examples:
        >>> spec = Categorical(4, shape=(2,))
        >>> spec.rand().shape
        torch.Size([2])
        >>> Categorical(2, shape=(2, 1), dtype=torch.bool).zero().dtype
        torch.bool
        >>> masked = Categorical(3, mask=torch.tensor([False, True, False]))
        >>> masked.rand().item(), masked.is_in(torch.tensor(0))
        (1, False)
    """

    _batch_attrs = ("mask",)
    mask: torch.Tensor | None = None

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.int64,
        mask: torch.Tensor | None = None,
    ) -> None:
        n = int(n)
        if n < 1:
            raise ValueError(BAD_N.format(cls=type(self).__name__, n=n))
        super().__init__(shape, device, dtype or torch.int64)
        self.n = n
        if mask is not None:
            self.update_mask(mask)

    def _mask_shape(self) -> tuple[int, ...]:
        return (*self.shape, self.n)

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Set the boolean mask of allowed categories (broadcast to ``(*shape, n)``), or clear it.

        Raises ``ValueError`` for a non-boolean mask and ``SpecShapeError`` (a ``ValueError``
        and a ``RuntimeError``) for one that does not broadcast.
        """
        if mask is None:
            self.mask = None
            return
        self.mask = check_mask(mask, self._mask_shape(), self.device, type(self).__name__)

    def _default_space(self) -> Box:
        """The labels ``0..n-1``."""
        return CategoricalBox(self.n)

    def _default_domain(self) -> str:
        return "discrete"

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample labels uniformly in ``0..n-1`` (among the allowed ones when masked)."""
        if self.mask is None:
            return _randint(self.n, self._full_shape(shape), self.dtype, self.device)
        return masked_labels(self.mask, self._full_shape(shape), type(self).__name__).to(self.dtype)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype == torch.bool:
            in_range = self.n >= 2 or not bool(val.any())
        else:
            in_range = bool(((val >= 0) & (val < self.n)).all())
        if self.mask is None or not in_range:
            return in_range
        return bool(labels_allowed(self.mask, val).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        if _is_floating(val.dtype):
            val = val.round()
        val = val.clamp(0, self.n - 1)
        if self.mask is not None:
            val = replace_disallowed(self.mask, val, type(self).__name__)
        return val.to(self.dtype)

    def cardinality(self) -> int:
        """``n``: the number of categories (as in current torchrl)."""
        return self.n

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """The labels ``0..n-1`` stacked along a new first dim, shape ``(n, *shape)``.

        With ``use_mask`` only the labels the mask allows (one mask row shared by every batch
        entry; ``IndexError`` otherwise).

        Examples:
            >>> Categorical(3, shape=(2,)).enumerate()
            tensor([[0, 0],
                    [1, 1],
                    [2, 2]])
        """
        return categorical_values(self, use_mask)

    def to_one_hot(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Turn labels into one-hot booleans with a trailing dim of size ``n``.

        With ``safe`` (default: ``CHECK_SPEC_ENCODE``), ``val`` is checked against the spec.
        """
        _check(self, val, safe)
        return F.one_hot(val.long(), self.n).bool()

    def to_one_hot_spec(self) -> TensorSpec:
        """The ``OneHot`` spec matching ``to_one_hot``'s output (the mask carries over)."""
        return spec_class("OneHot")(
            self.n, shape=(*self.shape, self.n), device=self.device, mask=self.mask
        )

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Entries of ``tensor_to_index`` (last dim: one per category) at the labels ``index``.

        The result keeps a last dim of size 1: ``tensor_to_index[..., index]``.

        Examples:
            >>> Categorical(3).index(torch.tensor([2, 0]), torch.arange(6).reshape(2, 3))
            tensor([[2],
                    [3]])
        """
        return pick(tensor_to_index, index.unsqueeze(-1))

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> np.ndarray:
        """The labels as a NumPy array (checked first when ``safe``)."""
        return super().to_numpy(val, safe)

    def _eq_fields(self) -> tuple:
        return (self.n,)

    def _eq_other_class(self, other: object) -> bool:
        return type(other) is Binary and other._eq_other_class(self)


class Binary(Categorical):
    """A tensor of independent 0/1 flags; ``n`` (the last dim) flags per sample.

    It is a ``Categorical`` with two categories (``spec.n == 2``) whose last dim holds the flags
    (a domain dim: never indexed, squeezed or unbound); the default dtype is ``int8``. As in
    torchrl 0.4, it equals a ``Categorical(2)`` of the same shape, dtype and device.
    ``unsqueeze(-1)`` appends a dim of one flag (the former flags become a batch dim), as in
    current torchrl. ``enumerate`` gives all ``2 ** n`` combinations of the flags.

    Examples:
        >>> spec = Binary(4)
        >>> spec.shape, spec.dtype, spec.space
        (torch.Size([4]), torch.int8, BinaryBox(n=4))
    """

    _domain_ndim = 1

    def __init__(
        self,
        n: int | None = None,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.int8,
    ) -> None:
        if shape is None or not len(parse_shape(shape)):
            if n is None:
                raise TypeError(BINARY_NO_SIZE)
            if shape is not None and n and is_current():
                raise ValueError(BINARY_EMPTY_SHAPE.format(n=n))
            shape = (int(n),)
        shape = parse_shape(shape)
        if n is not None and shape[-1] != n:
            raise ValueError(BINARY_N_SHAPE.format(n=n, shape=tuple(shape)))
        super().__init__(2, shape=shape, device=device, dtype=dtype or torch.int8)

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Binary specs take no mask (``None`` is accepted and does nothing)."""
        if mask is not None:
            raise TypeError(BINARY_NO_MASK)

    def _default_space(self) -> Box:
        """``n`` binary flags."""
        return BinaryBox(self.shape[-1])

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Not defined for flags (raises ``NotImplementedError``)."""
        return TensorSpec.index(self, index, tensor_to_index)

    def cardinality(self) -> int:
        """``2 ** n``: every combination of the ``n`` flags."""
        return 2 ** self.shape[-1]

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """Every combination of the flags, shape ``(2 ** n, *shape)`` (``use_mask``: no mask here).

        Examples:
            >>> Binary(2).enumerate()
            tensor([[0, 0],
                    [0, 1],
                    [1, 0],
                    [1, 1]], dtype=torch.int8)
        """
        return binary_values(self)

    def unsqueeze(self, dim: int) -> TensorSpec:
        """Insert a dim of size 1; at the end (``-1``), it holds one flag per former flag."""
        if dim in (-1, self.ndim):
            return self._reshaped(torch.Size((*self.shape, 1)))
        return super().unsqueeze(dim)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype == torch.bool:
            return True
        return bool(((val == 0) | (val == 1)).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return (val > 0.5).to(self.dtype)

    def _eq_other_class(self, other: object) -> bool:
        return (
            type(other) is Categorical
            and other.n == 2
            and other.mask is None
            and other.shape == self.shape
            and other.dtype == self.dtype
            and other.device == self.device
        )


class MultiCategorical(TensorSpec):
    """A tensor whose last dim holds one label per entry of ``nvec`` (entry i in ``0..nvec[i]-1``).

    ``nvec`` may be a scalar (one entry), a sequence or a tensor with leading batch dims. As in
    torchrl 0.4, a spec of shape ``(1,)`` samples without its trailing dim (``rand((3,))`` has
    shape ``(3,)``) and accepts values with or without it. The last dim is a domain dim (never
    indexed, squeezed or unbound). An optional boolean ``mask`` of shape
    ``(*shape[:-1], sum(nvec))`` lists the allowed labels of every entry, block after block.

    Examples:
        >>> spec = MultiCategorical([2, 3])
        >>> spec.shape, spec.is_in(spec.rand())
        (torch.Size([2]), True)
        >>> MultiCategorical(4).rand((3,)).shape
        torch.Size([3])
    """

    _tensor_attrs = ("nvec",)
    _batch_attrs = ("mask",)
    _domain_ndim = 1
    _nested_list_index = False  # torchrl refuses nested-list indices on MultiCategorical
    mask: torch.Tensor | None = None

    def __init__(
        self,
        nvec: Sequence[int] | torch.Tensor | int,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.int64,
        mask: torch.Tensor | None = None,
    ) -> None:
        nvec_t = torch.as_tensor(nvec).to(torch.int64)
        if nvec_t.ndim == 0:
            nvec_t = nvec_t.unsqueeze(0)
        if (nvec_t < 1).any():
            raise ValueError(BAD_NVEC.format(cls=type(self).__name__, nvec=nvec_t.tolist()))
        super().__init__(nvec_t.shape if shape is None else shape, device, dtype or torch.int64)
        if not self.shape:
            raise ValueError(
                NVEC_SHAPE.format(cls=type(self).__name__, nvec=nvec_t.shape, shape=self.shape)
            )
        try:
            self.nvec = nvec_t.to(self.device).expand(self.shape).clone()
        except RuntimeError as err:
            raise ValueError(
                NVEC_SHAPE.format(cls=type(self).__name__, nvec=nvec_t.shape, shape=self.shape)
            ) from err
        if mask is not None:
            self.update_mask(mask)

    @property
    def nvec(self) -> torch.Tensor:
        """Number of categories of every entry, with the spec's full shape."""
        return self._nvec

    @nvec.setter
    def nvec(self, value: torch.Tensor) -> None:
        self._nvec = value
        self._cache = None

    def _sampling_row(self) -> list[int] | None:
        """The cardinalities shared by every batch entry, or None; cached until ``nvec`` changes."""
        if self._cache is None:
            nvec = self._nvec
            flat = nvec.reshape(-1, nvec.shape[-1])
            row = flat[0].tolist() if flat.shape[0] and bool((flat == flat[0]).all()) else None
            self._cache = (row,)
        return self._cache[0]

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Set the mask of allowed labels (shape ``(*shape[:-1], sum(nvec))``), or clear it."""
        if mask is None:
            self.mask = None
            return
        row = mask_row(self.nvec, type(self).__name__)
        self.mask = check_mask(mask, (*self.shape[:-1], sum(row)), self.device, type(self).__name__)

    def _default_space(self) -> Box:
        """One ``CategoricalBox`` per entry (nested ``BoxList``s over batch dims)."""
        return BoxList.from_nvec(self.nvec)

    def _default_domain(self) -> str:
        return "discrete"

    def _row(self) -> list[int]:
        row = self._sampling_row()
        if row is None:
            raise ValueError(
                NVEC_NOT_UNIFORM.format(cls=type(self).__name__, nvec=self.nvec.tolist())
            )
        return row

    def _mask_blocks(self) -> list[torch.Tensor]:
        return list(self.mask.split(self._row(), -1))

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample each entry uniformly in ``0..nvec[i]-1`` (allowed labels only when masked).

        Each entry is drawn in place into one new tensor when every batch entry shares the
        same ``nvec``.
        """
        full = self._full_shape(shape)
        if self.mask is not None:
            batch = full[:-1]
            cls = type(self).__name__
            out = torch.stack([masked_labels(m, batch, cls) for m in self._mask_blocks()], -1)
            out = out.to(self.dtype)
        else:
            row = self._sampling_row()
            if row is None:
                r = torch.rand(full, device=self.device, dtype=torch.float64)
                out = (r * self.nvec).floor().to(self.dtype)
            elif self.dtype == torch.bool:
                out = torch.empty(full, dtype=torch.bool, device=self.device)
                for i, n in enumerate(row):
                    out[..., i].random_(0, min(n, 2))
            elif len(set(row)) == 1:
                out = torch.randint(0, row[0], full, dtype=self.dtype, device=self.device)
            else:
                out = torch.empty(full, dtype=self.dtype, device=self.device)
                for i, n in enumerate(row):
                    out[..., i].random_(0, n)
        if self.shape == (1,):
            out = out.squeeze(-1)
        return out

    def _unsqueezed(self, val: torch.Tensor) -> torch.Tensor:
        """Values of a ``(1,)``-shaped spec may come without their trailing dim."""
        if self.shape == (1,) and (val.ndim == 0 or val.shape[-1] != 1):
            return val.unsqueeze(-1)
        return val

    def is_in(self, val: Any) -> bool:
        """Whether ``val`` has the spec's dtype and trailing shape and every label is allowed."""
        if isinstance(val, torch.Tensor):
            val = self._unsqueezed(val)
        return super().is_in(val)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype == torch.bool:
            in_range = True
        else:
            in_range = bool(((val >= 0) & (val < self.nvec)).all())
        if self.mask is None or not in_range:
            return in_range
        blocks = self._mask_blocks()
        return all(bool(labels_allowed(m, v).all()) for m, v in zip(blocks, val.unbind(-1)))

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        squeeze = self.shape == (1,) and (val.ndim == 0 or val.shape[-1] != 1)
        val = self._unsqueezed(val)
        if _is_floating(val.dtype) and not _is_floating(self.dtype):
            val = val.round()
        if not _is_floating(val.dtype):
            val = val.to(torch.int64)
        val = torch.minimum(val.clamp_min(0), (self.nvec - 1).to(val.dtype))
        if self.mask is not None:
            cls = type(self).__name__
            parts = [
                replace_disallowed(m, v, cls) for m, v in zip(self._mask_blocks(), val.unbind(-1))
            ]
            val = torch.stack(parts, -1)
        val = val.to(self.dtype)
        return val.squeeze(-1) if squeeze else val

    def cardinality(self) -> int:
        """The product of ``nvec`` (one row shared by every batch entry; ``ValueError`` else)."""
        out = 1
        for n in nvec_row(self):
            out *= n
        return out

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """Every combination of labels, shape ``(prod(nvec), *shape)``, as in current torchrl.

        A masked spec raises ``RuntimeError``, ``use_mask=True`` ``NotImplementedError`` and
        ``nvec`` rows that differ across batch dims ``ValueError`` (torchrl's errors).

        Examples:
            >>> MultiCategorical([2, 2]).enumerate()
            tensor([[0, 0],
                    [0, 1],
                    [1, 0],
                    [1, 1]])
        """
        return multi_categorical_values(self, use_mask)

    def to_one_hot(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Concatenate the one-hot encodings of each entry along the last dim."""
        _check(self, val, safe)
        row = self._row()
        val = self._unsqueezed(val)
        return torch.cat([F.one_hot(v.long(), n) for v, n in zip(val.unbind(-1), row)], -1).bool()

    def to_one_hot_spec(self) -> TensorSpec:
        """The ``MultiOneHot`` spec matching ``to_one_hot``'s output (the mask carries over)."""
        row = self._row()
        return spec_class("MultiOneHot")(
            row, shape=(*self.shape[:-1], sum(row)), device=self.device, mask=self.mask
        )

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Entries of ``tensor_to_index`` (blocks of ``nvec[i]`` entries) at the labels ``index``.

        Examples:
            >>> spec = MultiCategorical([2, 3])
            >>> spec.index(torch.tensor([1, 2]), torch.arange(5))
            tensor([1, 4])
        """
        row = self._row()
        offsets = torch.tensor([0, *row[:-1]], device=index.device).cumsum(0)
        return pick(tensor_to_index, self._unsqueezed(index).long() + offsets)

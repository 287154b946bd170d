"""``OneHot`` and ``MultiOneHot``: one-hot encodings along the last dim."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from ._base import (
    CHECK_SPEC_ENCODE,
    ENCODE_SHAPE,
    DeviceLike,
    ShapeLike,
    TensorSpec,
    parse_shape,
    spec_class,
)
from ._enumerate import multi_one_hot_values, one_hot_values
from ._indexing import pick
from ._masks import check_mask, masked_labels, replace_disallowed
from ._spaces import Box, BoxList, CategoricalBox
from .errors import SpecDomainError, SpecShapeError

ONE_HOT_SHAPE = "{cls} needs a shape whose last dim is {n}, got shape {shape}"
BAD_N = "{cls} needs n >= 1 categories, got n={n}"
LABEL_RANGE = "{cls} cannot encode label {label}: labels must lie in 0..{last}"
REGISTER_FULL = "{cls} register is full: {n} values are registered, cannot add {value!r}"


@lru_cache(maxsize=64)
def _categories(n: int, device: torch.device) -> torch.Tensor:
    return torch.arange(n, device=device)


def _as_one_hot(labels: torch.Tensor, n: int) -> torch.Tensor:
    """Labels of shape ``(..., 1)`` as one-hot booleans of shape ``(..., n)``.

    Comparing the labels with ``arange(n)`` builds the encoding in one op, about three times
    faster than ``F.one_hot`` (which checks the labels' range) followed by a cast.
    """
    return labels == _categories(n, labels.device)


def _random_one_hot(n: int, batch: Sequence[int], device: DeviceLike) -> torch.Tensor:
    """A uniformly random category per entry of ``batch``, one-hot (bool) along a last dim of n."""
    return _as_one_hot(torch.randint(0, n, (*batch, 1), device=device), n)


def _check(spec: TensorSpec, val: torch.Tensor, safe: bool | None) -> None:
    if CHECK_SPEC_ENCODE if safe is None else safe:
        spec.assert_is_in(val)


def _first_hot(val: torch.Tensor) -> torch.Tensor:
    """The index of the (first) largest entry along the last dim."""
    return val.to(torch.uint8 if val.dtype == torch.bool else val.dtype).argmax(-1)


class OneHot(TensorSpec):
    """A one-hot tensor: the last dim (of size ``n``) holds exactly one 1.

    The default shape is ``(n,)`` and the default dtype ``bool``. An optional boolean ``mask``
    (broadcast to the spec's shape) lists the allowed categories: ``rand`` samples only those,
    ``is_in`` rejects the others and ``project`` replaces them with random allowed ones.
    ``use_register=True`` (torchrl's experimental register) encodes arbitrary hashable values
    as categories in the order they are first seen.

    Examples:
        >>> spec = OneHot(3)
        >>> spec.rand().sum().item()
        1
        >>> spec.to_categorical(torch.tensor([False, True, False]))
        tensor(1)
        >>> spec.to_numpy(spec.encode(2))
        array(2)
        >>> OneHot(3, mask=torch.tensor([False, False, True])).rand()
        tensor([False, False,  True])
    """

    _domain_ndim = 1
    _batch_attrs = ("mask",)
    mask: torch.Tensor | None = None

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.bool,
        use_register: bool = False,
        mask: torch.Tensor | None = None,
    ) -> None:
        n = int(n)
        if n < 1:
            raise ValueError(BAD_N.format(cls=type(self).__name__, n=n))
        shape = torch.Size((n,)) if shape is None else parse_shape(shape)
        if not shape or shape[-1] != n:
            raise ValueError(ONE_HOT_SHAPE.format(cls=type(self).__name__, n=n, shape=shape))
        super().__init__(shape, device, dtype or torch.bool)
        self.n = n
        self.use_register = use_register
        if use_register:
            self.register: dict[Any, int] = {}
        if mask is not None:
            self.update_mask(mask)

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Set the boolean mask of allowed categories (broadcast to the spec's shape), or clear it.

        Raises ``ValueError`` for a non-boolean mask and ``SpecShapeError`` (a ``ValueError``
        and a ``RuntimeError``) for one that does not broadcast.
        """
        if mask is None:
            self.mask = None
            return
        self.mask = check_mask(mask, tuple(self.shape), self.device, type(self).__name__)

    def _default_space(self) -> Box:
        """The ``n`` categories."""
        return CategoricalBox(self.n)

    def _default_domain(self) -> str:
        return "discrete"

    def _resized(self, shape: torch.Size) -> dict[str, Any]:
        return {"n": shape[-1]}

    def clone(self) -> OneHot:
        """A copy that shares nothing with ``self`` (the register included)."""
        out = super().clone()
        if self.use_register:
            out.register = dict(self.register)
        return out

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample a uniformly random category (an allowed one when masked), one-hot encoded."""
        batch = self._full_shape(shape)[:-1]
        if self.mask is None:
            out = _random_one_hot(self.n, batch, self.device)
        else:
            labels = masked_labels(self.mask, batch, type(self).__name__)
            out = _as_one_hot(labels.unsqueeze(-1), self.n)
        return out if self.dtype == torch.bool else out.to(self.dtype)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype != torch.bool and not ((val == 0) | (val == 1)).all():
            return False
        if not bool((val.sum(-1) == 1).all()):
            return False
        return self.mask is None or bool((val.bool() & self.mask).any(-1).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        labels = val.float().argmax(-1)
        if self.mask is not None:
            labels = replace_disallowed(self.mask, labels, type(self).__name__)
        return F.one_hot(labels, self.n).to(self.dtype)

    def _labels_of(self, val: Any) -> torch.Tensor:
        """Registered labels of arbitrary values (``use_register``)."""
        values = np.asarray(val, dtype=object)
        labels = []
        for value in values.reshape(-1):
            if value not in self.register:
                if len(self.register) >= self.n:
                    raise ValueError(
                        REGISTER_FULL.format(cls=type(self).__name__, n=self.n, value=value)
                    )
                self.register[value] = len(self.register)
            labels.append(self.register[value])
        return torch.tensor(labels, dtype=torch.int64).reshape(values.shape)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """Encode a one-hot value, or labels (an array of the batch shape), into one-hot form.

        With ``use_register``, ``val`` holds arbitrary values that the register maps to labels.
        """
        return super().encode(val, ignore_device=ignore_device)

    def _encode_eager(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        if self.use_register and not isinstance(val, torch.Tensor):
            t = self._labels_of(val)
        else:
            t = torch.as_tensor(val)
        if not t.dtype.is_floating_point and t.dtype != torch.bool and t.shape == self.shape[:-1]:
            if t.numel() and (int(t.min()) < 0 or int(t.max()) >= self.n):
                bad = t[(t < 0) | (t >= self.n)].reshape(-1)[0].item()
                raise ValueError(
                    LABEL_RANGE.format(cls=type(self).__name__, label=bad, last=self.n - 1)
                )
            t = _as_one_hot(t.long().unsqueeze(-1), self.n)
        return super()._encode_eager(t, ignore_device=ignore_device)

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> np.ndarray:
        """The categories of one-hot ``val`` as a NumPy array (registered values with a register).

        With ``safe`` (default: ``CHECK_SPEC_ENCODE``) ``val`` is checked first.
        """
        _check(self, val, safe)
        labels = _first_hot(val).cpu().numpy()
        if not self.use_register:
            return labels
        inverse = {label: value for value, label in self.register.items()}
        return np.array([inverse[int(v)] for v in labels.reshape(-1)]).reshape(labels.shape)

    def to_categorical(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Turn one-hot values into labels (argmax over the last dim); checked when ``safe``."""
        _check(self, val, safe)
        return _first_hot(val)

    def to_categorical_spec(self) -> TensorSpec:
        """The ``Categorical`` spec matching ``to_categorical``'s output (the mask carries over)."""
        return spec_class("Categorical")(
            self.n, shape=self.shape[:-1], device=self.device, mask=self.mask
        )

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Entries of ``tensor_to_index`` at the category that one-hot ``index`` selects.

        The result keeps a last dim of size 1.

        Examples:
            >>> OneHot(3).index(torch.tensor([False, True, False]), torch.tensor([5, 6, 7]))
            tensor([6])
        """
        return pick(tensor_to_index, _first_hot(index).unsqueeze(-1))

    def _eq_fields(self) -> tuple:
        return (self.n, self.use_register)

    def cardinality(self) -> int:
        """``n``: the number of categories (as in current torchrl)."""
        return self.n

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """The ``n`` one-hot vectors stacked along a new first dim, shape ``(n, *shape)``.

        ``use_mask=True`` raises ``NotImplementedError``, as in current torchrl.

        Examples:
            >>> OneHot(2).enumerate()
            tensor([[ True, False],
                    [False,  True]])
        """
        return one_hot_values(self, use_mask)


class MultiOneHot(TensorSpec):
    """Several one-hot blocks concatenated along the last dim (block i has ``nvec[i]`` entries).

    An optional boolean ``mask`` (broadcast to the spec's shape) lists the allowed categories of
    every block. ``encode`` takes one-hot values or one label per block; ``to_numpy`` gives the
    labels.

    Examples:
        >>> spec = MultiOneHot([2, 3])
        >>> spec.shape
        torch.Size([5])
        >>> spec.to_categorical(spec.rand()).shape
        torch.Size([2])
        >>> spec.encode([1, 0]).tolist()
        [False, True, True, False, False]
    """

    _domain_ndim = 1
    _batch_attrs = ("mask",)
    mask: torch.Tensor | None = None

    def __init__(
        self,
        nvec: Sequence[int],
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.bool,
        use_register: bool = False,
        mask: torch.Tensor | None = None,
    ) -> None:
        nvec = [int(n) for n in nvec]
        if any(n < 1 for n in nvec):
            raise ValueError(BAD_N.format(cls=type(self).__name__, n=nvec))
        total = sum(nvec)
        shape = torch.Size((total,)) if shape is None else parse_shape(shape)
        if not shape or shape[-1] != total:
            raise ValueError(ONE_HOT_SHAPE.format(cls=type(self).__name__, n=total, shape=shape))
        super().__init__(shape, device, dtype or torch.bool)
        self.nvec = nvec
        self.use_register = use_register
        if mask is not None:
            self.update_mask(mask)

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Set the mask of allowed categories, block after block (broadcast to the shape)."""
        if mask is None:
            self.mask = None
            return
        self.mask = check_mask(mask, tuple(self.shape), self.device, type(self).__name__)

    def _default_space(self) -> Box:
        """One ``CategoricalBox`` per block."""
        return BoxList(tuple(CategoricalBox(n) for n in self.nvec))

    def _default_domain(self) -> str:
        return "discrete"

    def clone(self) -> MultiOneHot:
        """A copy that shares nothing with ``self`` (``nvec`` included)."""
        out = super().clone()
        out.nvec = list(self.nvec)
        return out

    def _resized(self, shape: torch.Size) -> dict[str, Any]:
        return {} if shape[-1] == sum(self.nvec) else {"nvec": [shape[-1]] if shape[-1] else []}

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample one category per block (allowed ones when masked), one-hot encoded."""
        batch = self._full_shape(shape)[:-1]
        if self.mask is None:
            parts = [_random_one_hot(n, batch, self.device) for n in self.nvec]
        else:
            cls = type(self).__name__
            parts = [
                _as_one_hot(masked_labels(m, batch, cls).unsqueeze(-1), n)
                for m, n in zip(self._split(self.mask), self.nvec)
            ]
        out = torch.cat(parts, -1)
        return out if self.dtype == torch.bool else out.to(self.dtype)

    def _split(self, val: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return val.split(self.nvec, -1)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype != torch.bool and not ((val == 0) | (val == 1)).all():
            return False
        if not all(bool((part.sum(-1) == 1).all()) for part in self._split(val)):
            return False
        return self.mask is None or all(
            bool((part.bool() & m).any(-1).all())
            for part, m in zip(self._split(val), self._split(self.mask))
        )

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        labels = [part.float().argmax(-1) for part in self._split(val)]
        if self.mask is not None:
            cls = type(self).__name__
            labels = [replace_disallowed(m, v, cls) for m, v in zip(self._split(self.mask), labels)]
        parts = [F.one_hot(v, n) for v, n in zip(labels, self.nvec)]
        return torch.cat(parts, -1).to(self.dtype)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """Encode one-hot blocks, or one label per block (last dim ``len(nvec)``), into one-hot form.

        As in torchrl 0.4, a label outside its block raises ``SpecDomainError`` and labels of
        another batch shape than the spec's (a NumPy batch, say) raise ``SpecShapeError``, both
        ``RuntimeError``s.
        """
        return super().encode(val, ignore_device=ignore_device)

    def _encode_eager(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        is_tensor = isinstance(val, torch.Tensor)
        t = torch.as_tensor(val)
        k, total = len(self.nvec), sum(self.nvec)
        labels = t.ndim and t.shape[-1] == k and (k != total or not bool(t.any()))
        if not (labels and not t.dtype.is_floating_point and t.dtype != torch.bool):
            return super()._encode_eager(t if is_tensor else val, ignore_device=ignore_device)
        batch = self.shape[:-1]
        if not is_tensor and t.numel() != k * batch.numel():
            raise SpecShapeError(
                ENCODE_SHAPE.format(
                    got=t.shape, cls=type(self).__name__, expected=torch.Size((*batch, k))
                )
            )
        parts = []
        for i, (v, n) in enumerate(zip(t.unbind(-1), self.nvec)):
            if v.numel() and (int(v.min()) < 0 or int(v.max()) >= n):
                bad = v[(v < 0) | (v >= n)].reshape(-1)[0].item()
                raise SpecDomainError(
                    LABEL_RANGE.format(
                        cls=f"{type(self).__name__} block {i}", label=bad, last=n - 1
                    )
                )
            parts.append(_as_one_hot(v.long().unsqueeze(-1), n))
        t = torch.cat(parts, -1)
        if not is_tensor:
            t = t.reshape(self.shape)
        return super()._encode_eager(t, ignore_device=ignore_device)

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> np.ndarray:
        """The label of every block (last dim ``len(nvec)``) as a NumPy array."""
        return self.to_categorical(val, safe).cpu().numpy()

    def to_categorical(self, val: torch.Tensor, safe: bool | None = None) -> torch.Tensor:
        """Turn each block into its label; the last dim becomes ``len(nvec)``."""
        _check(self, val, safe)
        return torch.stack([_first_hot(part) for part in self._split(val)], -1)

    def to_categorical_spec(self) -> TensorSpec:
        """The ``MultiCategorical`` spec matching ``to_categorical``'s output (mask included)."""
        return spec_class("MultiCategorical")(
            self.nvec,
            shape=(*self.shape[:-1], len(self.nvec)),
            device=self.device,
            mask=self.mask,
        )

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Entries of ``tensor_to_index`` at the category each one-hot block of ``index`` selects.

        Examples:
            >>> spec = MultiOneHot([2, 3])
            >>> spec.index(spec.encode([1, 2]), torch.arange(5))
            tensor([1, 4])
        """
        labels = self.to_categorical(index, safe=False)
        offsets = torch.tensor([0, *self.nvec[:-1]], device=labels.device).cumsum(0)
        return pick(tensor_to_index, labels + offsets)

    def _eq_fields(self) -> tuple:
        return (tuple(self.nvec), self.use_register)

    def cardinality(self) -> int:
        """The product of ``nvec`` (as in current torchrl)."""
        out = 1
        for n in self.nvec:
            out *= n
        return out

    def enumerate(self, use_mask: bool = False) -> torch.Tensor:
        """Every combination of one category per block, shape ``(prod(nvec), *shape)``.

        Errors as ``MultiCategorical.enumerate`` (a masked spec raises ``RuntimeError``).

        Examples:
            >>> MultiOneHot([1, 2]).enumerate()
            tensor([[ True,  True, False],
                    [ True, False,  True]])
        """
        return multi_one_hot_values(self, use_mask)

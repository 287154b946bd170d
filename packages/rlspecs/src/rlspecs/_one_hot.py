"""``OneHot`` and ``MultiOneHot``: one-hot encodings along the last dim."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F

from ._base import DeviceLike, ShapeLike, TensorSpec, parse_shape
from ._spaces import BoxList, CategoricalBox

ONE_HOT_SHAPE = "{cls} needs a shape whose last dim is {n}, got shape {shape}"
BAD_N = "{cls} needs n >= 1 categories, got n={n}"


@lru_cache(maxsize=64)
def _categories(n: int, device: torch.device) -> torch.Tensor:
    return torch.arange(n, device=device)


def _random_one_hot(n: int, batch: Sequence[int], device: DeviceLike) -> torch.Tensor:
    """A uniformly random category per entry of ``batch``, one-hot (bool) along a last dim of n.

    Comparing the labels with ``arange(n)`` builds the encoding in one op, about three times
    faster than ``F.one_hot`` (which checks the labels' range) followed by a cast.
    """
    labels = torch.randint(0, n, (*batch, 1), device=device)
    return labels == _categories(n, labels.device)


class OneHot(TensorSpec):
    """A one-hot tensor: the last dim (of size ``n``) holds exactly one 1.

    The default shape is ``(n,)`` and the default dtype ``bool``.

    Examples:
        >>> spec = OneHot(3)
        >>> spec.rand().sum().item()
        1
        >>> spec.to_categorical(torch.tensor([False, True, False]))
        tensor(1)
    """

    _domain_ndim = 1

    def __init__(
        self,
        n: int,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.bool,
    ) -> None:
        n = int(n)
        if n < 1:
            raise ValueError(BAD_N.format(cls=type(self).__name__, n=n))
        shape = torch.Size((n,)) if shape is None else parse_shape(shape)
        if not shape or shape[-1] != n:
            raise ValueError(ONE_HOT_SHAPE.format(cls=type(self).__name__, n=n, shape=shape))
        super().__init__(shape, device, dtype or torch.bool)
        self.n = n

    @property
    def space(self) -> CategoricalBox:
        """The ``n`` categories."""
        return CategoricalBox(self.n)

    def _resized(self, shape: torch.Size) -> dict[str, Any]:
        return {"n": shape[-1]}

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample a uniformly random category, one-hot encoded."""
        out = _random_one_hot(self.n, self._full_shape(shape)[:-1], self.device)
        return out if self.dtype == torch.bool else out.to(self.dtype)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype != torch.bool and not ((val == 0) | (val == 1)).all():
            return False
        return bool((val.sum(-1) == 1).all())

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return F.one_hot(val.float().argmax(-1), self.n).to(self.dtype)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """Encode a one-hot value, or a label (array of the batch shape) into its one-hot form."""
        t = torch.as_tensor(val)
        if not t.dtype.is_floating_point and t.dtype != torch.bool and t.shape == self.shape[:-1]:
            t = F.one_hot(t.long(), self.n)
        return super().encode(t, ignore_device=ignore_device)

    def to_categorical(self, val: torch.Tensor) -> torch.Tensor:
        """Turn one-hot values into labels (argmax over the last dim)."""
        return val.to(torch.uint8 if val.dtype == torch.bool else val.dtype).argmax(-1)

    def to_categorical_spec(self) -> TensorSpec:
        """The ``Categorical`` spec matching ``to_categorical``'s output."""
        from ._categorical import Categorical

        return Categorical(self.n, shape=self.shape[:-1], device=self.device)

    def _eq_fields(self) -> tuple:
        return (self.n,)

    def _repr_fields(self) -> str:
        return f"n={self.n}"


class MultiOneHot(TensorSpec):
    """Several one-hot blocks concatenated along the last dim (block i has ``nvec[i]`` entries).

    Examples:
        >>> spec = MultiOneHot([2, 3])
        >>> spec.shape
        torch.Size([5])
        >>> spec.to_categorical(spec.rand()).shape
        torch.Size([2])
    """

    _domain_ndim = 1

    def __init__(
        self,
        nvec: Sequence[int],
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = torch.bool,
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

    @property
    def space(self) -> BoxList:
        """One ``CategoricalBox`` per block."""
        return BoxList(tuple(CategoricalBox(n) for n in self.nvec))

    def clone(self) -> MultiOneHot:
        """A copy that shares nothing with ``self`` (``nvec`` included)."""
        return self._replace(nvec=list(self.nvec))

    def _resized(self, shape: torch.Size) -> dict[str, Any]:
        return {} if shape[-1] == sum(self.nvec) else {"nvec": [shape[-1]] if shape[-1] else []}

    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample one category per block, one-hot encoded."""
        batch = self._full_shape(shape)[:-1]
        parts = [_random_one_hot(n, batch, self.device) for n in self.nvec]
        out = torch.cat(parts, -1)
        return out if self.dtype == torch.bool else out.to(self.dtype)

    def _split(self, val: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return val.split(self.nvec, -1)

    def _in_domain(self, val: torch.Tensor) -> bool:
        if val.dtype != torch.bool and not ((val == 0) | (val == 1)).all():
            return False
        return all(bool((part.sum(-1) == 1).all()) for part in self._split(val))

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        parts = [
            F.one_hot(part.float().argmax(-1), n) for part, n in zip(self._split(val), self.nvec)
        ]
        return torch.cat(parts, -1).to(self.dtype)

    def to_categorical(self, val: torch.Tensor) -> torch.Tensor:
        """Turn each block into its label; the last dim becomes ``len(nvec)``."""
        val = val.to(torch.uint8) if val.dtype == torch.bool else val
        return torch.stack([part.argmax(-1) for part in self._split(val)], -1)

    def to_categorical_spec(self) -> TensorSpec:
        """The ``MultiCategorical`` spec matching ``to_categorical``'s output."""
        from ._categorical import MultiCategorical

        return MultiCategorical(
            self.nvec, shape=(*self.shape[:-1], len(self.nvec)), device=self.device
        )

    def _eq_fields(self) -> tuple:
        return (tuple(self.nvec),)

    def _repr_fields(self) -> str:
        return f"nvec={self.nvec}"

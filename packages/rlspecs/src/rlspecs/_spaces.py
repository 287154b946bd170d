"""Value objects describing a spec's domain (its ``space``): the box names of torchrl 0.4."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import torch


class Box:
    """Base class of every domain descriptor.

    Examples:
        >>> from rlspecs import Categorical
        >>> isinstance(Categorical(3).space, Box)
        True
    """

    def to(self, dest: Any) -> Box:
        """The box with its tensors moved (or cast); boxes without tensors return a copy."""
        return copy.deepcopy(self)

    def clone(self) -> Box:
        """A deep copy."""
        return copy.deepcopy(self)


def _tensor_repr(name: str, t: torch.Tensor) -> str:
    return (
        f"{name}=Tensor(shape={t.shape}, device={t.device}, dtype={t.dtype}, "
        f"contiguous={t.is_contiguous()})"
    )


class ContinuousBox(Box):
    """The closed box ``[low, high]`` of a bounded or unbounded spec.

    ``low``/``high`` (torchrl 0.4's ``minimum``/``maximum`` too) are assignable. The box a
    ``Bounded`` spec reports as its ``space`` is that spec's bounds: assigning (or updating in
    place, ``box.low += 1``) a bound of it changes the spec, as in torchrl.

    Examples:
        >>> from rlspecs import Bounded
        >>> spec = Bounded(0.0, 1.0, (2,))
        >>> box = spec.space
        >>> box.high
        tensor([1., 1.])
        >>> box.maximum = torch.tensor([2.0, 2.0])
        >>> spec.high
        tensor([2., 2.])
        >>> low, high = box
    """

    def __init__(self, low: torch.Tensor, high: torch.Tensor, *, owner: Any = None) -> None:
        # owner: the Bounded spec whose bounds this box shows (read and written through it)
        self._owner = owner
        self._low = None if owner is not None else low
        self._high = None if owner is not None else high

    @property
    def low(self) -> torch.Tensor:
        """The lower bound."""
        return self._owner.low if self._owner is not None else self._low

    @low.setter
    def low(self, value: torch.Tensor) -> None:
        if self._owner is not None:
            self._owner.low = value
        else:
            self._low = value

    @property
    def high(self) -> torch.Tensor:
        """The upper bound."""
        return self._owner.high if self._owner is not None else self._high

    @high.setter
    def high(self, value: torch.Tensor) -> None:
        if self._owner is not None:
            self._owner.high = value
        else:
            self._high = value

    # torchrl 0.4's names of the bounds
    minimum = low
    maximum = high

    def __iter__(self) -> Iterator[torch.Tensor]:
        yield self.low
        yield self.high

    def to(self, dest: Any) -> ContinuousBox:
        """A box with both bounds moved to a device or cast to a dtype (tied to no spec)."""
        return ContinuousBox(self.low.to(dest), self.high.to(dest))

    def clone(self) -> ContinuousBox:
        """A copy whose bounds share no memory with these (tied to no spec)."""
        return ContinuousBox(self.low.clone(), self.high.clone())

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ContinuousBox)
            and self.low.dtype == other.low.dtype
            and self.low.shape == other.low.shape
            and self.high.shape == other.high.shape
            and torch.equal(self.low, other.low.to(self.low.device))
            and torch.equal(self.high, other.high.to(self.high.device))
        )

    __hash__ = None

    def __repr__(self) -> str:
        # torchrl's layout: one line per bound, describing the tensor rather than its values
        low = _tensor_repr("low", self.low)
        high = _tensor_repr("high", self.high)
        return f"{type(self).__name__}(\n    {low},\n    {high})"


@dataclass(frozen=True)
class CategoricalBox(Box):
    """The integers ``0..n-1`` of a categorical or one-hot spec (torchrl's ``DiscreteBox``).

    Examples:
        >>> from rlspecs import Categorical
        >>> Categorical(4).space
        CategoricalBox(n=4)
    """

    n: int


DiscreteBox = CategoricalBox


@dataclass(frozen=True)
class BinaryBox(Box):
    """``n`` independent 0/1 flags: the space of a ``Binary`` spec.

    Examples:
        >>> from rlspecs import Binary
        >>> Binary(3).space
        BinaryBox(n=3)
    """

    n: int


@dataclass(frozen=True)
class BoxList(Box):
    """One box per entry of a multi-categorical or multi-one-hot spec.

    Examples:
        >>> from rlspecs import MultiCategorical
        >>> MultiCategorical([2, 3]).space
        BoxList(boxes=[CategoricalBox(n=2), CategoricalBox(n=3)])
        >>> len(BoxList.from_nvec(torch.tensor([[2, 3], [4, 5]])))
        2
    """

    boxes: tuple[Box, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "boxes", tuple(self.boxes))

    def __iter__(self) -> Iterator[Box]:
        return iter(self.boxes)

    def __len__(self) -> int:
        return len(self.boxes)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(boxes={list(self.boxes)})"

    def to(self, dest: Any) -> BoxList:
        """The boxes, each moved or cast."""
        return BoxList(tuple(box.to(dest) for box in self.boxes))

    @staticmethod
    def from_nvec(nvec: torch.Tensor | Sequence[int]) -> Box:
        """A ``CategoricalBox`` for a scalar ``nvec``, else a ``BoxList`` over its last dim."""
        nvec = torch.as_tensor(nvec)
        if nvec.ndim == 0:
            return CategoricalBox(int(nvec))
        return BoxList(tuple(BoxList.from_nvec(n) for n in nvec.unbind(-1)))

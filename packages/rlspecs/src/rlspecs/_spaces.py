"""Value objects describing a spec's domain (its ``space``)."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True, eq=False)
class ContinuousBox:
    """The closed box ``[low, high]`` of a bounded or unbounded spec.

    Examples:
        >>> from rlspecs import Bounded
        >>> Bounded(0.0, 1.0, (2,)).space.high
        tensor([1., 1.])
    """

    low: torch.Tensor
    high: torch.Tensor

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ContinuousBox)
            and torch.equal(self.low, other.low)
            and torch.equal(self.high, other.high)
        )

    __hash__ = None


@dataclass(frozen=True)
class CategoricalBox:
    """The integers ``0..n-1`` of a categorical or one-hot spec.

    Examples:
        >>> from rlspecs import Categorical
        >>> Categorical(4).space
        CategoricalBox(n=4)
    """

    n: int


@dataclass(frozen=True)
class BoxList:
    """One categorical box per entry of a multi-categorical or multi-one-hot spec.

    Examples:
        >>> from rlspecs import MultiCategorical
        >>> MultiCategorical([2, 3]).space
        BoxList(boxes=(CategoricalBox(n=2), CategoricalBox(n=3)))
    """

    boxes: tuple[CategoricalBox, ...]

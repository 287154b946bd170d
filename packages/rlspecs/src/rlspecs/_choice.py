"""``Choice``: a value drawn from one of several specs, or one of several non-tensor values."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

from ._base import DeviceLike, ShapeLike, TensorSpec

CHOICES_NOT_LIST = "'choices' must be a list"
CHOICES_EMPTY = "'choices' must hold at least one choice, got an empty list"
CHOICE_TYPE = (
    "Each choice must be either a TensorSpec, NonTensorData, or NonTensorStack, but got {type}"
)
CHOICES_SAME_TYPE = "All choices must be the same type (got {types})"
CHOICES_SAME = "All choices must have the same {field} (got {values})"
NO_PROJECT = (
    "_project is not implemented for Choice. If this feature is required, please raise an issue "
    "on TorchRL github repo. (a value that no choice holds cannot be mapped to one)"
)
NO_INDEX = (
    "index is not implemented for Choice. If this feature is required, please raise an issue on "
    "TorchRL github repo."
)
NO_SUBSCRIPT = "'Choice' object is not subscriptable (as in torchrl): index its choices instead"
NO_UNBIND = "Choice specs cannot be unbound (as in torchrl): unbind each choice instead"

_NON_TENSOR = (NonTensorData, NonTensorStack)


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) or isinstance(a, TensorDictBase):
        return bool((a == b).all())
    return bool(a == b)


class Choice(TensorSpec):
    """A spec whose samples come from one of ``choices`` (current torchrl's ``Choice``).

    ``choices`` is a list of specs, or of ``NonTensorData``/``NonTensorStack`` values, all of
    one type, shape, dtype and device (the spec takes them from the first). ``rand`` samples a
    uniformly chosen choice (a non-tensor choice is returned as is), ``zero`` and ``one`` use
    the first and second choice, ``is_in`` accepts what any choice accepts (non-tensor choices:
    an equal value). As in torchrl, ``project`` of a value outside every choice, ``index``,
    indexing (``TypeError``) and ``unbind`` are not defined. ``expand``, ``squeeze``,
    ``unsqueeze``, ``reshape``, ``to`` and ``clone`` apply to every choice; equal choices stack
    densely (``torch.stack``), different ones lazily.

    Examples:
        >>> from rlspecs import Bounded
        >>> spec = Choice([Bounded(0.0, 1.0, shape=(1,)), Bounded(10.0, 11.0, shape=(1,))])
        >>> value = spec.rand()
        >>> spec.is_in(value), spec.num_choices
        (True, 2)
        >>> words = Choice([NonTensorData(s) for s in ["a", "b"]])
        >>> words.rand().data in ("a", "b"), words.cardinality()
        (True, 2)
    """

    def __init__(self, choices: list[TensorSpec | NonTensorData | NonTensorStack]) -> None:
        if not isinstance(choices, list):
            raise TypeError(CHOICES_NOT_LIST)
        if not choices:
            raise ValueError(CHOICES_EMPTY)
        first = choices[0]
        if not isinstance(first, (TensorSpec, *_NON_TENSOR)):
            raise TypeError(CHOICE_TYPE.format(type=type(first)))
        if not all(isinstance(choice, type(first)) for choice in choices[1:]):
            types = sorted({type(c).__name__ for c in choices})
            raise TypeError(CHOICES_SAME_TYPE.format(types=types))
        for field in ("shape", "dtype", "device"):
            values = [getattr(c, field) for c in choices]
            if any(v != values[0] for v in values[1:]):
                raise ValueError(CHOICES_SAME.format(field=field, values=[str(v) for v in values]))
        self._choices = [choice.clone() for choice in choices]
        # a non-tensor choice may have no device: keep what the first choice has, None included
        self.shape, self.dtype, self.device = first.shape, first.dtype, first.device

    @property
    def choices(self) -> list[Any]:
        """The choices (copies of those given)."""
        return self._choices

    @property
    def num_choices(self) -> int:
        """Number of choices for the spec."""
        return len(self._choices)

    def _tensor_choices(self) -> bool:
        return isinstance(self._choices[0], TensorSpec)

    def _default_domain(self) -> Any:
        return None  # as torchrl's Choice

    def _new(self, fn: Any) -> Choice:
        return type(self)([fn(choice) for choice in self._choices])

    # ------------------------------------------------------------------ samples and checks
    def _sample(self, idx: int, method: str, shape: ShapeLike | None) -> Any:
        choice = self._choices[idx]
        if isinstance(choice, TensorSpec):
            return getattr(choice, method)(shape)
        return choice

    def rand(self, shape: ShapeLike | None = None) -> Any:
        """A sample of a uniformly chosen choice (a non-tensor choice itself)."""
        idx = int(torch.randint(0, len(self._choices), ()).item())
        return self._sample(idx, "rand", shape)

    def zero(self, shape: ShapeLike | None = None) -> Any:
        """The first choice's ``zero``."""
        return self._sample(0, "zero", shape)

    def one(self, shape: ShapeLike | None = None) -> Any:
        """The second choice's ``one`` (the first's when there is one choice)."""
        return self._sample(min(1, len(self._choices) - 1), "one", shape)

    def is_in(self, val: Any) -> bool:
        """Whether some choice holds ``val`` (for non-tensor choices: equals it)."""
        if self._tensor_choices():
            return any(choice.is_in(val) for choice in self._choices)
        return any(_same(choice, val) for choice in self._choices)

    def _project(self, val: Any) -> Any:
        raise NotImplementedError(NO_PROJECT)

    def _encode_eager(self, val: Any, *, ignore_device: bool = False) -> Any:
        if self._tensor_choices():
            return super()._encode_eager(val, ignore_device=ignore_device)
        if isinstance(val, _NON_TENSOR):
            return val
        device = None if ignore_device else self.device
        return NonTensorData(data=val, batch_size=self.shape, device=device)

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Not defined (``NotImplementedError``, as in torchrl)."""
        raise NotImplementedError(NO_INDEX)

    def cardinality(self) -> int | float:
        """The number of non-tensor choices, or the sum of the choices' cardinalities."""
        if not self._tensor_choices():
            return len(self._choices)
        return sum(choice.cardinality() for choice in self._choices)

    def enumerate(self, use_mask: bool = False) -> list[Any]:
        """The values of every choice, in a list (the non-tensor choices themselves)."""
        if not self._tensor_choices():
            return list(self._choices)
        return [value for choice in self._choices for value in choice.enumerate(use_mask)]

    # ------------------------------------------------------------------ copies and shapes
    def clone(self) -> Choice:
        """A copy of every choice."""
        return self._new(lambda choice: choice)

    def to(self, dest: DeviceLike | torch.dtype) -> Choice:
        """Every choice moved to a device (or cast to a dtype)."""
        return self._new(lambda choice: choice.to(dest))

    def expand(self, *shape: int) -> Choice:
        """Every choice expanded."""
        return self._new(lambda choice: choice.expand(*shape))

    def squeeze(self, dim: int | None = None) -> Choice:
        """Every choice squeezed."""
        return self._new(lambda choice: choice.squeeze(dim))

    def unsqueeze(self, dim: int) -> Choice:
        """Every choice unsqueezed."""
        return self._new(lambda choice: choice.unsqueeze(dim))

    def reshape(self, *shape: int) -> Choice:
        """Every choice reshaped (``view`` is the same)."""
        return self._new(lambda choice: choice.reshape(*shape))

    view = reshape

    def __getitem__(self, idx: Any) -> TensorSpec:
        """Not defined (``TypeError``, as torchrl's ``Choice`` is not subscriptable)."""
        raise TypeError(NO_SUBSCRIPT)

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """Not defined (``NotImplementedError``, as in torchrl)."""
        raise NotImplementedError(NO_UNBIND)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Choice)
            and self.num_choices == other.num_choices
            and all(_same(a, b) for a, b in zip(self._choices, other._choices))
        )

    __hash__ = None

"""The done rule of the step contract, stated once: ``done = terminated | truncated``.

``done_from`` is the rule; ``complete_done`` applies it to a step's (or reset's) output,
filling the done leaves an env leaves out: ``done`` from ``terminated`` and ``truncated``,
``terminated`` from ``done`` alone, any other missing leaf False. Every path (``EnvBase``,
a library env's stepper, the batched envs, vector and EnvPool backends) takes ``done`` from
here; none computes it itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from tensordict import TensorDictBase

from rlspecs import Composite
from rlspecs.private_apis import td_get_str

Flags = TypeVar("Flags")

__all__ = [
    "DoneLevel",
    "complete_done",
    "done_from",
    "done_levels",
    "done_sources",
    "fill_level",
    "node_at",
]

TERMINATED_FROM_DONE_AND_TRUNCATED = (
    "Cannot infer 'terminated' at level {level!r}: the data has 'done' and 'truncated' but no "
    "'terminated'; return 'terminated' from _step/_reset"
)


def done_from(terminated: Flags, truncated: Flags) -> Flags:
    """The done rule: an episode is done when it terminated or was truncated.

    Takes what a library gives: torch tensors, NumPy arrays or Python bools (of one kind).

    Examples:
        >>> import numpy as np
        >>> done_from(torch.tensor([True, False]), torch.tensor([False, False])).tolist()
        [True, False]
        >>> done_from(np.array([False]), np.array([True])).tolist(), done_from(False, True)
        ([True], True)
    """
    return terminated | truncated


class DoneLevel:
    """The done leaves of one level of the done spec: names, spec shapes and zero factories."""

    __slots__ = ("prefix", "names", "shapes", "specs")

    def __init__(self, prefix: tuple[str, ...], spec: Composite) -> None:
        self.prefix = prefix
        leaves = [(name, item) for name, item in spec.items() if not isinstance(item, Composite)]
        self.names = tuple(name for name, _ in leaves)
        self.shapes = tuple(torch.Size(item.shape) for _, item in leaves)
        self.specs = tuple(item for _, item in leaves)


def done_levels(spec: Composite, prefix: tuple[str, ...] = ()) -> list[DoneLevel]:
    """Lists the levels of a done spec holding leaves, root first."""
    levels = []
    level = DoneLevel(prefix, spec)
    if level.names:
        levels.append(level)
    for name, item in spec.items():
        if isinstance(item, Composite):
            levels.extend(done_levels(item, (*prefix, name)))
    return levels


def node_at(data: TensorDictBase, prefix: tuple[str, ...]) -> TensorDictBase | None:
    """``data[prefix]`` (a nested tensordict), or None where a level of it is missing."""
    for name in prefix:
        data = td_get_str(data, name, None)
        if data is None:
            return None
    return data


def _copy(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value.copy()


def fill_level(
    level: DoneLevel,
    present: dict[str, Any],
    zero: Callable[[Any], Any],
    copy: Callable[[Any], Any] = _copy,
) -> dict[str, Any]:
    """The done leaves of ``level`` missing from ``present`` (tensors or NumPy arrays), by the
    rule: ``done`` from ``terminated`` and ``truncated``, ``terminated`` from ``done`` alone,
    any other False (``zero(spec)``). Returns the new leaves; ``present`` gains them too.

    Examples:
        >>> from rlspecs import Categorical
        >>> flag = Categorical(2, (1,), dtype=torch.bool)
        >>> level = DoneLevel((), Composite(done=flag, terminated=flag, truncated=flag))
        >>> present = {"terminated": torch.tensor([False]), "truncated": torch.tensor([True])}
        >>> fill_level(level, present, lambda spec: spec.zero())["done"]
        tensor([True])
    """
    filled = {}
    for name, spec in zip(level.names, level.specs):
        if name in present:
            continue
        if name == "done" and ("terminated" in present or "truncated" in present):
            value = present.get("terminated")
            truncated = present.get("truncated")
            if value is None:
                value = copy(truncated)
            elif truncated is not None:
                value = done_from(value, truncated)
            else:
                value = copy(value)
        elif name == "terminated" and "done" in present:
            if "truncated" in present:
                raise RuntimeError(TERMINATED_FROM_DONE_AND_TRUNCATED.format(level=level.prefix))
            value = copy(present["done"])
        else:
            value = zero(spec)
        filled[name] = present[name] = value
    return filled


def done_sources(level: DoneLevel, given: Sequence[str]) -> tuple[str, ...]:
    """The given flags whose ``any`` is ``done.any()`` at ``level`` by ``fill_level``'s rule:
    ``done`` where given, else ``terminated`` and ``truncated`` (those given); none where the
    level has no ``done``.

    Examples:
        >>> from rlspecs import Categorical
        >>> flag = Categorical(2, (1,), dtype=torch.bool)
        >>> level = DoneLevel((), Composite(done=flag, terminated=flag, truncated=flag))
        >>> done_sources(level, ["reward", "terminated", "truncated"])
        ('terminated', 'truncated')
    """
    given = [name for name in given if name in level.names]
    if "done" not in level.names:
        return ()
    if "done" in given:
        return ("done",)
    return tuple(name for name in ("terminated", "truncated") if name in given)


def complete_done(
    levels: Sequence[DoneLevel], data: TensorDictBase, leading: torch.Size
) -> TensorDictBase:
    """Fills the done leaves missing from ``data`` in place and reshapes those of wrong shape.

    ``done`` is ``terminated | truncated`` when absent, ``terminated`` copies ``done``, any other
    missing leaf is False. ``leading`` are the data dims in front of the spec shapes.
    """
    for level in levels:
        node = node_at(data, level.prefix)
        if node is None:
            continue
        present = {}
        for name, shape in zip(level.names, level.shapes):
            value = td_get_str(node, name, None)
            if value is None:
                continue
            expected = leading + shape if leading else shape
            if value.shape != expected and value.numel() == expected.numel():
                value = value.reshape(expected)
                node.set(name, value)
            present[name] = value
        if len(present) == len(level.names):
            continue
        filled = fill_level(level, present, lambda spec: spec.zero(leading), _copy)
        for name, value in filled.items():
            node.set(name, value)
    return data

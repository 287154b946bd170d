"""The order of a step's and a reset's entries: the step contract's, read from the specs.

Every path returns the same keys in the same order, whatever order an env's ``_step`` or
``_reset`` wrote them in: ``"next"`` holds the observations, then the rewards, then the done
flags; a reset's output the observations, the done flags, then the state (each group in its
spec's order, a nested group where its first leaf falls). The same rule orders the entries of
each nested level (a multi-agent group's observations, rewards, done flags). Entries outside
the specs follow, in the order they came.
"""

from __future__ import annotations

from collections.abc import Iterable

from tensordict import TensorDict, TensorDictBase

from rlspecs import Composite
from rlspecs.private_apis import td_entries, td_is_locked

__all__ = ["KeyOrder", "in_order", "root_order"]


class KeyOrder(tuple):
    """The keys of one level, in order, with ``nested``: the order of each nested level's keys."""

    nested: dict[str, KeyOrder]


def root_order(*specs: Composite) -> KeyOrder:
    """The root keys of ``specs``' entries, in order, each once (and so at each nested level).

    Examples:
        >>> from rlspecs import Unbounded
        >>> root_order(Composite(obs=Unbounded(1)), Composite(reward=Unbounded(1), obs=Unbounded(1)))
        ('obs', 'reward')
    """
    order: dict[str, None] = {}
    levels: dict[str, list[Composite]] = {}
    for spec in specs:
        for key, leaf in spec.items():
            order[key] = None
            if isinstance(leaf, Composite):
                levels.setdefault(key, []).append(leaf)
    keys = KeyOrder(order)
    keys.nested = {key: root_order(*subs) for key, subs in levels.items()}
    return keys


def in_order(td: TensorDictBase, order: tuple[str, ...]) -> TensorDictBase:
    """Puts the entries of ``td`` (a plain, unlocked tensordict) in ``order``, in place (at
    each nested level too when ``order`` is a ``KeyOrder``).

    Examples:
        >>> import torch
        >>> td = TensorDict({"done": torch.zeros(1), "obs": torch.ones(1)}, [])
        >>> list(in_order(td, ("obs", "done")).keys())
        ['obs', 'done']
    """
    if type(td) is not TensorDict:
        return td
    entries = td_entries(td)
    nested = getattr(order, "nested", None)
    if nested:
        for key, sub in nested.items():
            child = entries.get(key)
            if child is not None:
                in_order(child, sub)
    keys = tuple(entries)
    if keys[: len(order)] == order or td_is_locked(td):
        return td
    ordered = {key: entries[key] for key in order if key in entries}
    if len(ordered) < len(entries):
        ordered.update(_rest(entries.items(), ordered))
    if tuple(ordered) != keys:
        # the same entries, reordered: the storage dict is rewritten with what it held
        entries.clear()
        entries.update(ordered)
    return td


def _rest(items: Iterable, taken: dict) -> Iterable:
    return ((key, value) for key, value in items if key not in taken)

"""The order of a step's and a reset's entries: the step contract's, read from the specs.

Every path returns the same keys in the same order, whatever order an env's ``_step`` or
``_reset`` wrote them in: ``"next"`` holds the observations, then the rewards, then the done
flags; a reset's output the observations, the done flags, then the state (each group in its
spec's order, a nested group where its first leaf falls). The same rule orders the entries of
each nested level (a multi-agent group's observations, rewards, done flags). Entries outside
the specs follow, in the order they came.
"""

from __future__ import annotations

from tensordict import TensorDict, TensorDictBase

from rlspecs import Composite
from rlspecs.private_apis import td_entries, td_is_locked

__all__ = ["KeyOrder", "in_order", "root_order"]

MAX_LAYOUTS = 64  # layouts remembered per KeyOrder (an env returns one or a few)


class KeyOrder(tuple):
    """The keys of one level, in order, with ``nested``: the order of each nested level's keys,
    and ``moves``: for each layout of entries met, the keys ``in_order`` moves (its cache)."""

    nested: dict[str, KeyOrder]
    moves: dict[tuple[str, ...], tuple[str, ...]]


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
    keys.moves = {}
    return keys


def in_order(td: TensorDictBase, order: tuple[str, ...]) -> TensorDictBase:
    """Puts the entries of ``td`` (a plain, unlocked tensordict) in ``order``, in place (at
    each nested level too when ``order`` is a ``KeyOrder``).

    The entries that already start the order stay where they are; the others are moved to the
    end, in order (spec keys first, then the rest as they came). Which ones move depends only
    on the keys ``td`` holds and their order, so a ``KeyOrder`` remembers it per layout: an env
    that returns the same keys every step pays one lookup, not a rebuild of the entries.

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
    if keys[: len(order)] == order:
        return td
    moves = getattr(order, "moves", None)
    if moves is None:
        move = _moves(keys, order)
    else:
        move = moves.get(keys)
        if move is None:
            if len(moves) >= MAX_LAYOUTS:  # an env whose keys vary without end
                moves.clear()
            move = moves[keys] = _moves(keys, order)
    if move and not td_is_locked(td):
        pop = entries.pop
        for key in move:
            entries[key] = pop(key)
    return td


def _moves(keys: tuple[str, ...], order: tuple[str, ...]) -> tuple[str, ...]:
    """The keys to move to the end, in turn, so that ``keys`` read in ``order`` (spec keys
    first, in ``order``; then the others as they came)."""
    kept = 0
    for key, wanted in zip(keys, order):
        if key != wanted:
            break
        kept += 1
    present = set(keys)
    spec_keys = [key for key in order[kept:] if key in present]
    taken = set(order)
    rest = [key for key in keys[kept:] if key not in taken]
    move = (*spec_keys, *rest)
    # those already in place at the start of the tail stay (a key missing from the order)
    start = 0
    for key, wanted in zip(keys[kept:], move):
        if key != wanted:
            break
        start += 1
    return move[start:]

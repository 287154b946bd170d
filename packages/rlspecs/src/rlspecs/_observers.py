"""Change callbacks on specs: who is told when a spec's entries, shape, dtype or device change.

A spec carries the callbacks observing it in ``spec.__dict__["_on_change"]`` (a tuple; absent
when none). ``observe`` attaches a callback to a spec and to every spec inside it (entries of a
``Composite``, members of a lazy stack); a spec put into an observed ``Composite`` gets that
composite's callbacks, so a whole tree stays observed as it grows.

What calls them (``callback(spec)``, after the change):

- ``Composite``: setting an entry (``set``, ``[...] =``, ``update``, creating an intermediate
  composite), deleting one (``del``, ``pop``), ``clear_device_``;
- any spec, leaves included: assigning ``shape``, ``dtype`` or ``device``.

What does not: changing the values of a spec's tensors in place (``spec.space.low += 1``),
other attributes (an action mask's ``update_mask``), or a spec that was never attached to an
observed tree. Copies (``clone``, ``to``, ``expand``, indexing...) and pickles carry no
callbacks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = [
    "TRACKED_ATTRIBUTES",
    "Observable",
    "adopt",
    "attribute_changed",
    "notify",
    "observe",
    "unobserve",
]

# leaf and composite attributes whose assignment counts as a change
TRACKED_ATTRIBUTES = frozenset({"shape", "dtype", "device"})

_KEY = "_on_change"


def _parts(spec: Any) -> Iterable[Any]:
    """The specs held by ``spec``: a lazy stack's members, a composite's entries, else none."""
    state = spec.__dict__
    members = state.get("_members")
    if members is not None:
        return members
    entries = state.get("_specs")
    if entries is not None:
        return [entry for entry in entries.values() if entry is not None]
    return ()


def _walk(spec: Any) -> list[Any]:
    """``spec`` and every spec inside it, each once."""
    seen: set[int] = set()
    out = []
    stack = [spec]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        out.append(node)
        stack.extend(_parts(node))
    return out


def observe(spec: Any, callback: Callable[[Any], Any]) -> None:
    """Attach ``callback`` to ``spec`` and to every spec inside it (once each)."""
    for node in _walk(spec):
        callbacks = node.__dict__.get(_KEY, ())
        if callback not in callbacks:
            node.__dict__[_KEY] = (*callbacks, callback)


def unobserve(spec: Any, callback: Callable[[Any], Any]) -> None:
    """Detach ``callback`` from ``spec`` and from every spec inside it."""
    for node in _walk(spec):
        callbacks = node.__dict__.get(_KEY, ())
        if callback in callbacks:
            kept = tuple(c for c in callbacks if c is not callback)
            if kept:
                node.__dict__[_KEY] = kept
            else:
                del node.__dict__[_KEY]


def adopt(parent: Any, child: Any) -> None:
    """Give ``child`` (just put inside ``parent``) the callbacks observing ``parent``."""
    for callback in parent.__dict__.get(_KEY, ()):
        observe(child, callback)


def notify(spec: Any) -> None:
    """Call the callbacks observing ``spec`` (a no-op when there are none)."""
    for callback in spec.__dict__.get(_KEY, ()):
        callback(spec)


def attribute_changed(spec: Any) -> None:
    """After a tracked attribute of an observed ``spec`` changed: re-attach, then notify.

    Re-attaching covers specs that the assignment replaced inside ``spec`` (moving a composite
    to a device replaces its entries).
    """
    for callback in spec.__dict__.get(_KEY, ()):
        observe(spec, callback)
    notify(spec)


class Observable:
    """The ``observe_``/``unobserve_``/``observers`` API of a tree of specs (``Composite``'s)."""

    def observe_(self, callback: Callable[[Any], object]) -> Any:
        """Call ``callback(spec)`` after every change in this tree; returns ``self``.

        A change is: an entry set (``set``, ``[...] =``, ``update``) or deleted (``del``,
        ``pop``) in this composite or any composite inside it, a ``shape``, ``dtype`` or
        ``device`` assigned to any spec inside it (leaves included), or ``clear_device_``.
        ``spec`` is the spec that changed. Specs added later are observed too. Not tracked:
        in-place changes of a spec's tensors (bounds, masks). Copies (``clone``, ``to``,
        indexing...) and pickles do not carry the callback. A callback is attached once,
        however often it is given.

        Examples:
            >>> import torch
            >>> from rlspecs import Composite, Unbounded
            >>> spec = Composite(obs=Composite(x=Unbounded(3)))
            >>> changed = []
            >>> _ = spec.observe_(lambda s: changed.append(s))
            >>> spec["obs", "y"] = Unbounded(2)
            >>> spec["obs", "x"].dtype = torch.float64
            >>> del spec["obs"]
            >>> len(changed)
            3
            >>> spec.clone().observers
            ()
        """
        observe(self, callback)
        return self

    def unobserve_(self, callback: Callable[[Any], object]) -> Any:
        """Stop calling ``callback`` (attached with ``observe_``) for this tree; returns ``self``.

        Examples:
            >>> from rlspecs import Composite
            >>> def callback(spec):
            ...     pass
            >>> spec = Composite().observe_(callback).unobserve_(callback)
            >>> spec.observers
            ()
        """
        unobserve(self, callback)
        return self

    @property
    def observers(self) -> tuple[Callable[[Any], object], ...]:
        """The callbacks attached with ``observe_`` (to this composite or a parent)."""
        return self.__dict__.get("_on_change", ())

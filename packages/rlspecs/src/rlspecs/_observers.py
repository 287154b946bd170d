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

__all__ = ["TRACKED_ATTRIBUTES", "adopt", "attribute_changed", "notify", "observe", "unobserve"]

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

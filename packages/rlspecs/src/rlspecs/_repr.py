"""Reprs of composites and lazy stacks, in torchrl's layouts (0.4's unless ``set_spec_api``).

Class names are rlspecs' (``Composite``, ``StackedComposite``); the layout is torchrl's:

- ``Composite``, torchrl 0.4: ``Composite(\\n    key: <spec>,\\n    key: <spec>, device=..., shape=...)``
  (current torchrl: the device, shape and ``data_cls`` on lines of their own);
- ``StackedComposite``: ``fields`` (the shared keys), ``exclusive_fields`` (per member), then
  ``device``, ``shape`` and ``stack_dim``;
- ``Stacked``: ``LazyStacked<member class>(\\n    shape=..., device=..., dtype=..., domain=...)``
  (``Stacked<member class>`` for current torchrl).
"""

from __future__ import annotations

from textwrap import indent
from typing import Any

from ._api import is_current


def _entry(key: Any, spec: Any) -> str:
    return indent(f"{key}: {spec!r}", " " * 4)


def composite_repr(spec: Any) -> str:
    """The repr of a ``Composite``."""
    name = type(spec).__name__
    entries = [_entry(key, value) for key, value in spec._specs.items()]
    if is_current():
        tail = [f"device={spec._device}", f"shape={spec.shape}", "data_cls=None"]
        if not entries:
            return f"{name}({', '.join(tail)})"
        lines = ",\n".join([*entries, *(indent(t, " " * 4) for t in tail)])
        return f"{name}(\n{lines})"
    body = ",\n".join(entries)
    return f"{name}(\n{body}, device={spec._device}, shape={spec.shape})"


def stacked_composite_repr(spec: Any) -> str:
    """The repr of a ``StackedComposite``: shared fields, then each member's own fields."""
    shared = list(spec.keys())
    fields = ",\n".join(_entry(key, spec[key]) for key in shared)
    exclusive = []
    for i, member in enumerate(spec.members):
        own = ",\n".join(_entry(k, member[k]) for k in member.keys() if k not in shared)
        if own:
            exclusive.append(indent(f"{i} ->\n{own}", " " * 4))
    parts = [
        indent(f"fields={{\n{fields}}}", " " * 4),
        indent("exclusive_fields={\n" + ",\n".join(exclusive) + "}", " " * 4),
        indent(f"device={spec.members[0].device}", " " * 4),
        indent(f"shape={spec.shape}", " " * 4),
        indent(f"stack_dim={spec.dim}", " " * 4),
    ]
    return f"{type(spec).__name__}(\n" + ",\n".join(parts) + ")"


def stacked_repr(spec: Any) -> str:
    """The repr of a lazy stack of leaves."""
    first = spec.members[0]
    prefix = "Stacked" if is_current() else "LazyStacked"
    fields = f"shape={spec.shape}, device={spec.device}, dtype={spec.dtype}, domain={first.domain}"
    return f"{prefix}{type(first).__name__}(\n    {fields})"

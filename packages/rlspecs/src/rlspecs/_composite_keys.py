"""The live view ``Composite.keys()`` returns (``in``, ``len`` and iteration over nested keys)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ._keys import NestedKey, is_nested_key, unravel_key

_MISSING = object()


class _CompositeKeys:
    """A live view of a composite's keys (supports ``in``, ``len`` and iteration).

    Examples:
        >>> from rlspecs import Composite, Unbounded
        >>> keys = Composite(a=Composite(b=Unbounded(1))).keys(True, True)
        >>> ("a", "b") in keys, "a" in keys, len(keys)
        (True, False, 1)
    """

    __slots__ = ("_spec", "_nested", "_leaves")

    def __init__(self, spec: Any, include_nested: bool, leaves_only: bool) -> None:
        self._spec, self._nested, self._leaves = spec, include_nested, leaves_only

    def __iter__(self) -> Iterator[NestedKey]:
        return self._spec._iter_keys(self._nested, self._leaves, ())

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        if not is_nested_key(key):
            return False
        path = unravel_key(key)
        if len(path) > 1 and not self._nested:
            return False
        spec = self._spec._lookup(path, _MISSING)
        if spec is _MISSING:
            return False
        # composites (and lazy stacks of them) are the specs that have keys of their own
        return not (self._leaves and hasattr(spec, "_iter_keys"))

    def __repr__(self) -> str:
        return f"_CompositeKeys({list(self)})"

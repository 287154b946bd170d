"""Nested keys: a string, or a tuple of strings (possibly nested tuples) naming a path."""

from __future__ import annotations

from typing import Any

NestedKey = str | tuple  # a str or a (nested) tuple of str

BAD_KEY = "a key must be a str or a non-empty tuple of str, got {key!r}"


def is_nested_key(key: Any) -> bool:
    """Whether ``key`` is a str or a non-empty (nested) tuple of str.

    Examples:
        >>> is_nested_key(("a", ("b", "c")))
        True
        >>> is_nested_key(0)
        False
    """
    if isinstance(key, str):
        return True
    return isinstance(key, tuple) and len(key) > 0 and all(is_nested_key(k) for k in key)


def unravel_key(key: NestedKey) -> tuple[str, ...]:
    """Flatten a nested key into a tuple of str.

    Examples:
        >>> unravel_key(("a", ("b", "c")))
        ('a', 'b', 'c')
        >>> unravel_key("a")
        ('a',)
    """
    if isinstance(key, str):
        return (key,)
    if not is_nested_key(key):
        raise KeyError(BAD_KEY.format(key=key))
    out: list[str] = []
    for part in key:
        out.extend(unravel_key(part))
    return tuple(out)

"""The errors rlcore raises about environments (one family under ``EnvError``).

Each also derives from the built-in type code catching it has always caught.
"""

from __future__ import annotations

__all__ = ["EnvClosedError", "EnvError"]


class EnvError(Exception):
    """The root of rlcore's environment errors.

    Examples:
        >>> issubclass(EnvClosedError, EnvError)
        True
    """


class EnvClosedError(EnvError, RuntimeError):
    """An env was stepped after ``close()`` (or after losing a worker) without a ``reset()``.

    Examples:
        >>> isinstance(EnvClosedError("closed"), RuntimeError)
        True
    """

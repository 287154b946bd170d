"""Exceptions raised by specs where torchrl 0.4 and rlspecs' earlier releases used different types.

Each class derives from every built-in type that code written against either raised, so an
``except ValueError`` written for rlspecs and an ``except RuntimeError`` written for torchrl
both catch it (the pattern of numpy's ``AxisError``, a ``ValueError`` and an ``IndexError``).
"""

from __future__ import annotations


class SpecShapeError(ValueError, RuntimeError):
    """A value or a spec has a shape that does not fit (``ValueError`` and ``RuntimeError``).

    Examples:
        >>> from rlspecs import Unbounded
        >>> try:
        ...     Unbounded(3).encode([1.0, 2.0])
        ... except RuntimeError as err:
        ...     print(type(err).__name__)
        SpecShapeError
    """


class SpecStackError(RuntimeError, ValueError, TypeError):
    """Specs that cannot be stacked together (``RuntimeError``, ``ValueError`` and ``TypeError``).

    Examples:
        >>> import torch
        >>> from rlspecs import Unbounded
        >>> try:
        ...     torch.stack([Unbounded(3), Unbounded(3, dtype=torch.int64)], 0)
        ... except RuntimeError as err:
        ...     print(str(err).split(",")[0])
        Dtypes differ
    """


class SpecKeyTypeError(TypeError, ValueError):
    """A ``Composite`` key that is neither a str nor a tuple of str (``TypeError``, ``ValueError``).

    Examples:
        >>> from rlspecs import Composite, Unbounded
        >>> try:
        ...     Composite()[0] = Unbounded(3)
        ... except TypeError as err:
        ...     print(type(err).__name__)
        SpecKeyTypeError
    """


__all__ = ["SpecKeyTypeError", "SpecShapeError", "SpecStackError"]

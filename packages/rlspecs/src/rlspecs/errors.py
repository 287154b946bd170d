"""The errors rlspecs raises about specs (one family under ``SpecError``).

Each class also derives from every built-in type that code written against torchrl 0.4 or
rlspecs' earlier releases caught, so an ``except ValueError`` written for rlspecs and an
``except RuntimeError`` written for torchrl both catch it (the pattern of numpy's
``AxisError``, a ``ValueError`` and an ``IndexError``).
"""

from __future__ import annotations

__all__ = ["SpecDomainError", "SpecError", "SpecKeyTypeError", "SpecShapeError", "SpecStackError"]


class SpecError(Exception):
    """The root of rlspecs' errors.

    Examples:
        >>> issubclass(SpecShapeError, SpecError), issubclass(SpecShapeError, ValueError)
        (True, True)
    """


class SpecShapeError(SpecError, ValueError, RuntimeError):
    """A value or a spec has a shape that does not fit (``ValueError`` and ``RuntimeError``).

    Examples:
        >>> from rlspecs import Unbounded
        >>> try:
        ...     Unbounded(3).encode([1.0, 2.0])
        ... except RuntimeError as err:
        ...     print(type(err).__name__)
        SpecShapeError
    """


class SpecStackError(SpecError, RuntimeError, ValueError, TypeError):
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


class SpecKeyTypeError(SpecError, TypeError, ValueError, RuntimeError):
    """A ``Composite`` key that is neither a str nor a tuple of str.

    A ``TypeError`` and a ``ValueError`` (what rlspecs raised before) and a ``RuntimeError``
    (what torchrl raises for an integer key set into a lazy stack of composites).

    Examples:
        >>> from rlspecs import Composite, Unbounded
        >>> try:
        ...     Composite()[0] = Unbounded(3)
        ... except TypeError as err:
        ...     print(type(err).__name__)
        SpecKeyTypeError
    """


class SpecDomainError(SpecError, ValueError, RuntimeError):
    """A value outside a spec's domain, such as a label past the last category.

    A ``ValueError`` (what rlspecs raised before) and a ``RuntimeError`` (what torchrl raises).

    Examples:
        >>> from rlspecs import MultiOneHot
        >>> try:
        ...     MultiOneHot([2, 3]).encode([0, 3])
        ... except RuntimeError as err:
        ...     print(type(err).__name__)
        SpecDomainError
    """


__all__ = ["SpecDomainError", "SpecKeyTypeError", "SpecShapeError", "SpecStackError"]

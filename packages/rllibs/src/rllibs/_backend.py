"""``gym_backend`` and ``set_gym_backend``: torchrl 0.4's backend switch, with gymnasium the one backend."""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from ._extras import import_optional

__all__ = ["gym_backend", "set_gym_backend"]

BACKEND = "gymnasium"
UNSUPPORTED_BACKEND = (
    "rllibs wraps gymnasium only: the gym backend {backend!r} is not supported; use "
    'set_gym_backend("gymnasium") (or leave the backend unset)'
)
BAD_SUBMODULE = "gym_backend({submodule!r}): gymnasium has no submodule {submodule!r}"


def gym_backend(submodule: str | None = None) -> ModuleType:
    """Return gymnasium, or one of its submodules (``gym_backend("spaces")``).

    Raises an ``ImportError`` naming the ``rllibs[gym]`` extra and its pip command when gymnasium
    is missing.

    Examples:
        >>> gym_backend().__name__, gym_backend("spaces").__name__
        ('gymnasium', 'gymnasium.spaces')
    """
    gym = import_optional(BACKEND, "gym", "gym_backend()")
    if submodule is None:
        return gym
    try:
        return importlib.import_module(f"{BACKEND}.{submodule.lstrip('.')}")
    except ModuleNotFoundError as err:
        raise ImportError(BAD_SUBMODULE.format(submodule=submodule)) from err


def _backend_name(backend: Any) -> str:
    if isinstance(backend, ModuleType):
        return backend.__name__
    if isinstance(backend, str):
        return backend
    return repr(backend)


class set_gym_backend(contextlib.ContextDecorator):  # noqa: N801 (torchrl 0.4's public name)
    """Select the gym backend, as a context manager or a decorator; gymnasium is the one we support.

    ``backend`` is ``"gymnasium"``, the gymnasium module, or a callable returning it (checked
    when the context is entered). Any other backend (``"gym"``, ``gym``, ...) raises an
    ``ImportError`` saying that only gymnasium is supported: code written for torchrl's switch
    between gym and gymnasium runs unchanged with gymnasium and fails clearly otherwise.

    Examples:
        >>> with set_gym_backend("gymnasium"):
        ...     gym_backend().__name__
        'gymnasium'
        >>> @set_gym_backend("gymnasium")
        ... def make():
        ...     return gym_backend().make("CartPole-v1")
        >>> make().spec.id
        'CartPole-v1'
    """

    def __init__(self, backend: str | ModuleType | Callable[[], ModuleType]) -> None:
        if not callable(backend) or isinstance(backend, ModuleType):
            self._check(backend)
        self._backend = backend

    @staticmethod
    def _check(backend: Any) -> None:
        if _backend_name(backend) != BACKEND:
            raise ImportError(UNSUPPORTED_BACKEND.format(backend=_backend_name(backend)))

    @property
    def backend(self) -> ModuleType:
        """The backend module (a callable given at construction is called and checked here)."""
        backend = self._backend
        if callable(backend) and not isinstance(backend, ModuleType):
            backend = backend()
            self._check(backend)
        if isinstance(backend, str):
            return gym_backend()
        return backend

    def set(self) -> None:
        """Select the backend for the rest of the program (a check: gymnasium is always selected)."""
        self.backend  # noqa: B018 - resolving the backend is the check

    def clone(self) -> set_gym_backend:
        """A new context manager for the same backend (torchrl's decorator protocol)."""
        return type(self)(self._backend)

    def __enter__(self) -> set_gym_backend:
        self.set()
        return self

    def __exit__(self, *exc: object) -> None:
        return None

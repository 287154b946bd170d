"""``gym_backend`` and ``set_gym_backend``: torchrl 0.4's backend switch, with gymnasium the one backend."""

from __future__ import annotations

import functools
import importlib
import inspect
import warnings
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
CLASS_DECORATED = (
    "Decorating classes is deprecated: set_gym_backend turns the class {name} into a function "
    "that builds it inside the backend's context; decorate {name}.__init__ (or the functions "
    "that use the backend) instead"
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


class set_gym_backend:  # noqa: N801 (torchrl 0.4's public name)
    """Select the gym backend, as a context manager or a decorator; gymnasium is the one we support.

    ``backend`` is ``"gymnasium"``, the gymnasium module, or a callable returning it. As in
    torchrl 0.4 nothing is checked when the switch is made: the backend is resolved and checked
    when it is used, that is when the context is entered, when ``set()`` or ``backend`` is
    called, or when a decorated function is called. Any other backend (``"gym"``, ``gym``, ...)
    then raises an ``ImportError`` saying that only gymnasium is supported, so a module that
    decorates its functions with ``set_gym_backend("gym")`` still imports, and fails clearly
    where the backend is needed.

    As a decorator it enters a fresh copy of itself (``clone()``) around each call; a generator
    function is checked when it first runs. Decorating a class (torchrl 0.4, as torch's context
    managers, allowed it) warns with a ``FutureWarning`` and gives a function that builds the
    class inside the context.

    Examples:
        >>> with set_gym_backend("gymnasium"):
        ...     gym_backend().__name__
        'gymnasium'
        >>> @set_gym_backend("gymnasium")
        ... def make():
        ...     return gym_backend().make("CartPole-v1")
        >>> make().spec.id
        'CartPole-v1'
        >>> @set_gym_backend("gym")  # defining it is fine, calling it is not
        ... def make_with_gym():
        ...     return gym_backend().make("CartPole-v1")
        >>> make_with_gym()
        Traceback (most recent call last):
        ...
        ImportError: rllibs wraps gymnasium only: the gym backend 'gym' is not supported; ...
    """

    def __init__(self, backend: str | ModuleType | Callable[[], ModuleType]) -> None:
        self._backend = backend

    @property
    def backend(self) -> ModuleType:
        """The backend module, resolved (a callable is called) and checked on each access."""
        backend = self._backend
        if callable(backend) and not isinstance(backend, ModuleType):
            backend = backend()
        if _backend_name(backend) != BACKEND:
            raise ImportError(UNSUPPORTED_BACKEND.format(backend=_backend_name(backend)))
        if isinstance(backend, str):
            return gym_backend()
        return backend

    @backend.setter
    def backend(self, value: str | ModuleType | Callable[[], ModuleType]) -> None:
        self._backend = value

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

    def __call__(self, func: Callable[..., Any]) -> Callable[..., Any]:
        """Decorate ``func``: each call runs inside a fresh copy of this context."""
        if inspect.isclass(func):
            warnings.warn(CLASS_DECORATED.format(name=func.__name__), FutureWarning, stacklevel=2)
            cls = func

            def func(*args: Any, **kwargs: Any) -> Any:
                return cls(*args, **kwargs)

            functools.update_wrapper(func, cls, updated=())
        if inspect.isgeneratorfunction(func):
            generator_function = func

            @functools.wraps(generator_function)
            def generator(*args: Any, **kwargs: Any) -> Any:
                with self.clone():
                    return (yield from generator_function(*args, **kwargs))

            return generator

        @functools.wraps(func)
        def call(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return func(*args, **kwargs)

        return call

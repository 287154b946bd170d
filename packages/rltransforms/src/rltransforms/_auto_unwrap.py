"""Whether wrapping a `TransformedEnv` in another unwraps it: the process-wide switch.

`set_auto_unwrap_transformed_env(mode)` sets it (a context manager, a decorator, or `.set()`
for the rest of the process) and `auto_unwrap_transformed_env()` reads it, as in current
torchrl. The switch lives in the environment variable ``AUTO_UNWRAP_TRANSFORMED_ENV`` too: it
is read when this module is imported and written whenever the switch changes, so processes
started later (spawned workers of a `ParallelEnv`, a collector's workers) see the same value.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import Any, TypeVar

from rlcore.env_flags import truth_value

__all__ = ["ENV_VAR", "auto_unwrap_transformed_env", "set_auto_unwrap_transformed_env"]

ENV_VAR = "AUTO_UNWRAP_TRANSFORMED_ENV"
_DEFAULT = False  # unset: torchrl 0.4's nesting (the seed era); current torchrl unwraps
MODE_TYPE_ERROR = (
    "set_auto_unwrap_transformed_env(mode) takes a bool (True: unwrap nested TransformedEnvs, "
    "False: keep them nested), got {value!r} of type {type}"
)

# None: never set (nor in the environment); a str: as read from the environment; a bool: set
_state: dict[str, bool | str | None] = {"mode": os.environ.get(ENV_VAR)}

F = TypeVar("F", bound=Callable[..., Any])


def _as_bool(value: bool | str) -> bool:
    if isinstance(value, bool):
        return value
    return truth_value(ENV_VAR, value)


def _write(mode: bool | str | None) -> None:
    """Record ``mode`` in this process and in the environment (unset: the variable removed)."""
    _state["mode"] = mode
    if mode is None:
        # restoring the unset state removes the variable: a later child process must see
        # "never set" too, not a value it cannot parse
        os.environ.pop(ENV_VAR, None)
    else:
        os.environ[ENV_VAR] = str(mode)


def auto_unwrap_transformed_env(allow_none: bool = False) -> bool | None:
    """Whether `TransformedEnv(TransformedEnv(...), ...)` unwraps the inner env.

    Args:
        allow_none: return None when the switch was never set (neither by
            `set_auto_unwrap_transformed_env` nor by ``AUTO_UNWRAP_TRANSFORMED_ENV``); otherwise
            the default, False (torchrl 0.4 nested; current torchrl unwraps), is returned then.

    Raises:
        ValueError: ``AUTO_UNWRAP_TRANSFORMED_ENV`` holds no truth value (``"true"``, ``"0"``,
            ``"off"``, ...).

    Examples:
        >>> with set_auto_unwrap_transformed_env(False):
        ...     auto_unwrap_transformed_env()
        False
    """
    mode = _state["mode"]
    if mode is None:
        return None if allow_none else _DEFAULT
    return _as_bool(mode)


class set_auto_unwrap_transformed_env:  # noqa: N801 - torchrl's name
    """Sets whether wrapping a `TransformedEnv` in another one unwraps it (current torchrl's).

    When on, `TransformedEnv(TransformedEnv(base, t1), t2)` is one env over ``base`` running
    ``t1`` then ``t2``; when off, the inner env stays as the outer one's base env (torchrl 0.4
    always nested). Left unset, envs nest as in torchrl 0.4 (current torchrl unwraps and warns
    then). A `TransformedEnv`'s own ``auto_unwrap`` argument wins over this switch.

    Use it as a context manager or a decorator (the previous state, unset included, is restored
    on exit), or call ``.set()`` to set it for the rest of the process. The value is also
    written to the environment variable ``AUTO_UNWRAP_TRANSFORMED_ENV`` so that processes
    started afterwards (spawned workers) see it; setting that variable before the process
    starts has the same effect.

    Args:
        mode: True to unwrap nested `TransformedEnv`s, False to keep them nested.

    Raises:
        TypeError: ``mode`` is not a bool.

    Examples:
        >>> from rlmocks import CountingEnv
        >>> from rltransforms import StepCounter, TransformedEnv
        >>> inner = TransformedEnv(CountingEnv(), StepCounter())
        >>> with set_auto_unwrap_transformed_env(False):
        ...     type(TransformedEnv(inner).base_env).__name__
        'TransformedEnv'
        >>> @set_auto_unwrap_transformed_env(True)
        ... def wrap(env):
        ...     return TransformedEnv(env)
        >>> type(wrap(inner).base_env).__name__
        'CountingEnv'
    """

    def __init__(self, mode: bool) -> None:
        if not isinstance(mode, bool):
            raise TypeError(MODE_TYPE_ERROR.format(value=mode, type=type(mode).__name__))
        self.mode = mode
        self._previous: list[bool | str | None] = []

    def clone(self) -> set_auto_unwrap_transformed_env:
        """A fresh switch with the same mode (each decorated call uses its own)."""
        return type(self)(self.mode)

    def set(self) -> None:
        """Set the switch now, for the rest of the process (or until the enclosing `with` ends)."""
        self._previous.append(_state["mode"])
        _write(self.mode)

    def __enter__(self) -> None:
        self.set()

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        _write(self._previous.pop())

    def __call__(self, func: F) -> F:
        """Decorate ``func``: every call runs with the switch set, then restores it."""
        if not callable(func):
            raise TypeError(
                f"set_auto_unwrap_transformed_env decorates a callable, got {type(func).__name__}"
            )

        @functools.wraps(func)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            with self.clone():
                return func(*args, **kwargs)

        return wrapped  # type: ignore[return-value]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(mode={self.mode})"

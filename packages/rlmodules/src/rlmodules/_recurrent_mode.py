"""Whether recurrent modules run step by step or over whole sequences (``set_recurrent_mode``).

``LSTMModule`` and ``GRUModule`` read this mode at each call: ``True`` (recurrent) means the
last batch dim of the input is time and the whole sequence is processed at once (losses,
advantage estimation); ``False`` (sequential) means each element is one step (rollouts).
``None``, the default, leaves each module's ``default_recurrent_mode`` in charge.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar, Token
from typing import Literal

__all__ = ["recurrent_mode", "set_recurrent_mode"]

_BAD_MODE = (
    "Unsupported recurrent mode {mode!r}. Must be a bool, None, or one of "
    "('recurrent', 'sequential')."
)

_MODE: ContextVar[bool | None] = ContextVar("rlmodules_recurrent_mode", default=None)


def recurrent_mode() -> bool | None:
    """The recurrent mode set by the innermost ``set_recurrent_mode``, or ``None``.

    Examples:
        >>> from rlmodules import recurrent_mode, set_recurrent_mode
        >>> recurrent_mode() is None
        True
        >>> with set_recurrent_mode("recurrent"):
        ...     recurrent_mode()
        True
    """
    return _MODE.get()


class set_recurrent_mode(contextlib.ContextDecorator):  # lower case: torchrl's name
    """Context manager and decorator setting the mode of every recurrent module inside it.

    Args:
        mode: ``True`` or ``"recurrent"`` (sequences), ``False`` or ``"sequential"`` (single
            steps), ``None`` (each module's default). ``True`` by default.

    Raises:
        ValueError: for any other value.

    Examples:
        >>> from rlmodules import recurrent_mode, set_recurrent_mode
        >>> @set_recurrent_mode(False)
        ... def rollout_mode():
        ...     return recurrent_mode()
        >>> with set_recurrent_mode():
        ...     (recurrent_mode(), rollout_mode())
        (True, False)
    """

    def __init__(self, mode: bool | Literal["recurrent", "sequential"] | None = True) -> None:
        if isinstance(mode, str) and mode.lower() in ("recurrent", "sequential"):
            mode = mode.lower() == "recurrent"
        elif mode is not None and not isinstance(mode, bool):
            raise ValueError(_BAD_MODE.format(mode=mode))
        self.mode = mode
        self._tokens: list[Token] = []

    def clone(self) -> set_recurrent_mode:
        """A fresh context manager with the same mode."""
        return type(self)(self.mode)

    def _recreate_cm(self) -> set_recurrent_mode:
        # each decorated call gets its own manager, so that recursion and threads nest well
        return self.clone()

    def __enter__(self) -> None:
        self._tokens.append(_MODE.set(self.mode))

    def __exit__(self, *exc_info: object) -> None:
        _MODE.reset(self._tokens.pop())

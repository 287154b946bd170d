"""Crossing into worker processes: ``CloudpickleBox`` and ``clean_worker_environ``."""

from __future__ import annotations

import os
from typing import Any

import cloudpickle

__all__ = ["CloudpickleBox", "clean_worker_environ"]


def clean_worker_environ() -> None:
    """Remove inherited environment values that break a worker process; call before starting one.

    tensordict 0.14's ``set_lazy_legacy`` (used by ``TensorDict.from_modules`` and
    ``torch.stack``) writes ``LAZY_LEGACY_OP=None`` into ``os.environ`` on exit when no mode was
    set before. A spawned worker inherits it, and its first lazy-legacy query raises
    ``ValueError: invalid truth value 'none'``. Unset means what ``None`` meant: the default.

    Examples:
        >>> import os
        >>> os.environ["LAZY_LEGACY_OP"] = "None"
        >>> clean_worker_environ()
        >>> "LAZY_LEGACY_OP" in os.environ
        False
    """
    if os.environ.get("LAZY_LEGACY_OP") == "None":
        del os.environ["LAZY_LEGACY_OP"]


class CloudpickleBox:
    """Carries any object through a pickling start method (spawn, forkserver) with cloudpickle.

    Plain pickle refuses lambdas, closures and classes defined in a function or a script;
    boxing them makes them travel by value. The receiving side reads ``box.obj``.

    Examples:
        >>> import pickle
        >>> box = pickle.loads(pickle.dumps(CloudpickleBox(lambda x: x + 1)))
        >>> box.obj(1)
        2
    """

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __reduce__(self):
        return _unbox, (cloudpickle.dumps(self.obj),)

    def __repr__(self) -> str:
        return f"CloudpickleBox({self.obj!r})"


def _unbox(payload: bytes) -> CloudpickleBox:
    return CloudpickleBox(cloudpickle.loads(payload))

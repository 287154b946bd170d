"""`CloudpickleBox`: ships lambdas, closures and local classes to spawned worker processes."""

from __future__ import annotations

from typing import Any

import cloudpickle

__all__ = ["CloudpickleBox"]


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

"""Shared-memory tensors that stay shared when they cross into a process being started.

Under `fork` a child inherits shared memory as is. Under `spawn` and `forkserver` the
process's arguments are pickled; torch registers its shared-memory reductions (handles to the
same memory) with `multiprocessing`'s `ForkingPickler` only, so anything pickled by another
pickler on the way (cloudpickle, which carries env factories) copies the values instead. An
object whose state goes through `keep_shared` is pickled with `ForkingPickler` at that point.
"""

from __future__ import annotations

import pickle
from multiprocessing import context
from multiprocessing.reduction import ForkingPickler
from typing import Any

__all__ = ["keep_shared", "starting_process"]


def starting_process() -> bool:
    """Whether the current pickling is that of a process being started (spawn, forkserver).

    Only then can handles to shared memory (file descriptors, semaphores) travel: the process
    start passes them on to the child.
    """
    return context.get_spawning_popen() is not None


class _ForkingPickled:
    """Pickled with `ForkingPickler` (shared tensors as handles); unpickles to the object."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __reduce__(self) -> tuple:
        return _forking_loads, (bytes(ForkingPickler.dumps(self.obj)),)


def _forking_loads(payload: bytes) -> Any:
    return pickle.loads(payload)


def keep_shared(obj: Any) -> Any:
    """What to put in a `__getstate__` so that shared tensors in `obj` stay shared in a new
    process: `obj` wrapped for `ForkingPickler` while a process is being started, else `obj`
    (a plain pickle, e.g. to disk, copies the values; an `mp.Queue` already shares them).

    Examples:
        >>> import torch
        >>> keep_shared(torch.zeros(2)).shape  # outside a process start: the object itself
        torch.Size([2])
    """
    if starting_process():
        return _ForkingPickled(obj)
    return obj

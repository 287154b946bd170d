"""A lock shared by the processes a transform is sent to when they start (VecNorm's and
TrajCounter's shared state)."""

from __future__ import annotations

import multiprocessing as mp
from typing import Any

from rlcore import starting_process

__all__ = ["_ProcessLock"]


class _ProcessLock:
    """A lock shared by the processes it is sent to when they start (fork, spawn, forkserver).

    Any other pickle (to disk, through a queue) gives a fresh lock, as locks cannot travel
    between running processes.
    """

    def __init__(self, lock: Any | None = None) -> None:
        # a spawn-context semaphore is named: it can also be handed to spawned workers
        self._lock = mp.get_context("spawn").Lock() if lock is None else lock

    def acquire(self, *args: Any, **kwargs: Any) -> bool:
        return self._lock.acquire(*args, **kwargs)

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> _ProcessLock:
        self._lock.acquire()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._lock.release()

    def __reduce__(self) -> tuple:
        if starting_process():
            return _ProcessLock, (self._lock,)
        return _ProcessLock, ()

"""Errors about worker processes, raised in the main process (one flat family, like gymnasium's).

``WorkerError`` (a ``RuntimeError``) is the base of what a worker pool raises about a worker:
it died (``WorkerDiedError``), it did not answer in time (``WorkerTimeoutError``), or it raised
an exception that cannot be re-raised with its own type (``WorkerRaisedError``).
"""

from __future__ import annotations

import signal
from typing import Any

__all__ = [
    "WorkerError",
    "WorkerDiedError",
    "WorkerTimeoutError",
    "WorkerRaisedError",
    "RemoteTraceback",
    "describe_exit",
]


def _rebuild(cls: type, args: tuple, state: dict) -> BaseException:
    err = cls.__new__(cls)
    err.args = args
    err.__dict__.update(state)
    return err


class WorkerError(RuntimeError):
    """A worker process failed; ``index``, ``pid`` and ``phase`` say which one and when.

    Examples:
        >>> err = WorkerError("worker 1 failed", index=1, pid=42, phase="step")
        >>> isinstance(err, RuntimeError), err.index, err.phase
        (True, 1, 'step')
    """

    def __init__(
        self,
        message: str,
        *,
        index: int | None = None,
        pid: int | None = None,
        phase: str | None = None,
    ) -> None:
        super().__init__(message)
        self.index = index
        self.pid = pid
        self.phase = phase

    def __reduce__(self) -> tuple[Any, ...]:
        # keyword-only attributes survive pickling (default exception pickling keeps args only)
        return _rebuild, (type(self), self.args, dict(self.__dict__))


class WorkerDiedError(WorkerError):
    """A worker process exited while the main process waited for it or wrote to it.

    ``exitcode`` is the process's exit code (negative: killed by signal ``-exitcode``, whose
    name is ``signal_name``), or None when it could not be read.

    Examples:
        >>> err = WorkerDiedError("gone", index=0, pid=7, phase="step", exitcode=-9)
        >>> err.signal_name
        'SIGKILL'
    """

    def __init__(self, message: str, *, exitcode: int | None = None, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.exitcode = exitcode

    @property
    def signal_name(self) -> str | None:
        """Name of the signal that killed the worker, or None when it exited by itself."""
        if self.exitcode is None or self.exitcode >= 0:
            return None
        try:
            return signal.Signals(-self.exitcode).name
        except ValueError:
            return f"signal {-self.exitcode}"


class WorkerTimeoutError(WorkerError):
    """A worker did not answer within ``seconds``; the pool stopped every worker.

    Examples:
        >>> WorkerTimeoutError("slow", index=2, phase="start", seconds=5.0).seconds
        5.0
    """

    def __init__(self, message: str, *, seconds: float, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.seconds = seconds


class WorkerRaisedError(WorkerError):
    """A worker raised an exception that cannot be re-raised with its own type here.

    The worker's exception is the ``__cause__``: the original when it could be unpickled,
    otherwise a ``RemoteTraceback`` carrying its type name, message and traceback text.

    Examples:
        >>> err = WorkerRaisedError("worker 0 raised", index=0, type_name="BadError")
        >>> err.type_name
        'BadError'
    """

    def __init__(self, message: str, *, type_name: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.type_name = type_name


class RemoteTraceback(Exception):
    """Stands for a worker's exception that could not be rebuilt in this process.

    Its message is the original type name, message and traceback text.

    Examples:
        >>> err = RemoteTraceback("KeyError", "'x'", "Traceback ...")
        >>> str(err).splitlines()[0]
        "KeyError: 'x'"
    """

    def __init__(self, type_name: str, message: str, traceback: str) -> None:
        super().__init__(f"{type_name}: {message}\n\nWorker traceback:\n{traceback}")
        self.type_name = type_name
        self.message = message
        self.traceback = traceback

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), (self.type_name, self.message, self.traceback)


def describe_exit(exitcode: int | None) -> str:
    """How a process ended, for error messages: ``exit code 3``, ``killed by SIGKILL``.

    Examples:
        >>> describe_exit(3), describe_exit(-9), describe_exit(None)
        ('exit code 3', 'killed by SIGKILL', 'exit code unknown')
    """
    if exitcode is None:
        return "exit code unknown"
    if exitcode >= 0:
        return f"exit code {exitcode}"
    name = WorkerDiedError("", exitcode=exitcode).signal_name
    return f"killed by {name}"

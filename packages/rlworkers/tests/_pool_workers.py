"""Worker functions for the worker-pool tests (module-level, so spawned workers import them)."""

from __future__ import annotations

import os
import signal
import threading
import time

from rlworkers import serve


class StrRaises(Exception):
    """An exception whose ``__str__`` raises."""

    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class TwoArgs(Exception):
    """Pickles, but cannot be unpickled (its args do not rebuild it)."""

    def __init__(self, a, b):
        super().__init__(f"{a}/{b}")


class HoldsLock(Exception):
    """Cannot be pickled at all."""

    def __init__(self, message):
        super().__init__(message)
        self.lock = threading.Lock()


class _LoadFails:
    """A value that pickles in the worker and fails to unpickle in the main process."""

    def __reduce__(self):
        return _explode, ()


def _explode():
    raise ValueError("cannot rebuild this value")


def _raise(kind: str):
    errors = {
        "value": ValueError("bad value"),
        "str": StrRaises(),
        "twoargs": TwoArgs(1, 2),
        "lock": HoldsLock("holds a lock"),
        "exit": SystemExit(5),
    }
    raise errors[kind]


def _wait_for_file(path: str) -> str:
    """Returns ``path`` once that file exists: a reply a test holds back as long as it needs."""
    deadline = time.monotonic() + 120
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} was never created")
        time.sleep(0.005)
    return path


HANDLERS = {
    "echo": lambda value: value,
    "pid": lambda _: os.getpid(),
    "ppid": lambda _: os.getppid(),
    "sleep": lambda seconds: (time.sleep(seconds), seconds)[1],
    "wait_for_file": _wait_for_file,
    "raise": _raise,
    "exit": lambda code: os._exit(code),
    "unpicklable": lambda _: threading.Lock(),
    "load_fails": lambda _: _LoadFails(),
}


def echo_worker(conn) -> None:
    """Serves ``HANDLERS``."""
    serve(conn, lambda: HANDLERS, hot={b"p": "pid"})


def hanging_setup_worker(conn) -> None:
    """Never finishes starting."""
    serve(conn, lambda: time.sleep(3600))


def failing_setup_worker(conn) -> None:
    """Fails to start."""

    def setup():
        raise KeyError("no such task")

    serve(conn, setup)


def segfault_setup_worker(conn) -> None:
    """Crashes natively while starting (as a simulator binding would)."""

    def setup():
        os.kill(os.getpid(), signal.SIGSEGV)

    serve(conn, setup)


def slow_setup_worker(conn, seconds: float) -> None:
    """Takes ``seconds`` to start, then serves ``HANDLERS``."""

    def setup():
        time.sleep(seconds)
        return HANDLERS

    serve(conn, setup)


def start_value_worker(conn) -> None:
    """Answers its start with its pid (a ``"start"`` handler), then serves ``HANDLERS``."""
    serve(conn, lambda: {**HANDLERS, "start": lambda _: os.getpid()})


def boxed_setup_worker(conn, box) -> None:
    """Serves with the setup function carried by ``box`` (a ``CloudpickleBox``)."""
    serve(conn, box.obj)

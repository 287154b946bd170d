"""The worker side of a worker pool: the process entry point and the command loop.

``worker_main`` is the target of every pool process: it makes the worker ignore Ctrl-C (the
main process handles it), closes the pipe ends it inherited from the main process under
``fork``, and makes sure the worker exits soon after the main process dies. ``serve`` is the
loop a worker function runs: build its state once, then answer each command with one reply.
"""

from __future__ import annotations

import ctypes
import os
import pickle
import select
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Mapping
from typing import Any

from ._worker_protocol import CAN_SPIN, CLOSE, OK, SYNC, SYNCED, VALUE, encode_error, wait_briefly

__all__ = ["serve", "worker_main", "PARENT_ENDS"]

UNKNOWN_COMMAND = "unknown worker command {command!r}; expected one of {known}."
PARENT_POLL_S = 0.5  # how often a worker checks that the process that started it is alive
WORKER_SPIN_S = 2e-4  # busy-wait window of a worker waiting for the next command (wait_briefly)
EXIT_ORPHANED = 70  # exit status of a worker whose main process died
_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>

# The main process's ends of every live pool's pipes. A worker started by fork inherits them
# all; it closes them at once, so that a pipe reaches EOF in its worker when the main process
# dies (a worker holding the other end of its own pipe would never see EOF).
PARENT_ENDS: weakref.WeakSet = weakref.WeakSet()


def worker_main(
    target: Callable[..., None],
    conn: Any,
    parent_pid: int | None,
    death_signal: bool,
    *args: Any,
) -> None:
    """Process target of a pool worker: prepare the process, run ``target(conn, *args)``, exit.

    The process exits with ``os._exit`` (status 0, or 1 when ``target`` raised), skipping
    interpreter teardown (seconds once torch is imported), so the pool joins it at once.

    Args:
        target: the worker function; it usually calls ``serve``.
        conn: the worker's end of its pipe.
        parent_pid: pid of the main process, or None when the worker's parent is another
            process (a fork server); the worker exits when its parent is gone.
        death_signal: ask Linux to SIGKILL the worker when the thread that started it exits
            (only safe when that thread is the main thread, which lives as long as its process).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a handler inherited by fork is not ours
    for end in list(PARENT_ENDS):
        end.close()
    _watch_parent(parent_pid, death_signal)
    status = 0
    try:
        target(conn, *args)
    except BaseException:  # noqa: BLE001 - reported on stderr, seen by the pool as a death
        traceback.print_exc()
        status = 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


def _watch_parent(parent_pid: int | None, death_signal: bool) -> None:
    if death_signal and sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL))
        except (OSError, AttributeError):
            pass  # no prctl: the polling thread below still notices
    ppid = os.getppid()
    if parent_pid is not None and ppid != parent_pid:
        os._exit(EXIT_ORPHANED)  # the main process died before this worker got here
    watcher = threading.Thread(
        target=_exit_when_orphaned, args=(ppid,), name="parent-watch", daemon=True
    )
    watcher.start()


def _exit_when_orphaned(ppid: int) -> None:
    """Exit the process once its parent is gone (it is then re-parented: its ppid changes)."""
    while os.getppid() == ppid:
        time.sleep(PARENT_POLL_S)
    os._exit(EXIT_ORPHANED)


def _reply(conn: Any, data: bytes) -> bool:
    try:
        conn.send_bytes(data)
    except (OSError, ValueError):  # the main process is gone
        return False
    return True


def serve(
    conn: Any,
    setup: Callable[[], Mapping[str, Callable[[Any], Any]]],
    hot: Mapping[bytes, str] | None = None,
    dumps: Callable[[Any], bytes] = pickle.dumps,
) -> None:
    """Answer the main process's commands until ``"close"`` or until the main process is gone.

    ``setup()`` builds the worker's state and returns its handlers, ``{command: fn(payload)}``;
    its success (``OK``) or exception (``ERROR``) is the first reply. Each command then gets one
    reply: ``OK`` when its handler returns None, else ``VALUE`` + ``dumps(value)``, or
    ``ERROR`` when it raised (the loop goes on). ``hot`` maps one-byte commands to handler
    names (called with None). A handler named ``"close"`` is called once when the loop ends.

    Examples:
        >>> from multiprocessing import Pipe
        >>> main, worker = Pipe()
        >>> main.send_bytes(pickle.dumps(("double", 21)))
        >>> main.send_bytes(pickle.dumps(("close", None)))
        >>> serve(worker, lambda: {"double": lambda x: 2 * x})
        >>> main.recv_bytes(), pickle.loads(main.recv_bytes()[1:])
        (b'k', 42)
    """
    try:
        handlers = dict(setup())
    except BaseException as err:  # noqa: BLE001 - reported to the main process
        _reply(conn, encode_error(err))
        return
    try:
        if _reply(conn, OK):
            _loop(conn, handlers, hot or {}, dumps)
    finally:
        close = handlers.get(CLOSE)
        if close is not None:
            try:
                close(None)
            except BaseException:  # noqa: BLE001 - the worker is exiting anyway
                traceback.print_exc()


def _loop(conn: Any, handlers: dict, hot: Mapping[bytes, str], dumps: Callable) -> None:
    hot_calls = {code: handlers[name] for code, name in hot.items()}
    poller = None
    if CAN_SPIN:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
    while True:
        if poller is not None:
            wait_briefly(poller, 1, WORKER_SPIN_S)
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            return  # the main process is gone
        try:
            if len(message) == 1:
                handler = hot_calls.get(message)
                if handler is None:
                    known = sorted(hot_calls)
                    raise ValueError(UNKNOWN_COMMAND.format(command=message, known=known))
                value = handler(None)
            else:
                command, payload = pickle.loads(message)
                if command == CLOSE:
                    return
                if command == SYNC:
                    if not _reply(conn, SYNCED + payload):
                        return
                    continue
                handler = handlers.get(command)
                if handler is None:
                    known = sorted({*handlers, CLOSE, SYNC})
                    raise ValueError(UNKNOWN_COMMAND.format(command=command, known=known))
                value = handler(payload)
            reply = OK if value is None else VALUE + dumps(value)
        except BaseException as err:  # noqa: BLE001 - reported; the worker keeps serving
            reply = encode_error(err)
        if not _reply(conn, reply):
            return

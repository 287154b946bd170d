"""The worker side of a worker pool: the process entry point and the command loop.

``worker_main`` is the target of every pool process: it makes the worker ignore Ctrl-C (the
main process handles it), closes the pipe ends it inherited from the main process under
``fork``, and makes sure the worker exits soon after the main process dies. ``serve`` is the
loop a worker function runs: build the state of each of its slots once, then answer each
command with one reply (the protocol: ``_protocol``).
"""

from __future__ import annotations

import ctypes
import os
import pickle
import signal
import sys
import threading
import time
import traceback
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ._channel import WorkerLink
from ._protocol import CLOSE, PIPE, START_REPLY, VALUE_TAG, acquire_briefly, encode_error

__all__ = ["serve", "worker_main", "PARENT_ENDS"]

UNKNOWN_COMMAND = "unknown worker command {command!r}; expected one of {known}."
PARENT_POLL_S = 0.5  # how often a worker checks that the process that started it is alive
NO_SLOTS = "serve() got {got} setup functions for a worker serving {expected} slots."
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
        conn: the worker's end of its pool (a ``WorkerLink``).
        parent_pid: pid of the main process, or None when the worker's parent is another
            process (a fork server); the worker exits when its parent is gone.
        death_signal: ask Linux to SIGKILL the worker when the thread that started it exits
            (only safe when that thread is the main thread, which lives as long as its process).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a handler inherited by fork is not ours
    conn.channel.entered[conn.process] = 1  # a death from here on is not one of bootstrapping
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


Handlers = Mapping[str, Callable[[Any], Any]]


def serve(
    conn: WorkerLink,
    setup: Callable[[], Handlers] | Sequence[Callable[[], Handlers]],
    hot: Mapping[bytes, str] | None = None,
    dumps: Callable[[Any], bytes] = pickle.dumps,
) -> None:
    """Answer the main process's commands until ``"close"`` or until the main process is gone.

    ``setup`` builds the state of the worker's slot and returns its handlers,
    ``{command: fn(payload)}``; a worker serving several slots gets one ``setup`` per slot,
    called in order. Each one's success or exception is its slot's first reply, the *start*
    reply (a worker with a failed slot exits once every slot has answered); a handler named
    ``"start"``, when there is one, is called right after its setup, and its value is that
    reply (what the main process needs to know before its first command, e.g. an env's specs).
    Each command then gets one reply: none when its handler returns None, else
    ``dumps(value)``, or the exception it raised (the loop goes on). Handlers are looked up at
    each command: a handler may add others to its slot's dict (a ``dict`` returned by
    ``setup`` is used as is). ``hot`` maps one-byte commands (no payload: the per-step path,
    which sends nothing through the pipe) to handler names. A handler named ``"close"`` is
    called once when the loop ends.

    Examples:
        >>> from rlworkers import WorkerPool
        >>> def work(conn):
        ...     serve(conn, lambda: {"double": lambda x: 2 * x})
        >>> pool = WorkerPool([(work, ())], start_method="fork", label="demo worker")
        >>> pool.gather("start"), pool.request("double", "double", 21)
        ([None], [42])
        >>> pool.shutdown()
    """
    link = conn
    setups = list(setup) if isinstance(setup, Sequence) else [setup] * len(link.slots)
    if len(setups) != len(link.slots):
        raise ValueError(NO_SLOTS.format(got=len(setups), expected=len(link.slots)))
    handlers: list[dict | None] = []
    started = True
    for slot, make in zip(link.slots, setups):
        handlers.append(None)
        try:
            made = make()
            handlers[-1] = made if type(made) is dict else dict(made)
            start = handlers[-1].get(START_REPLY)
            value = None if start is None else start(None)
            body = None if value is None else VALUE_TAG + dumps(value)
        except BaseException as err:  # noqa: BLE001 - reported to the main process
            started = False
            body = encode_error(err)
        if body is None:
            link.reply_ok(slot, 1)
        elif not link.reply(slot, 1, body):
            return
    try:
        if started:
            _loop(link, handlers, hot or {}, dumps)
    finally:
        for slot_handlers in handlers:
            close = None if slot_handlers is None else slot_handlers.get(CLOSE)
            if close is not None:
                try:
                    close(None)
                except BaseException:  # noqa: BLE001 - the worker is exiting anyway
                    traceback.print_exc()


def _loop(link: WorkerLink, handlers: list, hot: Mapping[bytes, str], dumps: Callable) -> None:
    """Wait for work, run the hot commands of the slots, then the pipe's messages; repeat."""
    hot_names = {code[0]: name for code, name in hot.items()}
    channel, conn, process = link.channel, link.conn, link.process
    sent, kind, piped = channel.sent, channel.kind, channel.piped
    wake = channel.wake[process]
    first = channel.first[process]
    slots = list(link.slots)
    handled = [1] * len(slots)  # the number of the last command run, per slot
    read = 0  # pipe messages read
    spin_s = link.spin_s
    while True:
        if not acquire_briefly(wake, spin_s):
            wake.acquire()
        for local, slot in enumerate(slots):
            seq = sent[slot]
            if seq != handled[local]:
                code = kind[slot]
                if code != PIPE:
                    handled[local] = seq
                    name = hot_names.get(code, bytes([code]) if 0 <= code < 256 else code)
                    if not _run(link, slot, seq, handlers[local], name, None, dumps):
                        return
        while piped[process] != read:
            try:
                message = conn.recv_bytes()
            except (EOFError, OSError):
                return  # the main process is gone
            read += 1
            command, body = pickle.loads(message)
            if command == CLOSE:
                return
            for slot, seq, name, payload in body:
                handled[slot - first] = seq
                if not _run(link, slot, seq, handlers[slot - first], name, payload, dumps):
                    return


def _run(
    link: WorkerLink, slot: int, seq: int, handlers: dict, name: Any, payload: Any, dumps: Callable
) -> bool:
    """Run one command of ``slot`` and reply; False when the main process is gone."""
    try:
        handler = handlers.get(name)
        if handler is None:
            known = sorted({*handlers, CLOSE})
            raise ValueError(UNKNOWN_COMMAND.format(command=name, known=known))
        value = handler(payload)
        if value is None:
            link.reply_ok(slot, seq)
            return True
        body = VALUE_TAG + dumps(value)
    except BaseException as err:  # noqa: BLE001 - reported; the worker keeps serving
        body = encode_error(err)
    return link.reply(slot, seq, body)

"""What a worker pool and its workers exchange: flags in shared memory, and pipe messages.

Each worker process serves one or more *slots* (``rlbatched.ParallelEnv``: one sub-env each).
A command goes to a slot; its reply comes back from that slot:

- **Command**: the main process sets the slot's ``kind`` (a one-byte *hot* command, e.g. the
  per-step ``b"s"``, or ``PIPE``: the command and its payload are in the next pipe message)
  and bumps the slot's ``sent`` counter in shared memory, then posts the process's wake-up
  semaphore. Pipe messages are ``("slots", [(slot, seq, command, payload), ...])`` or
  ``("close", None)``; ``"close"`` is reserved.
- **Reply**: the worker sets the slot's ``status`` (``OK``, ``VALUE`` or ``ERROR``) and its
  ``done`` counter to the command's number, then posts the main process's semaphore. A
  ``VALUE`` or ``ERROR`` reply also sends one pipe message: the slot and the command's number
  (``SLOT``), then ``VALUE_TAG`` + pickle, or ``ERROR_TAG`` + pickled exception info.

So a step sends nothing through a pipe: it is a few integer writes and two semaphore posts.
Counters, not booleans: a reply is matched to its command by number, so a reply that arrives
late (its exchange was interrupted) is never taken for a newer one.
"""

from __future__ import annotations

import os
import pickle
import struct
import time
import traceback
from collections.abc import Callable
from typing import Any

from ._pickling import dumps

# statuses a worker writes for the last command of a slot
OK = 1
VALUE = 2
ERROR = 3
# pipe message tags (first byte after the slot number)
VALUE_TAG = b"v"
ERROR_TAG = b"e"
STATUS_OF_TAG = {VALUE_TAG: VALUE, ERROR_TAG: ERROR}
SLOT = struct.Struct("<iq")  # slot and command number, heading a reply's pipe message
# the "kind" of a slot command
PIPE = -1  # the command is in the pipe
START = -2  # the start-up "command" every slot answers once
CLOSE = "close"
SLOTS = "slots"
# the handler a slot runs once, right after its setup: what it returns is the start reply
START_REPLY = "start"
# exit status of a spawn/forkserver worker that, while importing the main module again, met
# top-level code starting workers of its own (a script without ``if __name__ == "__main__":``)
EXIT_UNGUARDED = 71

# os.sched_yield is POSIX-only (neither Windows nor macOS has it): no spinning there
CAN_SPIN = hasattr(os, "sched_yield")


def acquire_briefly(semaphore: Any, seconds: float) -> bool:
    """Take ``semaphore`` without blocking, trying again for up to ``seconds``; True if taken.

    Between tries the core goes to any other runnable process (``os.sched_yield``), so only
    idle time is spent. Waking a process blocked on a semaphore or a pipe (an idle CPU, in a VM
    a halted vCPU) costs tens of microseconds, as much as a Pendulum step: the processes of a
    pool spin like this for a short window, then block.
    """
    if semaphore.acquire(False):
        return True
    if not CAN_SPIN or seconds <= 0:
        return False
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        os.sched_yield()
        if semaphore.acquire(False):
            return True
    return False


def _safe(compute: Callable[[], str], fallback: str) -> str:
    try:
        return compute()
    except BaseException:  # noqa: BLE001 - a broken __str__ must not kill the worker
        return fallback


def encode_error(err: BaseException) -> bytes:
    """``ERROR_TAG`` + pickled (type name, message, traceback text, pickled exception).

    Never raises: an exception whose ``__str__`` fails is described as unprintable, and one that
    cannot be pickled travels without its pickle (the main process then rebuilds a
    ``RemoteTraceback`` from the text).
    """
    type_name = _safe(lambda: type(err).__name__, "Exception")
    message = _safe(lambda: str(err), f"<unprintable {type_name} object>")
    text = _safe(lambda: "".join(traceback.format_exception(err)), "<no traceback available>")
    try:
        payload = dumps(err)
    except BaseException:  # noqa: BLE001 - anything may fail while pickling a user's exception
        payload = None
    return ERROR_TAG + pickle.dumps((type_name, message, text, payload))


def decode_error_info(message: bytes) -> tuple[str, str, str, BaseException | None]:
    """``(type_name, message, traceback_text, original or None)`` from an ``ERROR_TAG`` body."""
    type_name, text, tb, payload = pickle.loads(message[1:])
    original = None
    if payload is not None:
        try:
            original = pickle.loads(payload)
        except Exception:  # noqa: BLE001 - its class may not exist or not rebuild here
            original = None
    if not isinstance(original, BaseException):
        original = None
    return type_name, text, tb, original

"""The flags a worker pool shares with its workers: per-slot counters and wake-up semaphores.

``FlagChannel`` holds, in one block of shared memory (``multiprocessing.RawArray``), four
counters per slot (``sent``/``kind`` written by the main process, ``done``/``status`` by the
worker) and two per process (``piped``: messages written to its pipe; ``entered``: set by the
worker once its own code runs, so a death before it is told apart), plus one semaphore per
process (posted when it has work) and one for the main process (posted for each reply). The
semaphores are the wake-ups; the counters say what happened (see ``_protocol``).
``WorkerLink`` is a worker's end: its pipe, the channel, and which slots it serves.
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from typing import Any

from ._protocol import OK, SLOT, START, STATUS_OF_TAG

__all__ = ["FlagChannel", "WorkerLink"]

_COUNTER = ctypes.c_int64
_FIELDS = ("sent", "kind", "done", "status")  # per slot, in this order; then _PER_PROCESS
_PER_PROCESS = ("piped", "entered")


class FlagChannel:
    """The shared counters and semaphores of one pool (built in the main process).

    ``slot_counts[p]`` slots are served by process ``p``, numbered consecutively from 0.
    Picklable while a process is being started (as multiprocessing's own locks are).

    Examples:
        >>> import multiprocessing as mp
        >>> channel = FlagChannel(mp.get_context("fork"), [2, 1])
        >>> channel.first, channel.process_of
        ([0, 2, 3], [0, 0, 1])
        >>> channel.sent[2] = 5
        >>> channel.sent[2], channel.done[2]
        (5, 0)
    """

    def __init__(self, ctx: Any, slot_counts: Sequence[int]) -> None:
        self.slot_counts = [int(count) for count in slot_counts]
        size = len(_FIELDS) * sum(self.slot_counts) + len(_PER_PROCESS) * len(self.slot_counts)
        self._block = ctx.RawArray(_COUNTER, size)
        self.wake = [ctx.Semaphore(0) for _ in self.slot_counts]
        self.ready = ctx.Semaphore(0)
        self._views()
        for slot in range(sum(self.slot_counts)):
            self.sent[slot] = 1  # every slot owes its start-up reply
            self.kind[slot] = START

    def _views(self) -> None:
        """Bind the per-slot and per-process counter arrays to the shared block."""
        counts = self.slot_counts
        num_slots = sum(counts)
        self.first = [sum(counts[:p]) for p in range(len(counts) + 1)]
        self.process_of = [p for p, count in enumerate(counts) for _ in range(count)]
        size = ctypes.sizeof(_COUNTER)
        for position, name in enumerate(_FIELDS):
            array = (_COUNTER * num_slots).from_buffer(self._block, position * num_slots * size)
            setattr(self, name, array)
        offset = len(_FIELDS) * num_slots * size
        for position, name in enumerate(_PER_PROCESS):
            start = offset + position * len(counts) * size
            setattr(self, name, (_COUNTER * len(counts)).from_buffer(self._block, start))

    def __getstate__(self) -> dict:
        return {
            "slot_counts": self.slot_counts,
            "_block": self._block,
            "wake": self.wake,
            "ready": self.ready,
        }

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._views()


class WorkerLink:
    """A worker's end of its pool: the pipe, the channel and the slots it serves.

    It is what a pool passes to its worker function as ``conn``; ``serve`` takes it.
    """

    def __init__(self, conn: Any, channel: FlagChannel, process: int, spin_s: float) -> None:
        self.conn = conn
        self.channel = channel
        self.process = process
        self.spin_s = spin_s

    @property
    def slots(self) -> range:
        """The (pool-wide) numbers of the slots this worker serves."""
        first = self.channel.first
        return range(first[self.process], first[self.process + 1])

    def reply_ok(self, slot: int, seq: int) -> None:
        """Mark command ``seq`` of ``slot`` done, with no value."""
        channel = self.channel
        channel.status[slot] = OK
        channel.done[slot] = seq
        channel.ready.release()

    def reply(self, slot: int, seq: int, body: bytes) -> bool:
        """Mark command ``seq`` of ``slot`` done and send its value or error (``body``).

        The flags go first, so that the main process starts reading a large body while it is
        being written. False when the main process is gone.
        """
        channel = self.channel
        channel.status[slot] = STATUS_OF_TAG[body[:1]]
        channel.done[slot] = seq
        channel.ready.release()
        try:
            self.conn.send_bytes(SLOT.pack(slot, seq) + body)
        except (OSError, ValueError):
            return False
        return True

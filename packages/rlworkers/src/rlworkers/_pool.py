"""The main-process side of a worker pool: start worker processes, command them, watch and stop them.

One protocol (``_protocol``: flags in shared memory, pipes for payloads, values and
errors) and one worker loop (``_loop.serve``) serve every multi-process object of the
stack (``rlbatched.ParallelEnv``, ``rlcollectors``' ``MultiSyncDataCollector``). Each process
serves one or more *slots*; commands go to slots with ``send``/``broadcast`` and their replies
come back through ``gather`` (every slot asked) or ``gather_ready`` (the first ones done);
``request`` sends and gathers in one exchange. That is the one place where "send a command /
wait for the replies" lives.

Failures never hang and never give stale data: a dead worker raises ``WorkerDiedError`` and a
silent one ``WorkerTimeoutError`` (both stop every worker); a worker's exception is re-raised
with its own type when possible (``WorkerRaisedError`` otherwise) once every reply asked for is
read. Replies are numbered: one left unread by an interrupted exchange (Ctrl-C, any exception
in the main process) is waited for and dropped before its slot is sent anything else, and
``sync`` does so for every slot. Failure messages: ``_failures``; starting and stopping the
processes: ``_processes``.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from ._channel import FlagChannel, WorkerLink
from ._failures import BAD_REPLY, INTERRUPTED, START_PHASE, PoolFailures
from ._loop import PARENT_ENDS, worker_main
from ._pickling import clean_worker_environ
from ._processes import Processes, exit_if_bootstrapping, prepare_forkserver, start_process
from ._protocol import CAN_SPIN, ERROR_TAG, OK, PIPE, SLOT, SLOTS, VALUE_TAG
from .errors import WorkerError

__all__ = ["WorkerPool"]

NOTHING_SENT = "{label} {index} has no command in flight to gather during {phase}"
BAD_SLOTS = "slots must give a positive count per worker ({workers} workers), got {slots!r}"

LIVENESS_S = 0.1  # while blocked waiting, look at the pending workers' processes this often
MAIN_SPIN_S = 3e-4  # spin window of the main process waiting for replies (acquire_briefly)
# gather_ready's window: a caller collecting the first replies (asynchronous stepping) trades
# a little more CPU for answering as soon as they come (measured: 1.22x -> 1.26x frames/s)
READY_SPIN_S = 2e-3
WORKER_SPIN_S = 2e-4  # spin window of a worker waiting for its next command
DEFAULT_START_TIMEOUT_S = 300.0  # imports (torch under spawn) and building what a slot serves


class _Failed:
    """A slot's reply that is an exception to raise (not a value to return)."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


class WorkerPool(PoolFailures):
    """Worker processes, each serving one or more slots, and the one protocol to talk to them.

    Each worker runs ``target(conn, *args)``, which usually calls ``serve`` with
    ``conn`` (the worker's ``WorkerLink``); every slot first answers whether it started: read
    it with ``gather("start")`` (waits in the phase ``"start"`` are timed by ``start_timeout``,
    all others by ``timeout``: a short step timeout never cuts a slow start short). Commands and replies are flags in shared memory and semaphore
    posts (payloads, values and errors also use a pipe per worker); waiting processes spin for a
    fraction of a millisecond, then block. The workers ignore Ctrl-C, and exit within about a
    second when the main process dies.

    Not thread-safe: one thread talks to a pool at a time.

    Args:
        workers: ``(target, args)`` per worker process; under spawn and forkserver both are
            pickled.
        start_method: ``"spawn"``, ``"fork"`` or ``"forkserver"`` (whose server is started
            with ``preload`` imported: ``prepare_forkserver``).
        label: how errors name a slot: ``"{label} {index}"``.
        timeout: seconds to wait for a reply before raising ``WorkerTimeoutError``.
        timeout_arg: the owner's argument setting ``timeout``, named in timeout errors.
        start_timeout: the same, for waits in the phase ``"start"`` (default 300 s).
        start_timeout_arg: the owner's argument setting ``start_timeout``.
        after_loss: appended to the message when the workers were stopped by a failure
            (e.g. ``"; the env was closed and reopens on the next reset()."``).
        on_shutdown: called once, after the workers were stopped.
        slots: how many slots each worker serves (default: one each); slots are numbered
            consecutively, worker by worker.
        spin: whether waiting processes spin briefly before blocking (False: they block at
            once, which suits more processes than cores).
        preload: more modules for the fork server to import (``forkserver`` only).
        daemon: whether the workers are daemonic (default). A daemonic process cannot start
            processes of its own: a worker that runs a `ParallelEnv` (a collector's) needs
            ``daemon=False``. Either way a worker exits when its parent dies.

    Examples:
        >>> from rlworkers import WorkerPool, serve
        >>> def work(conn):
        ...     serve(conn, lambda: {"double": lambda x: 2 * x})
        >>> pool = WorkerPool([(work, ())] * 2, start_method="fork", label="demo worker")
        >>> pool.gather("start")
        [None, None]
        >>> pool.request("double", "double", payloads={0: 1, 1: 21})
        [2, 42]
        >>> pool.shutdown()
        >>> pool.alive
        False
    """

    def __init__(
        self,
        workers: Sequence[tuple[Callable[..., None], tuple]],
        *,
        start_method: str = "spawn",
        label: str = "worker",
        timeout: float = 60.0,
        timeout_arg: str = "timeout",
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
        start_timeout_arg: str = "start_timeout",
        after_loss: str = ".",
        process_name: str | None = None,
        on_shutdown: Callable[[], None] | None = None,
        slots: Sequence[int] | None = None,
        spin: bool = True,
        preload: Iterable[str] = (),
        daemon: bool = True,
    ) -> None:
        # a spawn/forkserver worker re-running an unguarded script gets here: it exits, telling
        # its main process why by its exit status
        exit_if_bootstrapping()
        counts = [1] * len(workers) if slots is None else [int(n) for n in slots]
        if len(counts) != len(workers) or any(n < 1 for n in counts):
            raise ValueError(BAD_SLOTS.format(workers=len(workers), slots=slots))
        self.label = label
        self.timeout = timeout
        self.timeout_arg = timeout_arg
        self.start_timeout = start_timeout
        self.start_timeout_arg = start_timeout_arg
        self.after_loss = after_loss
        self.start_method = start_method
        spin = spin and CAN_SPIN
        self._spin_s = MAIN_SPIN_S if spin else 0.0
        self._ready_spin_s = READY_SPIN_S if spin else 0.0
        self._state = Processes(on_shutdown)
        self._finalizer = weakref.finalize(self, self._state.stop)
        self.procs = self._state.procs
        self.conns = self._state.conns
        self.alive = True
        self._broken: str | None = None
        clean_worker_environ()
        if start_method == "forkserver":
            prepare_forkserver(preload)
        ctx = mp.get_context(start_method)
        channel = self._channel = self._state.channel = FlagChannel(ctx, counts)
        self._process_of = channel.process_of
        num_slots = len(self._process_of)
        self._claimed = [0] * num_slots  # per slot: number of the last command whose reply was read
        self._absorbed = [0] * num_slots  # per slot: number of the last command whose reply arrived
        self._replies: dict[int, Any] = {}  # arrived, unclaimed replies
        self._stash: dict[int, tuple[int, bytes]] = {}  # slot -> (command number, pipe message)
        # a fork server, not this process, is the parent of its workers
        parent_pid = None if start_method == "forkserver" else os.getpid()
        # PR_SET_PDEATHSIG fires when the *thread* that started the worker ends
        death_signal = threading.current_thread() is threading.main_thread()
        name = process_name or label.replace(" ", "-") + "-{index}"
        worker_spin = WORKER_SPIN_S if spin else 0.0
        try:
            for index, (target, args) in enumerate(workers):
                parent_conn, child_conn = ctx.Pipe()
                PARENT_ENDS.add(parent_conn)
                self.conns.append(parent_conn)
                link = WorkerLink(child_conn, channel, index, worker_spin)
                try:
                    proc = ctx.Process(
                        target=worker_main,
                        args=(target, link, parent_pid, death_signal, *args),
                        name=name.format(index=index),
                        daemon=daemon,
                    )
                    start_process(proc)
                finally:
                    child_conn.close()
                # a started Process keeps its arguments; drop them, so that what they hold
                # (a shared buffer, a policy) is freed with its owner, not with this object
                proc._args, proc._kwargs = (), {}
                self.procs.append(proc)
        except BaseException:
            self.shutdown()
            raise

    @property
    def num_workers(self) -> int:
        """Number of worker processes."""
        return len(self.procs)

    @property
    def num_slots(self) -> int:
        """Number of slots, all workers together."""
        return len(self._process_of)

    @property
    def pending(self) -> list[int]:
        """The slots whose last command's reply was not read yet (ascending)."""
        sent, claimed = self._channel.sent, self._claimed
        return [slot for slot in range(len(claimed)) if claimed[slot] != sent[slot]]

    # ------------------------------------------------------------------ sending
    def send(self, index: int, command: str, payload: Any = None, phase: str | None = None) -> None:
        """Send ``(command, payload)`` to slot ``index``; read its reply with ``gather``."""
        self._send_pipe({index: payload}, command, phase or command)

    def broadcast(self, code: bytes, phase: str, indices: Iterable[int] | None = None) -> None:
        """Send the one-byte command ``code`` to every slot in ``indices`` (default: all).

        The per-step path: a few integer writes in shared memory and one semaphore post per
        worker, no pipe.
        """
        if not self.alive:
            self._check_alive(phase)
        channel = self._channel
        sent, kind, claimed = channel.sent, channel.kind, self._claimed
        slots = range(len(claimed)) if indices is None else list(indices)
        value = code[0]
        stale = [slot for slot in slots if claimed[slot] != sent[slot]]
        if stale:
            self._settle(stale, phase)
        if indices is None:
            processes: Iterable[int] = range(len(self.procs))
        else:
            processes = sorted({self._process_of[slot] for slot in slots})
        try:
            for slot in slots:
                kind[slot] = value
                sent[slot] += 1
        finally:  # whatever was marked must be seen: wake every worker concerned
            wake = channel.wake
            for process in processes:
                wake[process].release()

    def request(
        self,
        phase: str,
        command: str,
        payload: Any = None,
        *,
        payloads: Mapping[int, Any] | None = None,
        indices: Sequence[int] | None = None,
        timeout: float | None = None,
    ) -> list:
        """One exchange: ``sync``, send ``command`` to the slots, return their replies in order.

        Every slot in ``indices`` (default: all, or the keys of ``payloads``) gets
        ``payloads[index]`` if given, else ``payload``; each worker gets one message.
        """
        self.sync()
        if indices is None:
            indices = list(payloads) if payloads is not None else range(self.num_slots)
        values = {i: (payloads[i] if payloads is not None else payload) for i in indices}
        self._send_pipe(values, command, phase)
        return self.gather(phase, list(indices), timeout)

    def _send_pipe(self, payloads: Mapping[int, Any], command: str, phase: str) -> None:
        """Send ``command`` through the pipes: one message per worker for its slots."""
        self._check_alive(phase)
        channel = self._channel
        sent, kind, claimed = channel.sent, channel.kind, self._claimed
        stale = [slot for slot in payloads if claimed[slot] != sent[slot]]
        if stale:
            self._settle(stale, phase)
        by_process: dict[int, list] = {}
        for slot, value in payloads.items():
            entry = (slot, sent[slot] + 1, command, value)
            by_process.setdefault(self._process_of[slot], []).append(entry)
        messages = {p: pickle.dumps((SLOTS, entries)) for p, entries in by_process.items()}
        for process, data in messages.items():
            try:
                self.conns[process].send_bytes(data)
            except OSError:
                self._lose_dead(process, phase)
            except BaseException:
                self._broken = phase  # possibly half a message in the pipe
                raise
            try:
                for slot, seq, _, _ in by_process[process]:
                    kind[slot] = PIPE
                    sent[slot] = seq
                channel.piped[process] += 1
                channel.wake[process].release()
            except BaseException:
                self._broken = phase  # a message the worker may take for the next one
                raise

    # ------------------------------------------------------------------ receiving
    def gather(
        self, phase: str, indices: Sequence[int] | None = None, timeout: float | None = None
    ) -> list:
        """Wait for the reply of each slot in ``indices`` (default: all), in their order.

        Every reply is read before a worker's exception is raised (the lowest slot's), so the
        pool stays usable. A dead worker raises ``WorkerDiedError``, a silent one
        ``WorkerTimeoutError`` after ``timeout`` seconds; both stop every worker.
        """
        self._check_alive(phase)
        slots = range(self.num_slots) if indices is None else indices
        self._check_in_flight(slots, phase)
        self._collect(slots, len(slots), phase, self._seconds(phase, timeout))
        replies = []
        errors = {}
        for slot in slots:
            reply = self._claim(slot)
            if isinstance(reply, _Failed):
                errors[slot] = reply.error
                reply = None
            replies.append(reply)
        if errors:
            raise errors[min(errors)]
        return replies

    def gather_ready(
        self,
        phase: str,
        indices: Sequence[int],
        min_ready: int = 1,
        max_ready: int | None = None,
        timeout: float | None = None,
    ) -> dict[int, Any]:
        """Wait until ``min_ready`` of ``indices`` have replied; return ``{slot: reply}``.

        Every slot that has replied by then is returned (the lowest ``max_ready`` ones when
        more are ready); the others stay in flight. A worker's exception is raised for the
        lowest failed slot among those ready: the failed slots are then no longer in flight,
        the others that were ready stay ready for the next call.
        """
        self._check_alive(phase)
        self._check_in_flight(indices, phase)
        seconds = self._seconds(phase, timeout)
        ready = sorted(self._collect(indices, min_ready, phase, seconds, self._ready_spin_s))
        failed = [slot for slot in ready if isinstance(self._replies.get(slot), _Failed)]
        if failed:
            errors = [self._claim(slot).error for slot in failed]
            raise errors[0]
        if max_ready is not None:
            ready = ready[:max_ready]
        return {slot: self._claim(slot) for slot in ready}

    def _seconds(self, phase: str, timeout: float | None) -> float:
        """How long a wait in ``phase`` may last: ``timeout`` if given, else the pool's."""
        if timeout is not None:
            return timeout
        return self.start_timeout if phase == START_PHASE else self.timeout

    def _check_in_flight(self, slots: Iterable[int], phase: str) -> None:
        sent, claimed = self._channel.sent, self._claimed
        for slot in slots:
            if claimed[slot] == sent[slot]:
                raise RuntimeError(NOTHING_SENT.format(label=self.label, index=slot, phase=phase))

    def _claim(self, slot: int) -> Any:
        reply = self._replies.pop(slot, None)
        self._claimed[slot] = self._absorbed[slot]
        return reply

    def _collect(
        self,
        slots: Iterable[int],
        need: int,
        phase: str,
        seconds: float,
        spin_s: float | None = None,
    ) -> list[int]:
        """Wait until ``need`` of ``slots`` have replied to their last command; read replies.

        Returns every slot of ``slots`` whose reply has arrived. Spins for a short window
        (``spin_s``, default the pool's; taking the main semaphore's posts), then blocks on it
        in slices, looking at the workers' processes between slices.
        """
        channel = self._channel
        done, sent, absorbed = channel.done, channel.sent, self._absorbed
        ready_posts = channel.ready
        complete: list[int] = []
        waiting: list[int] = []
        for slot in slots:
            (complete if absorbed[slot] == sent[slot] else waiting).append(slot)
        deadline = time.monotonic() + seconds
        spin_end = 0.0
        while True:
            if waiting:
                still = []
                for slot in waiting:
                    if done[slot] == sent[slot]:
                        self._absorb(slot, phase, deadline, seconds)
                        complete.append(slot)
                    else:
                        still.append(slot)
                waiting = still
            if len(complete) >= need:
                break
            if ready_posts.acquire(False):
                continue
            now = time.monotonic()
            if not spin_end:
                spin_end = now + (self._spin_s if spin_s is None else spin_s)
            if now < spin_end:
                os.sched_yield()
                continue
            if not self.alive:
                self._check_alive(phase)
            if now >= deadline:
                silent = sorted({self._process_of[slot] for slot in waiting})
                self._lose_hung(silent, phase, seconds)
            if not ready_posts.acquire(True, min(deadline - now, LIVENESS_S)):
                self._check_processes(waiting, phase)
        while ready_posts.acquire(False):
            pass  # posts of replies already seen: the flags, not the posts, say what is done
        return complete

    def _absorb(self, slot: int, phase: str, deadline: float, seconds: float) -> None:
        """Record the reply of ``slot``'s last command (reading its pipe message, if any)."""
        channel = self._channel
        seq = channel.sent[slot]
        if channel.status[slot] == OK:
            reply = None
        else:
            reply = self._decode(slot, phase, self._read_body(slot, seq, phase, deadline, seconds))
        self._replies[slot] = reply
        self._absorbed[slot] = seq
        self._stash.pop(slot, None)

    def _decode(self, slot: int, phase: str, message: bytes) -> Any:
        tag = message[:1]
        if tag == VALUE_TAG:
            try:
                return pickle.loads(message[1:])
            except Exception as err:  # noqa: BLE001 - reported as this worker's error
                return _Failed(self._bad_value(slot, phase, err))
        if tag == ERROR_TAG:
            return _Failed(self._raised(slot, phase, message))
        self._lose(WorkerError(self._text(BAD_REPLY, slot, phase), index=slot))

    def _read_body(self, slot: int, seq: int, phase: str, deadline: float, seconds: float) -> bytes:
        """The pipe message of command ``seq`` of ``slot`` (others met on the way are kept)."""
        process = self._process_of[slot]
        conn = self.conns[process]
        while True:
            held = self._stash.get(slot)
            if held is not None:
                if held[0] == seq:
                    return held[1]
                del self._stash[slot]  # an older command's, whose reply was dropped
            while not conn.poll(min(max(deadline - time.monotonic(), 0.0), LIVENESS_S)):
                if not self.alive:
                    self._check_alive(phase)
                if time.monotonic() >= deadline:
                    self._lose_hung([process], phase, seconds)
                if not self.procs[process].is_alive():
                    self._lose_dead(process, phase)
            message = self._recv(process, phase)
            if len(message) <= SLOT.size:
                self._lose(WorkerError(self._text(BAD_REPLY, slot, phase), index=slot))
            got, got_seq = SLOT.unpack_from(message)
            self._stash[got] = (got_seq, message[SLOT.size :])

    def _recv(self, process: int, phase: str) -> bytes:
        try:
            return self.conns[process].recv_bytes()
        except (EOFError, OSError):
            self._lose_dead(process, phase)
        except BaseException:
            self._broken = phase  # possibly half a message read
            raise

    def _check_processes(self, slots: Sequence[int], phase: str) -> None:
        """Raise ``WorkerDiedError`` for a dead worker still owing a reply in ``slots``."""
        if not self.alive:
            self._check_alive(phase)
        done, sent = self._channel.done, self._channel.sent
        for process in sorted({self._process_of[slot] for slot in slots}):
            if not self.procs[process].is_alive():
                owing = [s for s in slots if self._process_of[s] == process and done[s] != sent[s]]
                if owing:
                    self._lose_dead(process, phase)

    def sync(self, indices: Iterable[int] | None = None) -> None:
        """Wait for every reply still owed (by the slots ``indices``, default all) and drop it.

        Cheap when none is. An exchange cut short in the main process (Ctrl-C while waiting,
        an exception between sending and gathering) leaves replies unread; call this before
        writing anything the workers may still be reading (shared memory) or before a new
        exchange.
        """
        if not self.alive:
            self._check_alive("sync")
        if self._broken is not None:
            self._lose(WorkerError(self._text(INTERRUPTED, 0, self._broken)))
        stale = self.pending
        if indices is not None:
            wanted = set(indices)
            stale = [slot for slot in stale if slot in wanted]
        if stale:
            self._settle(stale, "sync")

    def _settle(self, slots: list[int], phase: str) -> None:
        """Wait for the replies of ``slots``' last commands and drop them."""
        if self._broken is not None:
            self._lose(WorkerError(self._text(INTERRUPTED, 0, self._broken)))
        self._collect(slots, len(slots), phase, self._seconds(phase, None))
        for slot in slots:
            self._claim(slot)

    # ------------------------------------------------------------------ stopping
    def shutdown(self) -> None:
        """Stop every worker (``close``, then kill after a grace period) and close the pipes.

        Idempotent; also runs when the pool is garbage-collected or the interpreter exits.
        """
        self.alive = False
        self._finalizer()

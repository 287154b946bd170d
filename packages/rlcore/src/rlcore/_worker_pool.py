"""The main-process side of a worker pool: start worker processes, message them, watch and stop them.

One protocol (``_worker_protocol``) and one worker loop (``_worker_loop.serve``) serve every
multi-process object of the stack (``rlbatched.ParallelEnv``, ``rlcollectors``'
``MultiSyncDataCollector``). Commands go out with ``send``/``broadcast`` and come back
through ``gather``; ``request`` does the three in one exchange. That pair is the one place
where "send a command / wait for the replies" lives.

Failures never hang and never give stale data: a dead worker raises ``WorkerDiedError`` and a
silent one ``WorkerTimeoutError`` (both stop every worker); a worker's exception is re-raised
with its own type when possible (``WorkerRaisedError`` otherwise) once every reply is read, so
the pipes stay in step. An exchange interrupted in the main process (Ctrl-C, any exception)
is finished by the next ``sync`` before anything else is sent.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import pickle
import select
import threading
import time
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NoReturn

from ._pickling import clean_worker_environ
from ._worker_errors import (
    RemoteTraceback,
    WorkerDiedError,
    WorkerError,
    WorkerRaisedError,
    WorkerTimeoutError,
    describe_exit,
)
from ._worker_loop import PARENT_ENDS, worker_main
from ._worker_protocol import (
    CAN_SPIN,
    CLOSE,
    ERROR,
    OK,
    SYNC,
    SYNCED,
    VALUE,
    decode_error_info,
    wait_briefly,
)

__all__ = ["WorkerPool"]

WORKER_RAISED = (
    "{label} {index} raised {type_name} during {phase}: {message}\n\nWorker traceback:\n{traceback}"
)
WORKER_DIED = "{label} {index} (pid {pid}) died unexpectedly during {phase} ({how}){after}"
WORKER_HUNG = (
    "{label} {index} (pid {pid}) did not answer within {seconds:g} s during {phase} "
    "({timeout_arg}={seconds:g}){after}"
)
BAD_VALUE = "{label} {index} answered {phase} with a value that cannot be unpickled here: {error}"
INTERRUPTED = (
    "an exchange with the {label}s was interrupted in the middle of a message during {phase}, "
    "so their pipes cannot be trusted; every worker was stopped{after}"
)
BAD_REPLY = "{label} {index} sent a malformed reply during {phase}; every worker was stopped{after}"
STOPPED = "the {label}s were stopped (shutdown() or an earlier failure){after}"

CLOSE_GRACE_S = 2.0  # given to the workers to exit after "close" before they are killed
KILL_JOIN_S = 5.0
DIED_JOIN_S = 1.0  # a worker whose pipe closed is exiting: wait this long for its exit code
LIVENESS_S = 1.0  # while waiting, look at the pending workers' processes this often
MAIN_SPIN_S = 3e-4  # busy-wait window of the main process waiting for every worker (step path)


class _Processes:
    """What stopping the workers needs, apart from the pool (so a finalizer can hold it)."""

    def __init__(self, on_shutdown: Callable[[], None] | None) -> None:
        self.procs: list = []
        self.conns: list = []
        self.owner = os.getpid()
        self.on_shutdown = on_shutdown

    def stop(self) -> None:
        """Ask every worker to exit, kill those that do not, release pipes; runs once."""
        if os.getpid() != self.owner:
            return  # a copy inherited by a forked process: these workers are not its children
        try:
            close = pickle.dumps((CLOSE, None))
            for conn in self.conns:
                try:
                    conn.send_bytes(close)
                except (OSError, ValueError):
                    pass  # dead worker or closed pipe
            deadline = time.monotonic() + CLOSE_GRACE_S
            for proc in self.procs:
                proc.join(max(0.0, deadline - time.monotonic()))
            for proc in self.procs:
                if proc.is_alive():
                    proc.kill()
                    proc.join(KILL_JOIN_S)
        finally:
            for proc in self.procs:
                try:
                    proc.close()
                except ValueError:
                    pass  # still running after SIGKILL (uninterruptible sleep): leave it
            for conn in self.conns:
                PARENT_ENDS.discard(conn)
                conn.close()
            on_shutdown, self.on_shutdown = self.on_shutdown, None
            if on_shutdown is not None:
                on_shutdown()


class WorkerPool:
    """Worker processes, one pipe each, and the one protocol to talk to them.

    Each worker runs ``target(conn, *args)`` (which usually calls ``rlcore``'s ``serve``);
    its first reply says whether it started: read it with ``gather("start")``. The workers
    ignore Ctrl-C, and exit within about a second when the main process dies.

    Not thread-safe: one thread talks to a pool at a time.

    Args:
        workers: ``(target, args)`` per worker; under spawn and forkserver both are pickled.
        start_method: ``"spawn"``, ``"fork"`` or ``"forkserver"``.
        label: how errors name a worker: ``"{label} {index}"``.
        timeout: seconds to wait for a reply before raising ``WorkerTimeoutError``.
        timeout_arg: the owner's argument setting ``timeout``, named in timeout errors.
        after_loss: appended to the message when the workers were stopped by a failure
            (e.g. ``"; the env was closed and reopens on the next reset()."``).
        on_shutdown: called once, after the workers were stopped.

    Examples:
        >>> from rlcore._worker_pool import WorkerPool
        >>> from rlcore._worker_loop import serve
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
        after_loss: str = ".",
        process_name: str | None = None,
        on_shutdown: Callable[[], None] | None = None,
    ) -> None:
        self.label = label
        self.timeout = timeout
        self.timeout_arg = timeout_arg
        self.after_loss = after_loss
        self.start_method = start_method
        self._state = _Processes(on_shutdown)
        self._finalizer = weakref.finalize(self, self._state.stop)
        self.procs = self._state.procs
        self.conns = self._state.conns
        self.alive = True
        self._unread = 0  # commands sent whose reply was not read yet (may over-count)
        self._broken: str | None = None
        clean_worker_environ()
        ctx = mp.get_context(start_method)
        # a fork server, not this process, is the parent of its workers
        parent_pid = None if start_method == "forkserver" else os.getpid()
        # PR_SET_PDEATHSIG fires when the *thread* that started the worker ends
        death_signal = threading.current_thread() is threading.main_thread()
        name = process_name or label.replace(" ", "-") + "-{index}"
        try:
            for index, (target, args) in enumerate(workers):
                parent_conn, child_conn = ctx.Pipe()
                PARENT_ENDS.add(parent_conn)
                self.conns.append(parent_conn)
                try:
                    proc = ctx.Process(
                        target=worker_main,
                        args=(target, child_conn, parent_pid, death_signal, *args),
                        name=name.format(index=index),
                        daemon=True,
                    )
                    proc.start()
                finally:
                    child_conn.close()
                # a started Process keeps its arguments; drop them, so that what they hold
                # (a shared buffer, a policy) is freed with its owner, not with this object
                proc._args, proc._kwargs = (), {}
                self.procs.append(proc)
        except BaseException:
            self.shutdown()
            raise
        self._unread = len(self.procs)  # each worker owes its start-up reply
        self._fd_index = {conn.fileno(): i for i, conn in enumerate(self.conns)}
        self._poller = select.poll()
        for fd in self._fd_index:
            self._poller.register(fd, select.POLLIN)

    @property
    def num_workers(self) -> int:
        """Number of workers."""
        return len(self.procs)

    # ------------------------------------------------------------------ sending
    def send(self, index: int, command: str, payload: Any = None, phase: str | None = None) -> None:
        """Send ``(command, payload)`` to worker ``index``; read its reply with ``gather``."""
        self._check_alive(phase or command)
        self._write(index, pickle.dumps((command, payload)), phase or command)

    def broadcast(self, code: bytes, phase: str) -> None:
        """Send the one-byte command ``code`` to every worker (the per-step path)."""
        if not self.alive:
            self._check_alive(phase)
        conns = self.conns
        self._unread += len(conns)  # counted first: an interruption can only over-count
        for index, conn in enumerate(conns):
            try:
                conn.send_bytes(code)
            except OSError:
                self._lose_dead(index, phase)
            except BaseException:
                self._broken = phase  # possibly half a message in the pipe
                raise

    def _write(self, index: int, data: bytes, phase: str) -> None:
        self._unread += 1
        try:
            self.conns[index].send_bytes(data)
        except OSError:
            self._lose_dead(index, phase)
        except BaseException:
            self._broken = phase  # possibly half a message in the pipe
            raise

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
        """One exchange: ``sync``, send ``command`` to the workers, return their replies in order.

        Every worker in ``indices`` (default: all, or the keys of ``payloads``) gets
        ``payloads[index]`` if given, else ``payload``.
        """
        self.sync()
        if indices is None:
            indices = list(payloads) if payloads is not None else range(len(self.conns))
        for index in indices:
            value = payloads[index] if payloads is not None else payload
            self._write(index, pickle.dumps((command, value)), phase)
        return self.gather(phase, indices, timeout)

    # ------------------------------------------------------------------ receiving
    def gather(
        self, phase: str, indices: Sequence[int] | None = None, timeout: float | None = None
    ) -> list:
        """Wait for one reply from each worker in ``indices`` (default: all), in their order.

        Every reply is read before a worker's exception is raised (the lowest index's), so the
        pipes stay in step and the pool stays usable. A dead worker raises ``WorkerDiedError``,
        a silent one ``WorkerTimeoutError`` after ``timeout`` seconds; both stop every worker.
        """
        self._check_alive(phase)
        n = len(self.conns)
        if indices is None or len(indices) == n:
            poller = self._poller
            if indices is None:
                indices = range(n)
                if CAN_SPIN:  # every worker was sent a command: the step path
                    wait_briefly(poller, n, MAIN_SPIN_S)
        else:
            poller = select.poll()
            for index in indices:
                poller.register(self.conns[index].fileno(), select.POLLIN)
        pending = set(indices)
        replies: dict[int, Any] = {}
        errors: dict[int, BaseException] = {}
        seconds = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + seconds
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._lose_hung(min(pending), phase, seconds)
            events = poller.poll(int(min(remaining, LIVENESS_S) * 1000) + 1)
            if not events:
                self._check_processes(pending, phase)
                continue
            for fd, _ in events:
                index = self._fd_index[fd]
                if index not in pending:
                    continue
                message = self._recv(index, phase)
                pending.discard(index)
                tag = message[:1]
                if tag == OK:
                    replies[index] = None
                elif tag == VALUE:
                    try:
                        replies[index] = pickle.loads(message[1:])
                    except Exception as err:  # noqa: BLE001 - reported as this worker's error
                        errors[index] = self._bad_value(index, phase, err)
                elif tag == ERROR:
                    errors[index] = self._raised(index, phase, message)
                else:
                    self._lose(WorkerError(self._text(BAD_REPLY, index, phase), index=index))
        if errors:
            raise errors[min(errors)]
        return [replies[index] for index in indices]

    def _recv(self, index: int, phase: str) -> bytes:
        try:
            message = self.conns[index].recv_bytes()
        except (EOFError, OSError):
            self._lose_dead(index, phase)
        except BaseException:
            self._broken = phase  # possibly half a message read
            raise
        self._unread -= 1
        return message

    def _check_processes(self, indices: Sequence[int], phase: str) -> None:
        # a worker whose pipe end is also held by a process it started gives no EOF on exit
        for index in sorted(indices):
            if not self.procs[index].is_alive() and not self.conns[index].poll(0):
                self._lose_dead(index, phase)

    def sync(self) -> None:
        """Make the pipes ready for a new exchange after an interrupted one (cheap otherwise).

        An exchange cut short in the main process (Ctrl-C while waiting, an exception between
        sending and gathering) leaves replies unread; each worker is then sent a token and
        every reply before its echo is dropped, so no later exchange reads an old reply. Call
        it before writing anything the workers may still be reading (shared memory).
        """
        if not self.alive:
            self._check_alive("sync")
        if self._broken is not None:
            self._lose(WorkerError(self._text(INTERRUPTED, 0, self._broken)))
        if self._unread:
            self._resync()

    def _resync(self) -> None:
        token = os.urandom(8)
        message = pickle.dumps((SYNC, token))
        for index in range(len(self.conns)):
            self._write(index, message, "sync")
        deadline = time.monotonic() + self.timeout
        for index, conn in enumerate(self.conns):
            while True:
                while not conn.poll(min(max(deadline - time.monotonic(), 0.0), LIVENESS_S)):
                    if time.monotonic() >= deadline:
                        self._lose_hung(index, "sync", self.timeout)
                    self._check_processes([index], "sync")
                if self._recv(index, "sync") == SYNCED + token:
                    break
        self._unread = 0

    # ------------------------------------------------------------------ failures
    def _text(self, template: str, index: int, phase: str, **fields: Any) -> str:
        return template.format(
            label=self.label, index=index, phase=phase, after=self.after_loss, **fields
        )

    def _raised(self, index: int, phase: str, message: bytes) -> BaseException:
        """The exception to raise for worker ``index``'s ``ERROR`` reply."""
        type_name, text, tb, original = decode_error_info(message)
        full = self._text(
            WORKER_RAISED, index, phase, type_name=type_name, message=text, traceback=tb
        )
        err: BaseException | None = None
        if isinstance(original, Exception):
            try:
                err = type(original)(full)
                str(err)  # an exception type whose __str__ fails is not re-raised as such
            except Exception:  # noqa: BLE001 - its constructor wants other arguments
                err = None
        if err is None:
            err = WorkerRaisedError(
                full, type_name=type_name, index=index, pid=self.procs[index].pid, phase=phase
            )
        if original is None:
            original = RemoteTraceback(type_name, text, tb)
        err.__cause__ = original
        return err

    def _bad_value(self, index: int, phase: str, error: Exception) -> WorkerError:
        err = WorkerError(
            self._text(BAD_VALUE, index, phase, error=f"{type(error).__name__}: {error}"),
            index=index,
            phase=phase,
        )
        err.__cause__ = error
        return err

    def _lose_dead(self, index: int, phase: str) -> NoReturn:
        if not self.alive:  # shut down meanwhile (by another thread): its pipes were closed
            raise WorkerError(self._text(STOPPED, index, phase), index=index, phase=phase)
        proc = self.procs[index]
        proc.join(DIED_JOIN_S)
        exitcode = proc.exitcode
        message = self._text(WORKER_DIED, index, phase, pid=proc.pid, how=describe_exit(exitcode))
        self._lose(
            WorkerDiedError(message, index=index, pid=proc.pid, phase=phase, exitcode=exitcode)
        )

    def _lose_hung(self, index: int, phase: str, seconds: float) -> NoReturn:
        proc = self.procs[index]
        message = self._text(
            WORKER_HUNG, index, phase, pid=proc.pid, seconds=seconds, timeout_arg=self.timeout_arg
        )
        proc.kill()  # a hung worker would not read "close" either
        self._lose(
            WorkerTimeoutError(message, index=index, pid=proc.pid, phase=phase, seconds=seconds)
        )

    def _lose(self, err: WorkerError) -> NoReturn:
        self.shutdown()
        raise err

    def _check_alive(self, phase: str) -> None:
        if not self.alive:
            raise WorkerError(self._text(STOPPED, 0, phase), phase=phase)

    # ------------------------------------------------------------------ stopping
    def shutdown(self) -> None:
        """Stop every worker (``close``, then kill after a grace period) and close the pipes.

        Idempotent; also runs when the pool is garbage-collected or the interpreter exits.
        """
        self.alive = False
        self._finalizer()

"""The main-process side of ParallelEnv's workers: start, message, watch and stop them."""

from __future__ import annotations

import os
import pickle
import select
import time
from collections.abc import Sequence
from typing import Any

import torch

# one-byte messages on the hot path; anything else is a pickled (command, payload) pair
STEP = b"s"
OK = b"k"
VALUE = b"v"
ERROR = b"e"

WORKER_DIED_ERROR = (
    "ParallelEnv worker {index} (pid {pid}) died unexpectedly during {phase} "
    "(exit code {exitcode}); the env was closed and reopens on the next reset()."
)
WORKER_HANG_ERROR = (
    "ParallelEnv worker {index} (pid {pid}) did not answer within {timeout:g} s during "
    "{phase} (worker_timeout={timeout:g}); the env was closed and reopens on the next reset()."
)
WORKER_RAISED_ERROR = (
    "ParallelEnv worker {index} raised {type_name} during {phase}: {message}\n\n"
    "Worker traceback:\n{traceback}"
)

_CLOSE_JOIN_S = 2.0  # grace given to workers to exit after "close" before they are killed
# Busy-wait windows before blocking on a pipe (see wait_briefly): a worker waiting for the next
# command, and the main process waiting for the workers' step answers.
WORKER_SPIN_S = 2e-4
MAIN_SPIN_S = 3e-4
# select.poll and os.sched_yield are POSIX-only (neither exists on Windows, sched_yield not on macOS)
CAN_SPIN = hasattr(select, "poll") and hasattr(os, "sched_yield")


def wait_briefly(poller: select.poll, ready: int, seconds: float) -> None:
    """Poll without sleeping until ``ready`` pipes are readable or ``seconds`` have passed.

    Waking a process blocked on a pipe (an idle CPU, in a VM a halted vCPU) costs tens of
    microseconds, about a Pendulum step, and where the kernel places the woken process varies
    from run to run. Workers poll like this between commands and the main process while the
    workers step. Measured on 2 cores (medians of 7 rollouts of 500 steps), ParallelEnv(2,
    Pendulum) steps in ~160 µs this way, against 175-250 µs (bimodal) with worker 0 alone
    polling and ~275 µs with none; ParallelEnv(4, Pendulum) in ~280-320 µs against ~390 µs.
    ``sched_yield`` hands the core to any other runnable process, so only idle time is spent;
    after the window the caller blocks as usual. It changes timing only: the same messages are
    then read as before.
    """
    deadline = time.monotonic() + seconds
    while len(poller.poll(0)) < ready and time.monotonic() < deadline:
        os.sched_yield()


class _ThreadBudget:
    """Torch threads the main process gave up for workers, shared by every ParallelEnv."""

    base: int | None = None
    given: int = 0

    @classmethod
    def take(cls, n: int) -> None:
        if cls.given == 0:
            cls.base = torch.get_num_threads()
        cls.given += n
        torch.set_num_threads(max(1, cls.base - cls.given))

    @classmethod
    def give_back(cls, n: int) -> None:
        cls.given -= n
        torch.set_num_threads(cls.base if cls.given <= 0 else max(1, cls.base - cls.given))


def worker_error(index: int, phase: str, info: tuple) -> Exception:
    """Rebuild a worker's exception in the main process, naming the worker."""
    type_name, message, tb, payload = info
    try:
        original = pickle.loads(payload) if payload is not None else None
    except Exception:
        original = None
    text = WORKER_RAISED_ERROR.format(
        index=index, type_name=type_name, phase=phase, message=message, traceback=tb
    )
    err: Exception
    try:
        err = type(original)(text) if original is not None else RuntimeError(text)
    except Exception:
        err = RuntimeError(text)
    err.__cause__ = original
    return err


class WorkerPool:
    """Processes, pipes and the shutdown logic of one started ParallelEnv.

    It holds no reference to the env, so a ``weakref.finalize`` on the env can call
    ``shutdown`` when the env is garbage-collected or the interpreter exits.
    """

    def __init__(self, procs: list, conns: list, timeout: float, threads_taken: int):
        self.procs = procs
        self.conns = conns
        self.timeout = timeout
        self.threads_taken = threads_taken
        self.alive = True
        self._fd_to_index = {conn.fileno(): i for i, conn in enumerate(conns)}
        self._poller = select.poll()
        for fd in self._fd_to_index:
            self._poller.register(fd, select.POLLIN)

    def send(self, index: int, command: str, payload: Any = None) -> None:
        self.conns[index].send_bytes(pickle.dumps((command, payload)))

    def broadcast(self, message: bytes) -> None:
        for conn in self.conns:
            conn.send_bytes(message)

    def gather(
        self, phase: str, indices: Sequence[int] | None = None, timeout: float | None = None
    ) -> list:
        """Wait for one answer from each worker in ``indices``; raise on any failure.

        Every answer is read before a worker's exception is re-raised, so the pipes
        stay in step and the env remains usable. A dead or silent worker shuts the
        pool down and raises RuntimeError naming it.
        """
        if indices is not None:
            poller, pending = select.poll(), set(indices)
            for i in pending:
                poller.register(self.conns[i].fileno(), select.POLLIN)
        else:
            poller, pending = self._poller, set(range(len(self.conns)))
            if CAN_SPIN:  # every worker was sent a command: the step path
                wait_briefly(poller, len(pending), MAIN_SPIN_S)
        replies: dict[int, Any] = {}
        errors = []
        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        while pending:
            wait_ms = max(0, int((deadline - time.monotonic()) * 1000))
            events = poller.poll(wait_ms)
            if not events:
                index = min(pending)
                self._fail(WORKER_HANG_ERROR, index, phase, timeout=timeout)
            for fd, _ in events:
                index = self._fd_to_index[fd]
                if index not in pending:
                    continue
                try:
                    message = self.conns[index].recv_bytes()
                except (EOFError, OSError):
                    self._fail(WORKER_DIED_ERROR, index, phase)
                pending.discard(index)
                tag = message[:1]
                if tag == ERROR:
                    errors.append(worker_error(index, phase, pickle.loads(message[1:])))
                elif tag == VALUE:
                    replies[index] = pickle.loads(message[1:])
                else:
                    replies[index] = None
        if errors:
            raise errors[0]
        return [replies[i] for i in sorted(replies)]

    def _fail(self, template: str, index: int, phase: str, **fmt) -> None:
        proc = self.procs[index]
        proc.join(0.1)
        message = template.format(
            index=index, pid=proc.pid, phase=phase, exitcode=proc.exitcode, **fmt
        )
        self.shutdown()
        raise RuntimeError(message)

    def shutdown(self) -> None:
        """Ask every worker to exit, kill the ones that do not, release pipes and threads."""
        if not self.alive:
            return
        self.alive = False
        close = pickle.dumps(("close", None))
        for conn in self.conns:
            try:
                conn.send_bytes(close)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + _CLOSE_JOIN_S
        for proc in self.procs:
            proc.join(max(0.0, deadline - time.monotonic()))
        for proc in self.procs:
            if proc.is_alive():
                proc.kill()
                proc.join(1.0)
            proc.close()
        for conn in self.conns:
            conn.close()
        if self.threads_taken:
            _ThreadBudget.give_back(self.threads_taken)

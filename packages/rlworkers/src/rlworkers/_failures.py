"""How a worker pool reports failures: the message templates and the loss of a worker.

``PoolFailures`` (a base of ``WorkerPool``) turns what went wrong into one typed error naming
the worker, its pid and the phase: an exception a worker sent (re-raised with its own type when
it can be rebuilt here, else ``WorkerRaisedError``), a dead worker (``WorkerDiedError``, with
its exit code or signal, and why when the exit status says it: a script without
``if __name__ == "__main__":``), a silent one (``WorkerTimeoutError``, naming the argument that
set the timeout). A dead or silent worker stops every worker first (``_lose``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

from ._processes import main_module
from ._protocol import EXIT_UNGUARDED, decode_error_info
from .errors import (
    RemoteTraceback,
    WorkerDiedError,
    WorkerError,
    WorkerRaisedError,
    WorkerTimeoutError,
    describe_exit,
)

__all__ = ["PoolFailures"]

WORKER_RAISED = (
    "{label} {index} raised {type_name} during {phase}: {message}\n\nWorker traceback:\n{traceback}"
)
WORKER_DIED = "{who} (pid {pid}) died unexpectedly during {phase} ({how}){after}"
# a spawn/forkserver worker that died before its own code ran
NOT_ENTERED = (
    " It died before running its worker code: while importing the main module ({main}) again "
    "or unpickling what it was sent (its traceback, if any, is on this process's stderr)."
)
UNGUARDED_MAIN = (
    "{who} (pid {pid}) died during {phase}: it imported the main module ({main}) again, as "
    "{method} workers do, and that module's top-level code started worker processes of its "
    "own{after}\nPut the code that starts workers (and anything else that must run once) "
    'under the guard:\n\n    if __name__ == "__main__":\n        ...\n'
)
WORKER_HUNG = (
    "{who} (pid {pid}) did not answer within {seconds:g} s during {phase} "
    "({timeout_arg}={seconds:g}){after}"
)
BAD_VALUE = "{label} {index} answered {phase} with a value that cannot be unpickled here: {error}"
INTERRUPTED = (
    "an exchange with the {label}s was interrupted in the middle of a message during {phase}, "
    "so their pipes cannot be trusted; every worker was stopped{after}"
)
BAD_REPLY = "{label} {index} sent a malformed reply during {phase}; every worker was stopped{after}"
STOPPED = "the {label}s were stopped (shutdown() or an earlier failure){after}"
START_PHASE = "start"  # the phase of the start replies, timed by the pool's start_timeout

DIED_JOIN_S = 1.0  # a worker found dead: wait this long for its exit code


class PoolFailures:
    """The failure side of ``WorkerPool``: builds its errors and stops the workers on a loss."""

    label: str
    after_loss: str
    start_method: str
    timeout_arg: str
    start_timeout_arg: str
    procs: list
    alive: bool
    _channel: Any
    _process_of: list
    shutdown: Callable[[], None]

    def _text(self, template: str, index: int, phase: str, **fields: Any) -> str:
        return template.format(
            label=self.label, index=index, phase=phase, after=self.after_loss, **fields
        )

    def _who(self, process: int) -> str:
        """How errors name worker process ``process``: by its slot, or its range of slots."""
        first = self._channel.first
        low, high = first[process], first[process + 1] - 1
        return f"{self.label} {low}" if low == high else f"{self.label}s {low}-{high}"

    def _raised(self, index: int, phase: str, message: bytes) -> BaseException:
        """The exception to raise for slot ``index``'s ``ERROR`` reply."""
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
            pid = self.procs[self._process_of[index]].pid
            err = WorkerRaisedError(full, type_name=type_name, index=index, pid=pid, phase=phase)
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

    def _died_text(self, process: int, phase: str, exitcode: int | None) -> str:
        """Why worker process ``process`` died, as far as its exit status and flags tell."""
        pid = self.procs[process].pid
        who = self._who(process)
        if exitcode == EXIT_UNGUARDED:
            return self._text(
                UNGUARDED_MAIN,
                process,
                phase,
                who=who,
                pid=pid,
                main=main_module(),
                method=self.start_method,
            )
        message = self._text(
            WORKER_DIED, process, phase, who=who, pid=pid, how=describe_exit(exitcode)
        )
        if self.start_method != "fork" and not self._channel.entered[process]:
            message += NOT_ENTERED.format(main=main_module())
        return message

    def _lose_dead(self, process: int, phase: str) -> NoReturn:
        if not self.alive:  # shut down meanwhile (by another thread): its pipes were closed
            raise WorkerError(self._text(STOPPED, process, phase), index=process, phase=phase)
        proc = self.procs[process]
        proc.join(DIED_JOIN_S)
        exitcode = proc.exitcode
        self._lose(
            WorkerDiedError(
                self._died_text(process, phase, exitcode),
                index=process,
                pid=proc.pid,
                phase=phase,
                exitcode=exitcode,
            )
        )

    def _lose_hung(self, processes: list[int], phase: str, seconds: float) -> NoReturn:
        """Every process of ``processes`` is silent past its deadline: kill them (a hung worker
        would not read "close" either) and raise for the first."""
        for process in processes:
            self.procs[process].kill()
        process = processes[0]
        pid = self.procs[process].pid
        timeout_arg = self.start_timeout_arg if phase == START_PHASE else self.timeout_arg
        message = self._text(
            WORKER_HUNG,
            process,
            phase,
            who=self._who(process),
            pid=pid,
            seconds=seconds,
            timeout_arg=timeout_arg,
        )
        self._lose(
            WorkerTimeoutError(message, index=process, pid=pid, phase=phase, seconds=seconds)
        )

    def _lose(self, err: WorkerError) -> NoReturn:
        self.shutdown()
        raise err

    def _check_alive(self, phase: str) -> None:
        if not self.alive:
            raise WorkerError(self._text(STOPPED, 0, phase), phase=phase)

"""Starting and stopping a pool's processes: the fork server's preload, the guard against
starting workers from a worker that is still importing the main module, and ``Processes``
(what stopping the workers needs, held apart from the pool so that a finalizer can hold it).
"""

from __future__ import annotations

import multiprocessing as mp
import multiprocessing.forkserver
import os
import pickle
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from ._channel import FlagChannel
from ._loop import PARENT_ENDS
from ._protocol import CLOSE, EXIT_UNGUARDED

__all__ = ["Processes", "prepare_forkserver", "exit_if_bootstrapping", "start_process"]

CLOSE_GRACE_S = 2.0  # given to the workers to exit after "close" before they are killed
KILL_JOIN_S = 5.0
# modules a fork server imports once, so that the workers it forks start with them loaded;
# users of the pool add theirs (``preload``: e.g. rlbatched, which brings torch and tensordict)
FORKSERVER_PRELOAD = ("rlworkers",)
# multiprocessing's error in a child that starts a process while it imports the main module
BOOTSTRAPPING = "before the current process has finished its bootstrapping phase"
UNGUARDED_NOTE = (
    "rlworkers: this process (pid {pid}) is a worker that imports the main module again, as "
    "spawn and forkserver workers do, and that module's top-level code started workers of "
    'its own; it exits (status {status}). Put that code under `if __name__ == "__main__":`.\n'
)


def prepare_forkserver(modules: Iterable[str] = ()) -> None:
    """Ask the fork server to preload ``FORKSERVER_PRELOAD`` and ``modules`` when it starts.

    The fork server starts on the first ``forkserver`` process and keeps its modules for the
    life of this process: later workers fork from it with torch already imported. Modules a
    user asked for (``set_forkserver_preload``) are kept; missing ones are skipped by the
    server. A server already running is not restarted.

    Examples:
        >>> prepare_forkserver(["json"])
        >>> {"rlworkers", "json"} <= set(multiprocessing.forkserver._forkserver._preload_modules)
        True
    """
    server = getattr(multiprocessing.forkserver, "_forkserver", None)
    current = list(getattr(server, "_preload_modules", None) or [])
    wanted = current + [m for m in (*FORKSERVER_PRELOAD, *modules) if m not in current]
    if wanted != current:
        mp.get_context("forkserver").set_forkserver_preload(wanted)


def _bootstrapping() -> bool:
    """Whether this process is a spawn/forkserver child still importing the main module.

    multiprocessing marks it so while it prepares the child (``_inheriting``, the flag its own
    check before starting a process reads).
    """
    return bool(getattr(mp.current_process(), "_inheriting", False))


def _exit_unguarded() -> None:
    sys.stderr.write(UNGUARDED_NOTE.format(pid=os.getpid(), status=EXIT_UNGUARDED))
    sys.stderr.flush()
    # the process is doomed (multiprocessing would raise in it): the exit status tells the
    # main process why, where an exception's traceback would only reach this one's stderr
    os._exit(EXIT_UNGUARDED)


def exit_if_bootstrapping() -> None:
    """Exit with ``EXIT_UNGUARDED`` when called in a worker still importing the main module.

    That happens when a script without ``if __name__ == "__main__":`` starts a pool under
    spawn or forkserver: each worker imports the script again, and its top-level code starts a
    pool in turn. The main process then names the missing guard (``WorkerDiedError``).
    """
    if _bootstrapping():
        _exit_unguarded()


def start_process(proc: Any) -> None:
    """``proc.start()``; a child still importing the main module exits as in
    ``exit_if_bootstrapping`` (multiprocessing's own check, should the flag be missed)."""
    try:
        proc.start()
    except RuntimeError as err:
        if BOOTSTRAPPING in str(err):
            _exit_unguarded()
        raise


def main_module() -> str:
    """The main module's file, for messages (``"the main module"`` when it has none)."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    return os.path.abspath(path) if path else "the main module"


class Processes:
    """What stopping the workers needs, apart from the pool (so a finalizer can hold it)."""

    def __init__(self, on_shutdown: Callable[[], None] | None) -> None:
        self.procs: list = []
        self.conns: list = []
        self.channel: FlagChannel | None = None
        self.owner = os.getpid()
        self.on_shutdown = on_shutdown

    def stop(self) -> None:
        """Ask every worker to exit, kill those that do not, release pipes; runs once."""
        if os.getpid() != self.owner:
            return  # a copy inherited by a forked process: these workers are not its children
        try:
            close = pickle.dumps((CLOSE, None))
            for process, conn in enumerate(self.conns):
                try:
                    conn.send_bytes(close)
                except (OSError, ValueError):
                    continue  # dead worker or closed pipe
                self.channel.piped[process] += 1
                self.channel.wake[process].release()
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

"""Worker processes that serve commands: a pool, its worker loop and protocol, typed errors.

Nothing here knows about environments: ``rlbatched.ParallelEnv`` and
``rlcollectors.MultiSyncDataCollector`` run their sub-envs and collectors on it.
"""

from ._loop import serve
from ._pickling import CloudpickleBox, clean_worker_environ, dumps
from ._pool import WorkerPool
from ._processes import prepare_forkserver
from ._version import __version__
from .errors import (
    RemoteTraceback,
    WorkerDiedError,
    WorkerError,
    WorkerRaisedError,
    WorkerTimeoutError,
    describe_exit,
)

__all__ = [
    # the pool and the worker side
    "WorkerPool",
    "serve",
    "prepare_forkserver",
    # crossing into a worker
    "CloudpickleBox",
    "dumps",
    "clean_worker_environ",
    # errors (rlworkers.errors)
    "WorkerError",
    "WorkerDiedError",
    "WorkerTimeoutError",
    "WorkerRaisedError",
    "RemoteTraceback",
    "describe_exit",
    "__version__",
]

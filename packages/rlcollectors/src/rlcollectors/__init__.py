"""Data collectors: SyncDataCollector, MultiSyncDataCollector and RayCollector."""

from ._multi_sync import MultiSyncDataCollector
from ._ray import RayCollector
from ._split import split_trajectories
from ._sync import SyncDataCollector
from ._version import __version__
from .errors import ActorRestartedError, CollectorError

__all__ = [
    # collectors
    "SyncDataCollector",
    "MultiSyncDataCollector",
    "RayCollector",
    # utilities
    "split_trajectories",
    # errors (rlcollectors.errors)
    "CollectorError",
    "ActorRestartedError",
    "__version__",
]

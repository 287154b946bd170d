"""Data collectors: SyncDataCollector, MultiSyncDataCollector and RayCollector."""

from ._multi_sync import MultiSyncDataCollector
from ._ray import RayCollector
from ._split import split_trajectories
from ._sync import SyncDataCollector
from ._version import __version__

__all__ = [
    # collectors
    "SyncDataCollector",
    "MultiSyncDataCollector",
    "RayCollector",
    # utilities
    "split_trajectories",
    "__version__",
]

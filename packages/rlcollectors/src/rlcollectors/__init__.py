"""Data collectors: SyncDataCollector and MultiSyncDataCollector."""

from ._multi_sync import MultiSyncDataCollector
from ._split import split_trajectories
from ._sync import SyncDataCollector
from ._version import __version__

__all__ = [
    # collectors
    "SyncDataCollector",
    "MultiSyncDataCollector",
    # utilities
    "split_trajectories",
    "__version__",
]

"""Batched environments: SerialEnv (in process) and ParallelEnv (worker processes)."""

from ._batched_base import BatchedEnvBase
from ._parallel import ParallelEnv
from ._serial import SerialEnv
from ._version import __version__

__all__ = [
    # batched envs
    "SerialEnv",
    "ParallelEnv",
    "BatchedEnvBase",
    "__version__",
]

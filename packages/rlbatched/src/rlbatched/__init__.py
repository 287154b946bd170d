"""Batched environments: SerialEnv (in process), ParallelEnv (worker processes) and AsyncEnvPool."""

from ._async_pool import AsyncEnvPool
from ._batched_base import BatchedEnvBase
from ._metadata import EnvMetaData, get_env_metadata
from ._parallel import ParallelEnv
from ._serial import SerialEnv
from ._version import __version__

__all__ = [
    # batched envs
    "SerialEnv",
    "ParallelEnv",
    "BatchedEnvBase",
    # asynchronous pools
    "AsyncEnvPool",
    # what a batched env knows of its sub-envs before running them
    "EnvMetaData",
    "get_env_metadata",
    "__version__",
]

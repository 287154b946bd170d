"""The core RL environment API: ``EnvBase``, ``step_mdp`` and env utilities.

Transforms live in the ``rlcore.transforms`` subpackage (imported explicitly).
"""

from rlspecs import make_composite_from_td

from ._checks import check_env_specs
from ._dense_step import DenseLeaf, DenseStepper, dense_stepper, is_current
from ._done import terminated_or_truncated
from ._env_base import EnvBase
from ._env_creator import EnvCreator
from ._marl import MarlGroupMapType, check_marl_grouping
from ._model_based import ModelBasedEnvBase
from ._optional import import_optional, missing_extra_message
from ._pickling import CloudpickleBox, clean_worker_environ
from ._step_mdp import StepMDP, step_mdp
from ._version import __version__
from ._worker_errors import (
    EnvClosedError,
    RemoteTraceback,
    WorkerDiedError,
    WorkerError,
    WorkerRaisedError,
    WorkerTimeoutError,
)
from ._worker_loop import serve
from ._worker_pool import WorkerPool

__all__ = [
    # environments
    "EnvBase",
    "ModelBasedEnvBase",
    "EnvCreator",
    "CloudpickleBox",
    "clean_worker_environ",
    # dense steps into batched buffers (batched envs and the sub-envs that offer them)
    "DenseStepper",
    "DenseLeaf",
    "dense_stepper",
    "is_current",
    # transitions and done flags
    "step_mdp",
    "StepMDP",
    "terminated_or_truncated",
    # checks and spec helpers
    "check_env_specs",
    "make_composite_from_td",
    # worker processes
    "WorkerPool",
    "serve",
    "WorkerError",
    "WorkerDiedError",
    "WorkerTimeoutError",
    "WorkerRaisedError",
    "EnvClosedError",
    "RemoteTraceback",
    # multi-agent
    "MarlGroupMapType",
    "check_marl_grouping",
    # optional dependencies
    "import_optional",
    "missing_extra_message",
    "__version__",
]

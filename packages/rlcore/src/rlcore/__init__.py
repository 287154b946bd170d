"""The core RL environment API: ``EnvBase``, ``step_mdp`` and env utilities.

Transforms live in the ``rltransforms`` subpackage (imported explicitly).
"""

from rlspecs import make_composite_from_td

from ._checks import check_env_specs
from ._done_rule import done_from, fill_level
from ._env_base import EnvBase
from ._env_creator import EnvCreator
from ._marl import MarlGroupMapType, check_marl_grouping
from ._model_based import ModelBasedEnvBase
from ._optional import import_optional, missing_extra_message
from ._partial_steps import placeholder_next
from ._resets import any_true, reset_rows, terminated_or_truncated
from ._shared_memory import keep_shared, starting_process
from ._step_mdp import StepMDP, step_mdp
from ._stepper import StepLeaf, Stepper, is_current, numpy_dtype, stepper_of
from ._version import __version__
from .errors import EnvClosedError, EnvError

__all__ = [
    # environments
    "EnvBase",
    "ModelBasedEnvBase",
    "EnvCreator",
    # steppers: a library env's results straight into buffers (rollout, batched envs)
    "Stepper",
    "StepLeaf",
    "stepper_of",
    "is_current",
    "numpy_dtype",
    # the step contract: transitions, the done rule, resets
    "step_mdp",
    "StepMDP",
    "done_from",
    "fill_level",
    "terminated_or_truncated",
    "reset_rows",
    "any_true",
    "placeholder_next",
    # checks and spec helpers
    "check_env_specs",
    "make_composite_from_td",
    # errors (rlcore.errors)
    "EnvError",
    "EnvClosedError",
    # state shared with processes being started (EnvCreator, VecNorm)
    "keep_shared",
    "starting_process",
    # multi-agent
    "MarlGroupMapType",
    "check_marl_grouping",
    # optional dependencies
    "import_optional",
    "missing_extra_message",
    "__version__",
]

"""Env transforms: ``TransformedEnv`` and the transforms it runs, grouped by what they transform.

Built on ``rlcore``'s ``EnvBase``, which finds this package when ``append_transform`` or
``auto_reset=True`` need it.
"""

from . import functional
from ._action import ActionMask, DiscreteActionProjection
from ._action_scaling import ActionScaling
from ._auto_reset import AutoResetEnv, AutoResetTransform
from ._auto_unwrap import auto_unwrap_transformed_env, set_auto_unwrap_transformed_env
from ._base import ObservationTransform, Transform
from ._batch_size import BatchSizeTransform
from ._burn_in import BurnInTransform
from ._casts import DeviceCastTransform, DoubleToFloat, DTypeCastTransform
from ._checks import FiniteTensorDictCheck
from ._chunking import ActionChunkTransform
from ._compose import Compose
from ._conditional import ConditionalPolicySwitch, ConditionalSkip
from ._counters import InitTracker, StepCounter
from ._crop import Crop
from ._discretize import ActionDiscretizer
from ._env_steps import EndOfLifeTransform, FrameSkipTransform, NoopResetEnv
from ._episode_ends import RandomTruncationTransform, TerminateTransform
from ._expand_as import ExpandAs
from ._flatten_action import FlattenAction
from ._frames import CatFrames, TimeMaxPool
from ._gsde import gSDENoise
from ._images import CenterCrop, GrayScale, Resize, ToTensorImage
from ._keys import ExcludeTransform, RemoveEmptySpecs, RenameTransform, SelectTransform
from ._kl_reward_transform import KLRewardTransform
from ._module_transform import ModuleTransform
from ._multi_action import MultiAction
from ._multi_step_transform import MultiStepTransform
from ._normalization import ObservationNorm
from ._observation import (
    CatTensors,
    FlattenObservation,
    PermuteTransform,
    SqueezeTransform,
    UnsqueezeTransform,
)
from ._observation_delta import NextObservationDelta
from ._pin_memory import PinMemoryTransform
from ._primers import TensorDictPrimer
from ._returns import Reward2GoTransform, TargetReturn
from ._reward import BinarizeReward, RewardClipping, RewardScaling, RewardSum
from ._reward_shaping import LineariseRewards, SuccessReward
from ._sequences import RandomCropTensorDict
from ._stack import Stack
from ._timing import Timer
from ._traj_counter import TrajCounter
from ._transformed_env import TransformedEnv
from ._unary import Hash, UnaryTransform
from ._values import ClipTransform, SignTransform
from ._vec_gym_env_transform import VecGymEnvTransform
from ._vecnorm import VecNorm
from ._vecnorm_v2 import VecNormV2
from ._version import __version__

__all__ = [
    # env and base classes
    "TransformedEnv",
    "Transform",
    "ObservationTransform",
    "Compose",
    # whether wrapping a TransformedEnv unwraps it (current torchrl's switch)
    "set_auto_unwrap_transformed_env",
    "auto_unwrap_transformed_env",
    # counters and trackers
    "StepCounter",
    "InitTracker",
    # observations: layout
    "CatTensors",
    "FlattenObservation",
    "UnsqueezeTransform",
    "SqueezeTransform",
    "PermuteTransform",
    # images
    "ToTensorImage",
    "Resize",
    "CenterCrop",
    "GrayScale",
    # frames over time (stateful)
    "CatFrames",
    "TimeMaxPool",
    # primers (entries written at reset)
    "TensorDictPrimer",
    # env steps and episode structure
    "FrameSkipTransform",
    "NoopResetEnv",
    "EndOfLifeTransform",
    # returns
    "TargetReturn",
    "Reward2GoTransform",
    "MultiStepTransform",
    "KLRewardTransform",
    # values (observations, rewards or inputs)
    "ClipTransform",
    "SignTransform",
    # normalisation
    "ObservationNorm",
    "VecNorm",
    # rewards
    "RewardSum",
    "RewardClipping",
    "RewardScaling",
    "BinarizeReward",
    # actions
    "DiscreteActionProjection",
    "ActionMask",
    # dtypes and devices
    "DTypeCastTransform",
    "DoubleToFloat",
    "DeviceCastTransform",
    # keys
    "RenameTransform",
    "ExcludeTransform",
    "SelectTransform",
    "RemoveEmptySpecs",
    # data checks, memory, batch size, trajectory crops
    "FiniteTensorDictCheck",
    "PinMemoryTransform",
    "BatchSizeTransform",
    "RandomCropTensorDict",
    # exploration noise, burn-in of stored sequences, self-resetting envs
    "gSDENoise",
    "BurnInTransform",
    "AutoResetEnv",
    "AutoResetTransform",
    "VecGymEnvTransform",
    # current torchrl's transforms (no torchrl 0.4 counterpart)
    "ActionDiscretizer",
    "ActionScaling",
    "FlattenAction",
    "MultiAction",
    "ActionChunkTransform",
    "LineariseRewards",
    "SuccessReward",
    "Stack",
    "ExpandAs",
    "Crop",
    "UnaryTransform",
    "Hash",
    "TrajCounter",
    "Timer",
    "TerminateTransform",
    "RandomTruncationTransform",
    "ConditionalSkip",
    "ConditionalPolicySwitch",
    "ModuleTransform",
    "NextObservationDelta",
    "VecNormV2",
    # stateless functions (torchrl's envs.transforms.functional)
    "functional",
    "__version__",
]

"""Env transforms: `TransformedEnv` and the transforms it runs, grouped by what they transform."""

from ._action import ActionMask, DiscreteActionProjection
from ._auto_reset import AutoResetEnv, AutoResetTransform
from ._base import Compose, ObservationTransform, Transform
from ._batch_size import BatchSizeTransform
from ._burn_in import BurnInTransform
from ._casts import DeviceCastTransform, DoubleToFloat, DTypeCastTransform
from ._checks import FiniteTensorDictCheck
from ._counters import InitTracker, StepCounter
from ._env_steps import EndOfLifeTransform, FrameSkipTransform, NoopResetEnv
from ._frames import CatFrames, TimeMaxPool
from ._gsde import gSDENoise
from ._images import CenterCrop, GrayScale, Resize, ToTensorImage
from ._keys import ExcludeTransform, RemoveEmptySpecs, RenameTransform, SelectTransform
from ._normalization import ObservationNorm
from ._observation import (
    CatTensors,
    FlattenObservation,
    PermuteTransform,
    SqueezeTransform,
    UnsqueezeTransform,
)
from ._pin_memory import PinMemoryTransform
from ._primers import TensorDictPrimer
from ._returns import Reward2GoTransform, TargetReturn
from ._reward import BinarizeReward, RewardClipping, RewardScaling, RewardSum
from ._sequences import RandomCropTensorDict
from ._transformed_env import TransformedEnv
from ._values import ClipTransform, SignTransform
from ._vecnorm import VecNorm

__all__ = [
    # env and base classes
    "TransformedEnv",
    "Transform",
    "ObservationTransform",
    "Compose",
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
]

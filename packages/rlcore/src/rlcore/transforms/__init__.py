"""Env transforms: `TransformedEnv` and the transforms it runs."""

from ._base import Compose, Transform
from ._counters import InitTracker, StepCounter
from ._dtype import DoubleToFloat, DTypeCastTransform
from ._images import ToTensorImage
from ._keys import ExcludeTransform, RenameTransform, SelectTransform
from ._observation import CatTensors, ObservationNorm
from ._reward import RewardClipping, RewardSum
from ._transformed_env import TransformedEnv

__all__ = [
    # env and base classes
    "TransformedEnv",
    "Transform",
    "Compose",
    # counters and trackers
    "StepCounter",
    "InitTracker",
    # observations
    "CatTensors",
    "ObservationNorm",
    "ToTensorImage",
    # dtypes
    "DTypeCastTransform",
    "DoubleToFloat",
    # rewards
    "RewardSum",
    "RewardClipping",
    # keys
    "RenameTransform",
    "ExcludeTransform",
    "SelectTransform",
]

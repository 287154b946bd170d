"""Gymnasium, EnvPool and DeepMind Control wrappers for the rlcore env API."""

from ._backend import gym_backend, set_gym_backend
from ._dm_control import DMControlEnv, DMControlWrapper
from ._envpool import MultiThreadedEnv, MultiThreadedEnvWrapper
from ._extras import HAS_DMC, HAS_ENVPOOL, HAS_GYM
from ._gym import GymEnv, GymWrapper
from ._gym_like import GymLikeEnv
from ._gym_spaces import (
    _gym_to_torchrl_spec_transform,
    _torchrl_to_gym_spec_transform,
    space_to_spec,
    spec_to_space,
)
from ._info_reader import BaseInfoDictReader, default_info_dict_reader
from ._register_gym import register_gym
from ._version import __version__
from ._wrapper_api import _is_from_pixels

# seed-era names of the availability flags
_has_gym = HAS_GYM
_has_gymnasium = HAS_GYM  # torchrl 0.4: gymnasium, beside gym; gymnasium is ours
_has_dmc = HAS_DMC
_has_dm_control = HAS_DMC
_has_envpool = HAS_ENVPOOL

__all__ = [
    # base and info dicts
    "GymLikeEnv",
    "BaseInfoDictReader",
    "default_info_dict_reader",
    # gymnasium
    "GymEnv",
    "GymWrapper",
    "HAS_GYM",
    "gym_backend",
    "set_gym_backend",
    # spaces <-> specs, and our envs as gymnasium envs
    "space_to_spec",
    "spec_to_space",
    "register_gym",
    # dm_control
    "DMControlEnv",
    "DMControlWrapper",
    "HAS_DMC",
    # envpool
    "MultiThreadedEnv",
    "MultiThreadedEnvWrapper",
    "HAS_ENVPOOL",
    # seed-era aliases
    "_has_dmc",
    "_has_dm_control",
    "_has_envpool",
    "_has_gym",
    "_has_gymnasium",
    # torchrl 0.4's private names that ported code imports
    "_gym_to_torchrl_spec_transform",
    "_torchrl_to_gym_spec_transform",
    "_is_from_pixels",
    "__version__",
]

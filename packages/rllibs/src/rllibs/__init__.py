"""Gymnasium, EnvPool and DeepMind Control wrappers for the rlcore env API."""

from ._dm_control import DMControlEnv, DMControlWrapper
from ._envpool import MultiThreadedEnv, MultiThreadedEnvWrapper
from ._extras import HAS_DMC, HAS_ENVPOOL, HAS_GYM
from ._gym import GymEnv, GymWrapper
from ._gym_like import GymLikeEnv
from ._info_reader import default_info_dict_reader
from ._version import __version__

# seed-era names of the availability flags
_has_gym = HAS_GYM
_has_dmc = HAS_DMC
_has_envpool = HAS_ENVPOOL

__all__ = [
    # base and info dicts
    "GymLikeEnv",
    "default_info_dict_reader",
    # gymnasium
    "GymEnv",
    "GymWrapper",
    "HAS_GYM",
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
    "_has_envpool",
    "_has_gym",
    "__version__",
]

"""The seed's ``_utils_internal`` module.

Generic helpers come from ``rlmocks.testing``; the Gym-dependent ones live here, because
``rlmocks`` must not depend on Gym. This module imports without Gym: the ``*_VERSIONED``
functions are parametrize values, evaluated by the tests themselves.
"""

from __future__ import annotations

import importlib.util

import torch

from rlbatched import ParallelEnv, SerialEnv
from rlmocks.testing import (  # noqa: F401  (re-exported for the seed)
    check_rollout_consistency_multikey_env,
    decorate_thread_sub_func,
    get_default_devices,
    rand_reset,
)
from rltransforms import (
    Compose,
    ObservationNorm,
    RewardClipping,
    ToTensorImage,
    TransformedEnv,
)

_HAS_GYMNASIUM = importlib.util.find_spec("gymnasium") is not None


def _gym_ids() -> dict[str, str] | None:
    # With gymnasium (any version) the current ids apply; we never fall back to legacy gym.
    if not _HAS_GYMNASIUM:
        return None
    return {
        "cartpole": "CartPole-v1",
        "pendulum": "Pendulum-v1",
        "halfcheetah": "HalfCheetah-v4",
        "pong": "ALE/Pong-v5",
    }


def CARTPOLE_VERSIONED() -> str | None:  # noqa: N802  (seed name)
    ids = _gym_ids()
    return ids and ids["cartpole"]


def PENDULUM_VERSIONED() -> str | None:  # noqa: N802
    ids = _gym_ids()
    return ids and ids["pendulum"]


def HALFCHEETAH_VERSIONED() -> str | None:  # noqa: N802
    ids = _gym_ids()
    return ids and ids["halfcheetah"]


def PONG_VERSIONED() -> str | None:  # noqa: N802
    ids = _gym_ids()
    return ids and ids["pong"]


def _first_leaf_key(spec):
    keys = list(spec.keys(True, True))
    return keys[0] if keys else None


def _get_transform_out(env_name, transformed_in, obs_key):
    if env_name == PONG_VERSIONED():
        if not transformed_in:
            return lambda: Compose(ToTensorImage(in_keys=[obs_key]), RewardClipping(0, 0.1))
        return lambda: Compose(ObservationNorm(in_keys=[obs_key], loc=0, scale=1))
    if not transformed_in:
        return lambda: Compose(
            ObservationNorm(in_keys=[obs_key], loc=0.5, scale=1.1), RewardClipping(0, 0.1)
        )
    return lambda: Compose(ObservationNorm(in_keys=[obs_key], loc=1.0, scale=1.0))


def _make_envs(
    env_name,
    frame_skip,
    transformed_in,
    transformed_out,
    N,
    device="cpu",
    kwargs=None,
):
    """Build ``(env_parallel, env_serial, env_multithread, env0)`` for a Gym env id."""
    from rllibs import GymEnv

    torch.manual_seed(0)

    def create_env_fn():
        env = GymEnv(env_name, frame_skip=frame_skip, device=device)
        if not transformed_in:
            return env
        key = _first_leaf_key(env.observation_spec)
        if env_name == PONG_VERSIONED():
            transform = Compose(ToTensorImage(in_keys=[key]), RewardClipping(0, 0.1))
        else:
            transform = Compose(
                ObservationNorm(in_keys=[key], loc=0.5, scale=1.1), RewardClipping(0, 0.1)
            )
        return TransformedEnv(env, transform)

    env0 = create_env_fn()
    env_parallel = ParallelEnv(N, create_env_fn, create_env_kwargs=kwargs)
    env_serial = SerialEnv(N, create_env_fn, create_env_kwargs=kwargs)
    obs_key = _first_leaf_key(env0.observation_spec)
    if transformed_out:
        t_out = _get_transform_out(env_name, transformed_in, obs_key)
        env0 = TransformedEnv(env0, t_out())
        env_parallel = TransformedEnv(env_parallel, t_out())
        env_serial = TransformedEnv(env_serial, t_out())
    # envpool's MultiThreadedEnv is not part of this stack; the seed discards this slot.
    env_multithread = None
    return env_parallel, env_serial, env_multithread, env0

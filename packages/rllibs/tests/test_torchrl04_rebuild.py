"""rebuild_with_kwargs: torchrl 0.4's rebuild of the library env from updated kwargs (issue 29)."""

from __future__ import annotations

import re

import pytest
import torch

from rlspecs import Bounded, Categorical, OneHot

gym = pytest.importorskip("gymnasium")

from rllibs import GymEnv, GymWrapper, default_info_dict_reader  # noqa: E402
from rllibs._wrapper_api import (  # noqa: E402
    NOT_REBUILDABLE,
    REBUILD_UNKNOWN,
    REBUILD_WRAPPER_ARG,
)


# ---------------------------------------------------------------------- GymEnv
def test_gym_env_rebuilds_with_a_new_id():
    env = GymEnv("CartPole-v1")
    env.rebuild_with_kwargs(env_name="Pendulum-v1")
    assert env.env_name == "Pendulum-v1" and env._env.spec.id == "Pendulum-v1"
    assert isinstance(env.action_spec, Bounded)
    assert env.rollout(3)["next", "observation"].shape == torch.Size([3, 3])


def test_gym_env_kwargs_are_updated_for_good():
    env = GymEnv("Pendulum-v1", max_episode_steps=50)
    env.rebuild_with_kwargs(max_episode_steps=2)
    assert env._constructor_kwargs["max_episode_steps"] == 2
    env.rebuild_with_kwargs(env_name="MountainCarContinuous-v0")  # keeps max_episode_steps
    rollout = env.rollout(10, break_when_any_done=True)
    assert rollout.shape == torch.Size([2]) and rollout["next", "truncated"][-1].item()


def test_gym_env_batch_size_follows_num_envs():
    env = GymEnv("CartPole-v1")
    env.rebuild_with_kwargs(num_envs=3)
    assert env.batch_size == torch.Size([3])
    assert env.action_spec.shape == torch.Size([3, 2])
    assert env.full_done_spec["done"].shape == torch.Size([3, 1])
    assert env.rollout(4)["next", "reward"].shape == torch.Size([3, 4, 1])
    env.rebuild_with_kwargs(num_envs=0)
    assert env.batch_size == torch.Size([]) and env.rollout(2).shape == torch.Size([2])


def test_gym_env_keeps_the_wrapper_arguments():
    env = GymEnv("CartPole-v1", categorical_action_encoding=True, frame_skip=2)
    env.rebuild_with_kwargs(num_envs=2)
    assert isinstance(env.action_spec, Categorical) and env.frame_skip == 2


def test_gym_env_closes_the_env_it_replaces():
    env = GymEnv("CartPole-v1")
    old, closed = env._env, []
    old.close = lambda: closed.append(True)
    env.rebuild_with_kwargs(env_name="Acrobot-v1")
    assert closed == [True] and env._env is not old


def test_gym_env_left_as_it_was_when_the_new_env_cannot_be_made():
    env = GymEnv("CartPole-v1")
    old, kwargs = env._env, dict(env._constructor_kwargs)
    with pytest.raises(gym.error.Error, match="NoSuchEnv"):
        env.rebuild_with_kwargs(env_name="NoSuchEnv-v0")
    assert env._env is old and env._constructor_kwargs == kwargs
    assert env.rollout(2).shape == torch.Size([2])


def test_gym_env_info_readers_declare_their_specs_again():
    spec = [Bounded(-10.0, 10.0, shape=(), dtype=torch.float64)]
    env = GymEnv("HalfCheetah-v4").set_info_dict_reader(
        default_info_dict_reader(["x_position"], spec=spec)
    )
    env.rebuild_with_kwargs(num_envs=2)
    assert env.observation_spec["x_position"].shape == torch.Size([2])
    assert env.rollout(2)["next", "x_position"].shape == torch.Size([2, 2])


# ---------------------------------------------------------------------- GymWrapper
def test_gym_wrapper_rebuilds_from_pixels_around_the_same_env(counting_env_cls):
    base = counting_env_cls(render_mode="rgb_array")
    env = GymWrapper(base)
    env.rebuild_with_kwargs(from_pixels=True, pixels_only=False)
    assert env.from_pixels and not env.pixels_only
    assert set(env.observation_spec.keys()) == {"observation", "pixels"}
    assert env._env.unwrapped is base
    assert env.rollout(2)["next", "pixels"].shape == torch.Size([2, 8, 6, 3])


def test_gym_wrapper_takes_a_new_env_and_does_not_close_the_old(counting_env_cls):
    given = counting_env_cls()
    closed = []
    given.close = lambda: closed.append(True)
    env = GymWrapper(given)
    env.rebuild_with_kwargs(env=gym.make_vec("Pendulum-v1", 2, vectorization_mode="sync"))
    assert closed == []
    assert env.batch_size == torch.Size([2]) and isinstance(env.action_spec, Bounded)
    assert env.rollout(2)["next", "observation"].shape == torch.Size([2, 2, 3])


def test_gym_wrapper_refuses_an_unknown_argument(counting_env_cls):
    env = GymWrapper(counting_env_cls())
    message = REBUILD_UNKNOWN.format(
        cls="GymWrapper", unknown=["render_mode"], known=["env", "from_pixels", "pixels_only"]
    )
    with pytest.raises(TypeError, match=re.escape(message)):
        env.rebuild_with_kwargs(render_mode="rgb_array")


@pytest.mark.parametrize("key", ["device", "frame_skip", "categorical_action_encoding"])
def test_wrapper_arguments_are_refused(key, counting_env_cls):
    env = GymWrapper(counting_env_cls())
    message = REBUILD_WRAPPER_ARG.format(cls="GymWrapper", keys=[key])
    with pytest.raises(TypeError, match=re.escape(message)):
        env.rebuild_with_kwargs(**{key: 1})
    assert isinstance(env.action_spec, OneHot)


def test_gym_wrapper_refuses_a_missing_env():
    env = GymWrapper(gym.make("CartPole-v1"))
    with pytest.raises(TypeError, match="GymWrapper needs a gymnasium env"):
        env.rebuild_with_kwargs(env=None)


# ---------------------------------------------------------------------- dm_control
def test_dm_control_env_rebuilds_another_task_with_task_kwargs():
    pytest.importorskip("dm_control")
    from rllibs import DMControlEnv

    env = DMControlEnv("cartpole", "balance")
    old, closed = env._env, []
    old.close = lambda: closed.append(True)
    env.rebuild_with_kwargs(env_name="pendulum", task_name="swingup", time_limit=0.1)
    assert (env.env_name, env.task_name) == ("pendulum", "swingup") and closed == [True]
    assert set(env.observation_spec.keys()) == {"orientation", "velocity"}
    rollout = env.rollout(100)
    assert rollout.shape == torch.Size([5]) and rollout["next", "truncated"][-1].item()


def test_dm_control_env_keeps_its_env_when_the_task_is_unknown():
    pytest.importorskip("dm_control")
    from rllibs import DMControlEnv

    env = DMControlEnv("cartpole", "balance")
    old = env._env
    with pytest.raises(ValueError, match="cartpole with task nope is unknown in dm_control"):
        env.rebuild_with_kwargs(task_name="nope")
    assert env._env is old and env.task_name == "balance"


def test_dm_control_wrapper_takes_a_new_task_env():
    pytest.importorskip("dm_control")
    from dm_control import suite

    from rllibs import DMControlWrapper

    given = suite.load("cartpole", "balance")
    env = DMControlWrapper(given)
    env.rebuild_with_kwargs(env=suite.load("pendulum", "swingup"))
    assert env._task_env is env._env and env._env is not given
    assert set(env.observation_spec.keys()) == {"orientation", "velocity"}
    env.set_seed(0)
    assert env.rollout(3).shape == torch.Size([3])


# ---------------------------------------------------------------------- EnvPool
def test_envpool_wrappers_cannot_be_rebuilt():
    pytest.importorskip("envpool")
    from rllibs import MultiThreadedEnv

    env = MultiThreadedEnv(2, "CartPole-v1")
    message = NOT_REBUILDABLE.format(cls="MultiThreadedEnv")
    with pytest.raises(NotImplementedError, match=re.escape(message)):
        env.rebuild_with_kwargs(num_workers=3)
    env.close()

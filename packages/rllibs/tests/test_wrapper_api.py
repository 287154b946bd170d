"""The rest of torchrl 0.4's wrapper API: library queries, read_* converters, info readers, flags."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

import rllibs
from rlcore import check_env_specs
from rllibs import HAS_DMC, DMControlEnv, DMControlWrapper, GymEnv, GymWrapper
from rllibs._wrapper_api import NO_DONE, UNKNOWN_LIBRARY
from rlspecs import Composite, Unbounded

gym = pytest.importorskip("gymnasium")

needs_dmc = pytest.mark.skipif(not HAS_DMC, reason="dm_control not installed")


# ---------------------------------------------------------------------- availability flags
def test_availability_flags_say_what_is_installed():
    found = importlib.util.find_spec
    assert rllibs._has_gym is rllibs._has_gymnasium is (found("gymnasium") is not None)
    assert rllibs._has_dmc is rllibs._has_dm_control is HAS_DMC


# ---------------------------------------------------------------------- gymnasium wrappers
def test_get_library_name_recognises_gymnasium_envs_and_vector_envs():
    assert GymWrapper.get_library_name(gym.make("CartPole-v1")) == "gymnasium"
    vector = gym.make_vec("CartPole-v1", num_envs=2)
    assert GymEnv.get_library_name(vector) == "gymnasium"


def test_get_library_name_refuses_other_libraries():
    class LegacyEnv:
        action_space = object()

    env = LegacyEnv()
    with pytest.raises(ImportError, match=re.escape(UNKNOWN_LIBRARY.format(env=env))):
        GymWrapper.get_library_name(env)


def test_available_envs_lib_and_library_names():
    assert "CartPole-v1" in GymEnv.available_envs
    assert GymWrapper.available_envs == sorted(gym.envs.registry)
    env = GymEnv("CartPole-v1")
    assert env.available_envs == GymEnv.available_envs
    assert env.lib is gym
    assert env.libname == "gym" and env.git_url.startswith("https://")


def test_is_from_pixels_recognises_pixel_observations(
    space_env_cls, image_env_cls, counting_env_cls
):
    assert not rllibs._is_from_pixels(gym.make("CartPole-v1"))
    rendered = gym.wrappers.AddRenderObservation(counting_env_cls(render_mode="rgb_array"))
    assert rllibs._is_from_pixels(rendered)
    state_and_pixels = gym.wrappers.AddRenderObservation(
        counting_env_cls(render_mode="rgb_array"), render_only=False
    )
    assert rllibs._is_from_pixels(state_and_pixels)
    renamed = gym.wrappers.AddRenderObservation(
        counting_env_cls(render_mode="rgb_array"), render_only=False, render_key="frame"
    )
    assert rllibs._is_from_pixels(renamed)  # found through the wrapper itself
    assert rllibs._is_from_pixels(image_env_cls())  # an 8x6 RGB image Box
    pixels = gym.spaces.Dict(pixels=gym.spaces.Box(0, 255, (4, 4), np.uint8))
    assert rllibs._is_from_pixels(space_env_cls(pixels, gym.spaces.Discrete(2)))
    state = gym.spaces.Dict(state=gym.spaces.Box(0, 255, (4, 4, 3), np.uint8))
    assert not rllibs._is_from_pixels(space_env_cls(state, gym.spaces.Discrete(2)))


def test_unknown_attributes_are_read_from_the_library_env():
    env = GymEnv("Pendulum-v1")
    assert env.spec.max_episode_steps == 200
    assert env.unwrapped is env._env.unwrapped
    with pytest.raises(AttributeError):
        env._not_an_attribute  # noqa: B018 - private names are never forwarded
    with pytest.raises(AttributeError):
        env.not_an_attribute_either  # noqa: B018


def test_read_action_gives_what_the_library_step_takes():
    env = GymEnv("CartPole-v1")
    assert env.read_action(torch.tensor([0, 1])) == 1
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    assert env.read_action(torch.tensor(1)) == 1
    pendulum = GymEnv("Pendulum-v1")
    action = pendulum.read_action(torch.tensor([0.5]))
    assert isinstance(action, np.ndarray) and action.tolist() == [0.5]


def test_read_obs_gives_the_observation_entries():
    env = GymEnv("Pendulum-v1")
    obs = env.read_obs(np.array([1.0, 0.0, 0.5], np.float32))
    assert list(obs) == ["observation"]
    assert obs["observation"].tolist() == [1.0, 0.0, 0.5]


def test_read_reward_shapes_the_reward_like_its_spec():
    env = GymEnv("Pendulum-v1")
    assert env.read_reward(-1.5).tolist() == [-1.5]
    assert env.read_reward(np.float64(2.0)).dtype == env.reward_spec.dtype
    assert env.read_reward(None).isnan().all()
    assert env.read_reward(torch.tensor(3.0)).shape == env.reward_spec.shape


def test_read_done_completes_the_flags():
    env = GymEnv("Pendulum-v1")
    terminated, truncated, done, stop = env.read_done(terminated=False, truncated=True)
    assert (terminated.tolist(), truncated.tolist(), done.tolist(), stop) == (
        [False],
        [True],
        [True],
        True,
    )
    terminated, truncated, done, stop = env.read_done(done=False)
    assert (terminated.tolist(), truncated.tolist(), done.tolist(), stop) == (
        [False],
        [False],
        [False],
        False,
    )
    with pytest.raises(ValueError, match=re.escape(NO_DONE)):
        env.read_done()


def test_read_done_of_a_vector_env_has_one_flag_per_env():
    env = GymEnv("Pendulum-v1", num_envs=2)
    base = getattr(env, "base_env", env)
    terminated, _, done, stop = base.read_done(
        terminated=np.array([False, True]), truncated=np.array([False, False])
    )
    assert terminated.shape == (2, 1) and done.squeeze(-1).tolist() == [False, True] and stop


def test_info_dict_reader_lists_the_readers():
    env = GymEnv("HalfCheetah-v4")
    assert env.info_dict_reader == []
    reader = rllibs.default_info_dict_reader(["x_position"])
    env.set_info_dict_reader(reader)
    assert env.info_dict_reader == [reader]


class _XPosition(rllibs.BaseInfoDictReader):
    info_spec = Composite(x=Unbounded((), dtype=torch.float64))

    def __call__(self, info_dict, tensordict):
        return tensordict.set("x", torch.as_tensor(info_dict.get("x_position", 0.0)))


def test_a_base_info_dict_reader_subclass_reads_and_declares_its_entries():
    env = GymEnv("HalfCheetah-v4").set_info_dict_reader(_XPosition())
    assert env.observation_spec["x"].dtype == torch.float64
    check_env_specs(env)
    with pytest.raises(TypeError, match="abstract"):
        rllibs.BaseInfoDictReader()


def test_default_info_dict_reader_reset_forgets_keys_and_specs():
    reader = rllibs.default_info_dict_reader(["x_position"])
    reader.reset()
    assert reader.keys is None and reader.info_spec is None
    assert isinstance(reader, rllibs.BaseInfoDictReader)
    spec = reader.infer_spec({"x_position": np.float64(1.0), "name": "a"})
    assert list(spec.keys()) == ["x_position"]


# ---------------------------------------------------------------------- dm_control wrappers
@needs_dmc
def test_dm_control_available_envs_lib_and_names():
    envs = dict(DMControlEnv.available_envs)
    assert "run" in envs["cheetah"] and "balance" in envs["cartpole"]
    assert DMControlWrapper.available_envs == DMControlEnv.available_envs
    env = DMControlEnv(env_name="cartpole", task_name="balance")
    assert (env.env_name, env.task_name) == ("cartpole", "balance")
    assert env.lib.__name__ == "dm_control"
    assert env.libname == "dm_control"
    assert env.physics is env._env.physics  # read from the dm_control env


@needs_dmc
def test_dm_control_unknown_task_is_named_with_the_choices():
    with pytest.raises(ValueError, match="cartpole with task fly is unknown in dm_control"):
        DMControlEnv("cartpole", "fly")


@needs_dmc
def test_dm_control_extra_keywords_are_task_keywords():
    env = DMControlEnv("cartpole", "balance", time_limit=0.1)  # 10 control steps of 0.01 s
    rollout = env.rollout(100)
    assert rollout.shape == (10,) and rollout["next", "truncated"][-1].all()


@needs_dmc
def test_dm_control_reads_like_torchrl_wrappers():
    env = DMControlEnv("cartpole", "balance")
    assert env.read_reward(0.5).tolist() == [0.5]
    assert env.read_reward(0.5).dtype == env.reward_spec.dtype
    obs = env.read_obs(env._env.reset().observation)
    assert set(obs) == {"position", "velocity"}


@needs_dmc
def test_dm_control_camera_id_picks_the_rendered_camera(gl_env):
    # the GL backend is chosen when dm_control is first imported: use a fresh interpreter
    code = (
        "from rllibs import DMControlEnv\n"
        "frames = []\n"
        "for camera in (0, 1):\n"
        "    env = DMControlEnv('cartpole', 'balance', from_pixels=True, camera_id=camera,\n"
        "                       render_kwargs={'height': 32, 'width': 24})\n"
        "    env.set_seed(0)\n"
        "    frames.append(env.reset()['pixels'])\n"
        "assert frames[0].shape == (32, 24, 3)\n"
        "assert not (frames[0] == frames[1]).all(), 'both cameras gave the same frame'\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=gl_env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_without_gymnasium_the_errors_name_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "gymnasium", None)  # as if it were not installed
    with pytest.raises(ImportError, match=re.escape("rllibs[gym]")):
        rllibs.register_gym(GymEnv, "Anything-v0")
    with pytest.raises(ImportError, match=re.escape("rllibs[gym]")):
        rllibs.gym_backend()

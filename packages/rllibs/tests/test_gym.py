"""GymWrapper / GymEnv: rollouts of real gymnasium envs, seeding, frame skip, pixels, vector envs."""

from __future__ import annotations

import importlib.util
import re

import pytest
import torch
from tensordict import assert_allclose_td

from rlcore import check_env_specs
from rlspecs import Bounded, Categorical, OneHot

gym = pytest.importorskip("gymnasium")

from rllibs import GymEnv, GymWrapper  # noqa: E402
from rllibs._gym import NO_RGB_RENDER  # noqa: E402

needs_mujoco = pytest.mark.skipif(
    importlib.util.find_spec("mujoco") is None, reason="mujoco not installed"
)
needs_ale = pytest.mark.skipif(importlib.util.find_spec("ale_py") is None, reason="no ale-py")


# ---------------------------------------------------------------------- real envs
@pytest.mark.parametrize("frame_skip", [1, 4])
def test_pendulum_rollout_has_specs_and_time_dim(frame_skip):
    env = GymEnv("Pendulum-v1", frame_skip=frame_skip)
    assert isinstance(env.action_spec, Bounded)
    assert env.observation_spec["observation"].shape == torch.Size([3])
    assert env.reward_spec.shape == torch.Size([1])
    assert set(env.full_done_spec.keys()) == {"done", "terminated", "truncated"}
    check_env_specs(env)
    env.set_seed(0)
    rollout = env.rollout(20)
    assert rollout.shape == torch.Size([20])
    assert rollout.names[-1] == "time"
    torch.testing.assert_close(rollout["next", "observation"][:-1], rollout["observation"][1:])


def test_cartpole_rollout_stops_at_termination():
    env = GymEnv("CartPole-v1")
    assert isinstance(env.action_spec, OneHot)
    check_env_specs(env)
    env.set_seed(0)
    rollout = env.rollout(500)
    assert rollout["next", "done"][-1].all()
    assert rollout["next", "terminated"][-1].all()
    assert not rollout["next", "done"][:-1].any()


def test_cartpole_categorical_encoding_takes_label_actions():
    env = GymEnv("CartPole-v1", categorical_action_encoding=True)
    assert isinstance(env.action_spec, Categorical)
    assert env.action_spec.n == 2
    check_env_specs(env)
    policy = torch.nn.Sequential(torch.nn.Linear(4, 2), _ArgMax())
    rollout = env.rollout(10, policy)
    assert rollout["action"].dtype == torch.int64
    assert rollout["action"].shape == rollout.shape


class _ArgMax(torch.nn.Module):
    def forward(self, values):
        return values.argmax(-1)


@needs_mujoco
def test_halfcheetah_passes_check_env_specs():
    env = GymEnv("HalfCheetah-v4")
    assert env.observation_spec["observation"].dtype == torch.float64
    assert env.action_spec.dtype == torch.float32
    check_env_specs(env)


@needs_ale
@pytest.mark.parametrize("frame_skip", [1, 4])
def test_pong_registers_ale_and_reads_pixels(frame_skip):
    env = GymEnv("ALE/Pong-v5", frame_skip=frame_skip)
    assert list(env.observation_spec.keys()) == ["pixels"]
    assert env.observation_spec["pixels"].dtype == torch.uint8
    assert isinstance(env.action_spec, OneHot)
    check_env_specs(env)
    env.set_seed(0)
    rollout = env.rollout(5)
    assert rollout["next", "pixels"].shape == torch.Size([5, 210, 160, 3])


# ---------------------------------------------------------------------- pixels
@pytest.mark.parametrize("pixels_only", [True, False])
def test_from_pixels_adds_rendered_frames(counting_env_cls, pixels_only):
    env = GymWrapper(
        counting_env_cls(render_mode="rgb_array"), from_pixels=True, pixels_only=pixels_only
    )
    expected = {"pixels"} if pixels_only else {"pixels", "observation"}
    assert set(env.observation_spec.keys()) == expected
    check_env_specs(env)
    td = env.rand_step(env.reset())
    assert (td["next", "pixels"] == 1).all()
    assert td["pixels"].shape == torch.Size([8, 6, 3])


def test_from_pixels_needs_rgb_array_rendering(counting_env_cls):
    gym_env = counting_env_cls()
    with pytest.raises(ValueError, match=re.escape(NO_RGB_RENDER.format(mode=None, env=gym_env))):
        GymWrapper(gym_env, from_pixels=True)


# ---------------------------------------------------------------------- vector envs
def test_vector_env_has_batch_size_and_batched_specs():
    env = GymEnv("Pendulum-v1", num_envs=3)
    assert env.batch_size == torch.Size([3])
    assert env.action_spec.shape == torch.Size([3, 1])
    assert env.full_done_spec["done"].shape == torch.Size([3, 1])
    check_env_specs(env)


def test_vector_env_partial_reset_resets_only_done_envs(counting_env_cls):
    vec = gym.vector.SyncVectorEnv(
        [lambda: counting_env_cls(max_steps=2), lambda: counting_env_cls(max_steps=3)]
    )
    env = GymWrapper(vec)
    rollout = env.rollout(6, break_when_any_done=False)
    counts = rollout["next", "observation"][..., 0]
    torch.testing.assert_close(counts, torch.tensor([[1.0, 2, 1, 2, 1, 2], [1, 2, 3, 1, 2, 3]]))
    dones = rollout["next", "done"].squeeze(-1)
    assert dones.sum(-1).tolist() == [3, 2]
    # the reward of the step after a reset is a real step's reward, not a NextStep autoreset's 0
    assert (rollout["next", "reward"] > 0).all()


def test_vector_env_seeding_is_reproducible():
    env = GymEnv("Pendulum-v1", num_envs=2)
    env.set_seed(0)
    first = env.reset()
    env.set_seed(0)
    assert_allclose_td(first, env.reset())
    assert not torch.equal(first["observation"][0], first["observation"][1])


# ---------------------------------------------------------------------- batched (rlbatched)
def test_serial_and_parallel_pendulum_agree():
    rlbatched = pytest.importorskip("rlbatched")
    serial = rlbatched.SerialEnv(2, lambda: GymEnv("Pendulum-v1"))
    parallel = rlbatched.ParallelEnv(2, lambda: GymEnv("Pendulum-v1"))
    try:
        rollouts = []
        for env in (serial, parallel):
            env.set_seed(0)
            torch.manual_seed(0)
            rollouts.append(env.rollout(10))
        assert_allclose_td(*rollouts)
    finally:
        serial.close()
        parallel.close()


def test_non_td_policy_in_serial_env():
    rlbatched = pytest.importorskip("rlbatched")
    env = rlbatched.SerialEnv(2, lambda: GymEnv("CartPole-v1", categorical_action_encoding=True))
    policy = torch.nn.Sequential(torch.nn.Linear(4, 2), _ArgMax())
    assert env.rollout(10, policy).shape[0] == 2
    env.close()


def test_repr_names_the_env():
    assert repr(GymEnv("Pendulum-v1")).startswith("GymEnv(env=Pendulum-v1")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")
def test_cuda_env_puts_specs_and_outputs_on_the_device():
    env = GymEnv("Pendulum-v1", device="cuda")
    assert env.action_spec.device.type == "cuda"
    rollout = env.rollout(5)
    assert rollout.device.type == "cuda"
    assert rollout["next", "observation"].device.type == "cuda"
    check_env_specs(env)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")
def test_env_moved_to_cuda_after_construction():
    env = GymEnv("CartPole-v1").to("cuda")
    assert env.reset()["observation"].device.type == "cuda"
    assert env.rand_step()["next", "reward"].device.type == "cuda"


def test_step_before_any_reset_works():
    env = GymEnv("Pendulum-v1")
    td = env.fake_tensordict().exclude("next")
    td["action"] = env.action_spec.rand()
    assert env.step(td)["next", "observation"].shape == torch.Size([3])

"""DMControlEnv / DMControlWrapper: specs, rollouts, time-limit truncation, seeding, pixels."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch
from tensordict import assert_allclose_td

from rlcore import check_env_specs
from rllibs import HAS_DMC, DMControlEnv, DMControlWrapper
from rlspecs import Bounded, Unbounded

pytestmark = pytest.mark.skipif(not HAS_DMC, reason="dm_control not installed")


def test_humanoid_specs_follow_dm_control():
    env = DMControlEnv("humanoid", "stand")
    obs = env.observation_spec
    assert set(obs.keys()) == {
        "joint_angles",
        "head_height",
        "extremities",
        "torso_vertical",
        "com_velocity",
        "velocity",
    }
    assert all(isinstance(spec, Unbounded) for spec in obs.values())
    assert all(spec.dtype == torch.float64 for spec in obs.values())
    assert obs["head_height"].shape == torch.Size([1])
    assert isinstance(env.action_spec, Bounded)
    assert env.action_spec.shape == torch.Size([21])
    assert env.action_spec.dtype == torch.float64
    assert (env.action_spec.low == -1).all() and (env.action_spec.high == 1).all()
    assert env.reward_spec.shape == torch.Size([1])
    check_env_specs(env)


@pytest.mark.parametrize("task", ["stand", "walk"])
def test_humanoid_rollout_is_reproducible_under_a_seed(task):
    env = DMControlEnv("humanoid", task)

    def rollout(seed):
        env.set_seed(seed)
        torch.manual_seed(0)
        return env.rollout(5)

    first, again, other = rollout(0), rollout(0), rollout(1)
    assert first.shape == torch.Size([5])
    assert_allclose_td(first, again)
    with pytest.raises(AssertionError):
        assert_allclose_td(first, other)


def test_time_limit_truncates():
    env = DMControlEnv("cartpole", "balance", task_kwargs={"time_limit": 0.1})
    rollout = env.rollout(100)
    steps = rollout.shape[0]
    assert steps < 100
    assert rollout["next", "truncated"][-1].all() and rollout["next", "done"][-1].all()
    assert not rollout["next", "terminated"].any()


def test_frame_skip_sums_rewards_of_repeated_actions():
    action = torch.zeros(1, dtype=torch.float64)
    env = DMControlEnv("cartpole", "balance", frame_skip=3)
    env.set_seed(0)
    td = env.step(env.reset().set("action", action))

    ref = DMControlEnv("cartpole", "balance")
    ref.set_seed(0)
    td_ref = ref.reset()
    rewards = []
    for _ in range(3):
        td_ref = ref.step(td_ref.set("action", action))
        rewards.append(td_ref["next", "reward"])
        td_ref = td_ref["next"].clone()
    torch.testing.assert_close(td["next", "reward"], sum(rewards))
    torch.testing.assert_close(td["next", "position"], td_ref["position"])


def test_wrapper_of_a_loaded_task():
    from dm_control import suite

    env = DMControlWrapper(suite.load("cartpole", "balance"))
    check_env_specs(env)


def test_from_pixels_renders_frames(gl_env):
    # the GL backend is chosen when dm_control is first imported: use a fresh interpreter
    code = (
        "import torch\n"
        "from rllibs import DMControlEnv\n"
        "env = DMControlEnv('cartpole', 'balance', from_pixels=True,\n"
        "                   render_kwargs={'height': 32, 'width': 24})\n"
        "assert set(env.observation_spec.keys()) == {'pixels'}\n"
        "td = env.rand_step(env.reset())\n"
        "assert td['next', 'pixels'].shape == (32, 24, 3), td['next', 'pixels'].shape\n"
        "assert td['next', 'pixels'].dtype == torch.uint8\n"
        "assert env.observation_spec['pixels'].is_in(td['next', 'pixels'])\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], env=gl_env, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr


def test_serial_and_parallel_humanoid_agree():
    rlbatched = pytest.importorskip("rlbatched")
    make = [lambda: DMControlEnv("humanoid", "stand"), lambda: DMControlEnv("humanoid", "walk")]
    serial, parallel = rlbatched.SerialEnv(2, make), rlbatched.ParallelEnv(2, make)
    try:
        rollouts = []
        for env in (serial, parallel):
            env.set_seed(0)
            torch.manual_seed(0)
            rollouts.append(env.rollout(5))
        assert_allclose_td(*rollouts)
    finally:
        serial.close()
        parallel.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")
def test_cuda_dm_control_env():
    env = DMControlEnv("cartpole", "balance", device="cuda")
    rollout = env.rollout(3)
    assert rollout["next", "position"].device.type == "cuda"
    check_env_specs(env)

"""Gymnasium vector envs behind EnvBase: every autoreset mode, final observations, partial resets,
per-sub-env seeding, info readers, sync and async vectorization, real MuJoCo and ALE envs."""

from __future__ import annotations

import importlib.util
import multiprocessing
import re

import numpy as np
import pytest
import torch
from tensordict import TensorDict, assert_allclose_td

from rlcore import check_env_specs
from rlspecs import Bounded, Categorical, Composite, OneHot

gym = pytest.importorskip("gymnasium")

from rllibs import GymEnv, GymWrapper, default_info_dict_reader  # noqa: E402
from rllibs._gym import BAD_VECTORIZATION  # noqa: E402
from rllibs._gym_vector import NO_RESET_MASK, STEP_AFTER_DONE, supports_reset_mask  # noqa: E402

MODES = ["NextStep", "SameStep", "Disabled"]
START_METHODS = [
    m for m in ("fork", "spawn", "forkserver") if m in multiprocessing.get_all_start_methods()
]
needs_mujoco = pytest.mark.skipif(
    importlib.util.find_spec("mujoco") is None, reason="mujoco not installed"
)
needs_ale = pytest.mark.skipif(importlib.util.find_spec("ale_py") is None, reason="no ale-py")


def _counting_vector(counting_env_cls, mode, lengths=(2, 3), **kwargs):
    fns = [lambda n=n: counting_env_cls(max_steps=n) for n in lengths]
    return gym.vector.SyncVectorEnv(fns, autoreset_mode=mode, **kwargs)


def _one_hot(batch, index=0, n=2):
    action = torch.zeros(batch, n, dtype=torch.int64)
    action[:, index] = 1
    return action


# ---------------------------------------------------------------------- specs
def test_specs_come_from_the_single_env_spaces():
    env = GymEnv("CartPole-v1", num_envs=3)
    assert env.batch_size == torch.Size([3])
    assert isinstance(env.action_spec, OneHot)
    assert env.action_spec.shape == torch.Size([3, 2])
    assert env.observation_spec["observation"].shape == torch.Size([3, 4])
    assert isinstance(env.observation_spec["observation"], Bounded)
    assert env.reward_spec.shape == torch.Size([3, 1])
    for key in ("done", "terminated", "truncated"):
        assert isinstance(env.full_done_spec[key], Categorical)
        assert env.full_done_spec[key].shape == torch.Size([3, 1])
    check_env_specs(env)


def test_dict_observation_space_gives_a_composite(space_env_cls):
    space = gym.spaces.Dict(
        position=gym.spaces.Box(-1, 1, (2,), np.float32), mode=gym.spaces.Discrete(3)
    )
    vec = gym.vector.SyncVectorEnv(
        [lambda: space_env_cls(space, gym.spaces.Box(-1, 1, (1,), np.float32))] * 2
    )
    env = GymWrapper(vec)
    assert isinstance(env.full_observation_spec, Composite)
    assert env.observation_spec["position"].shape == torch.Size([2, 2])
    assert env.observation_spec["mode"].shape == torch.Size([2, 3])  # one-hot
    check_env_specs(env)
    rollout = env.rollout(3)
    assert rollout["next", "mode"].shape == torch.Size([2, 3, 3])


def test_categorical_actions_reach_each_sub_env(space_env_cls):
    vec = gym.vector.SyncVectorEnv(
        [lambda: space_env_cls(gym.spaces.Discrete(2), gym.spaces.Discrete(3))] * 2
    )
    env = GymWrapper(vec, categorical_action_encoding=True)
    td = env.reset()
    td["action"] = torch.tensor([2, 1])
    env.step(td)
    assert [sub.unwrapped.last_action for sub in vec.envs] == [2, 1]


# ---------------------------------------------------------------------- autoreset modes
@pytest.mark.parametrize("mode", MODES)
def test_final_observation_is_in_next_and_only_done_sub_envs_restart(counting_env_cls, mode):
    env = GymWrapper(_counting_vector(counting_env_cls, mode), categorical_action_encoding=True)
    policy = lambda td: td.set("action", torch.zeros(2, dtype=torch.int64))  # noqa: E731
    rollout = env.rollout(6, policy, break_when_any_done=False)
    counts = rollout["next", "observation"][..., 0]
    torch.testing.assert_close(counts, torch.tensor([[1.0, 2, 1, 2, 1, 2], [1, 2, 3, 1, 2, 3]]))
    # the root after a done is a fresh episode (count 0), its reward a real step's
    torch.testing.assert_close(
        rollout["observation"][..., 0], torch.tensor([[0.0, 1, 0, 1, 0, 1], [0, 1, 2, 0, 1, 2]])
    )
    assert (rollout["next", "reward"].squeeze(-1) == counts).all()
    dones = rollout["next", "done"].squeeze(-1)
    assert dones.tolist() == [[False, True] * 3, [False, False, True] * 2]
    assert not rollout["done"].any()
    check_env_specs(env)


@pytest.mark.parametrize("mode", MODES)
def test_modes_agree_on_a_real_env(mode):
    rollouts = []
    for each in ("NextStep", mode):
        env = GymEnv("CartPole-v1", num_envs=3, vector_kwargs={"autoreset_mode": each})
        env.set_seed(0)
        policy = lambda td: td.set("action", _one_hot(3, 1))  # noqa: E731
        rollouts.append(env.rollout(40, policy, break_when_any_done=False))
    assert rollouts[0]["next", "done"].sum() >= 6  # several episodes ended on the way
    assert_allclose_td(*rollouts)


@pytest.mark.parametrize("mode", MODES)
def test_partial_reset_resets_only_the_masked_sub_envs(counting_env_cls, mode):
    env = GymWrapper(_counting_vector(counting_env_cls, mode, (5, 5, 5)))
    td = env.reset()
    for _ in range(2):
        td = env.step(td.set("action", _one_hot(3)))["next"].clone()
    before = td["observation"].clone()
    td["_reset"] = torch.tensor([[False], [True], [False]])
    after = env.reset(td)
    assert "_reset" not in after.keys()
    assert after["observation"][:, 0].tolist() == [2.0, 0.0, 2.0]
    torch.testing.assert_close(after["observation"][[0, 2]], before[[0, 2]])
    counts = env.step(after.set("action", _one_hot(3)))["next", "observation"][:, 0]
    assert counts.tolist() == [3.0, 1.0, 3.0]


@pytest.mark.parametrize("mode", MODES)
def test_stepping_a_finished_sub_env_without_reset_raises(counting_env_cls, mode):
    env = GymWrapper(_counting_vector(counting_env_cls, mode, (1, 3)))
    td = env.step(env.reset().set("action", _one_hot(2)))
    assert td["next", "done"].squeeze(-1).tolist() == [True, False]
    message = STEP_AFTER_DONE.format(owner="GymWrapper", ids=[0])
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.step(td["next"].clone().set("action", _one_hot(2)))


def test_same_step_final_info_reaches_the_info_reader(counting_env_cls):
    vec = _counting_vector(counting_env_cls, "SameStep")
    env = GymWrapper(vec).set_info_dict_reader(
        default_info_dict_reader(["count"], spec=[Categorical(10, shape=(), dtype=torch.int64)])
    )
    rollout = env.rollout(4, lambda td: td.set("action", _one_hot(2)), break_when_any_done=False)
    # the finished sub-env reports its last step's count (2), not its reset's (0)
    assert rollout["next", "count"].tolist() == [[1, 2, 1, 2], [1, 2, 3, 1]]


def test_same_step_reset_reuses_gymnasiums_reset(counting_env_cls):
    env = GymWrapper(_counting_vector(counting_env_cls, "SameStep", (1, 3)))
    data, root = env.step_and_maybe_reset(env.reset().set("action", _one_hot(2)))
    sub_env = env._env.envs[0].unwrapped
    # gymnasium reset sub-env 0 inside the step: our reset took that one, no second reset
    assert data["next", "observation"][0, 0] == 1.0
    assert root["observation"][:, 0].tolist() == [0.0, 1.0]
    assert root["observation"][0, 1] == sub_env.noise


def test_custom_vector_env_without_reset_mask_refuses_partial_resets():
    vec = gym.make_vec("CartPole-v1", 2, vectorization_mode="vector_entry_point")
    assert not supports_reset_mask(vec)
    env = GymWrapper(vec)
    check_env_specs(env)  # full resets are fine
    td = env.reset()
    td["_reset"] = torch.tensor([[True], [False]])
    message = NO_RESET_MASK.format(owner="GymWrapper", ids=[0], cls=type(vec).__name__)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.reset(td)


def test_copy_false_vector_env_outputs_are_not_overwritten(counting_env_cls):
    env = GymWrapper(_counting_vector(counting_env_cls, "NextStep", (9, 9), copy=False))
    rollout = env.rollout(4, lambda td: td.set("action", _one_hot(2)))
    assert rollout["next", "observation"][0, :, 0].tolist() == [1.0, 2.0, 3.0, 4.0]
    assert rollout["observation"][0, :, 0].tolist() == [0.0, 1.0, 2.0, 3.0]


# ---------------------------------------------------------------------- seeding
def test_sub_env_i_is_seeded_with_seed_plus_i():
    env = GymEnv("Pendulum-v1", num_envs=3)
    env.set_seed(7)
    batched = env.reset()["observation"]
    for i in range(3):
        single = GymEnv("Pendulum-v1")
        single.set_seed(7 + i)
        torch.testing.assert_close(single.reset()["observation"], batched[i])


def test_seeded_rollouts_are_reproducible_and_sub_envs_differ():
    rollouts = []
    for _ in range(2):
        env = GymEnv("CartPole-v1", num_envs=2)
        env.set_seed(3)
        torch.manual_seed(3)
        rollouts.append(env.rollout(30, break_when_any_done=False))
    assert_allclose_td(*rollouts)
    assert not torch.equal(rollouts[0]["observation"][0], rollouts[0]["observation"][1])


# ---------------------------------------------------------------------- vectorization modes
def test_unknown_vectorization_mode_is_refused():
    with pytest.raises(ValueError, match=re.escape(BAD_VECTORIZATION.format(mode="threads"))):
        GymEnv("Pendulum-v1", num_envs=2, vectorization_mode="threads")


@pytest.mark.parametrize("start_method", START_METHODS)
def test_async_vectorization_matches_sync(start_method):
    rollouts = []
    for mode, kwargs in (("sync", None), ("async", {"context": start_method})):
        env = GymEnv("CartPole-v1", num_envs=2, vectorization_mode=mode, vector_kwargs=kwargs)
        try:
            assert type(env._env).__name__ == ("AsyncVectorEnv" if kwargs else "SyncVectorEnv")
            env.set_seed(1)
            policy = lambda td: td.set("action", _one_hot(2, 1))  # noqa: E731
            rollouts.append(env.rollout(25, policy, break_when_any_done=False))
            if kwargs:
                check_env_specs(env)
        finally:
            env.close()
    assert rollouts[0]["next", "done"].any()
    assert_allclose_td(*rollouts)


# ---------------------------------------------------------------------- real simulators
@needs_mujoco
def test_halfcheetah_vector_env_passes_check_env_specs():
    env = GymEnv("HalfCheetah-v4", num_envs=2)
    assert env.observation_spec["observation"].shape == torch.Size([2, 17])
    assert env.observation_spec["observation"].dtype == torch.float64
    check_env_specs(env)


@needs_ale
def test_pong_vector_env_reads_pixels():
    env = GymEnv("ALE/Pong-v5", num_envs=2)
    assert env.observation_spec["pixels"].shape == torch.Size([2, 210, 160, 3])
    check_env_specs(env)
    env.set_seed(0)
    assert env.rollout(3)["next", "pixels"].dtype == torch.uint8


def test_vector_env_works_inside_a_tensordict_loop_without_rollout():
    env = GymEnv("CartPole-v1", num_envs=2, categorical_action_encoding=True)
    td = env.reset()
    for _ in range(60):
        td["action"] = torch.ones(2, dtype=torch.int64)
        data, td = env.step_and_maybe_reset(td)
        assert isinstance(td, TensorDict)
        assert not td["done"].any()

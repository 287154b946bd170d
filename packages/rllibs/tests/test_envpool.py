"""EnvPool behind EnvBase: specs, seeding, final observations, partial resets, sync and async modes."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from tensordict import assert_allclose_td

from rlcore import check_env_specs
from rlspecs import Bounded, Categorical, OneHot

envpool = pytest.importorskip("envpool")

import rllibs  # noqa: E402
from rllibs import MultiThreadedEnv, MultiThreadedEnvWrapper, default_info_dict_reader  # noqa: E402
from rllibs._envpool import (  # noqa: E402
    ASYNC_FRAME_SKIP,
    ASYNC_RESET_RUNNING,
    ASYNC_UNEVEN_RESET,
    NOT_ENVPOOL,
    PARTIAL_SEED,
    SEED_IGNORED,
)


def _elapsed_reader():
    spec = [Bounded(0, 10**6, shape=(), dtype=torch.int32)]
    return default_info_dict_reader(["elapsed_step"], spec=spec)


# ---------------------------------------------------------------------- specs
def test_pendulum_specs_and_rollout():
    env = MultiThreadedEnv(3, "Pendulum-v1")
    assert env.batch_size == torch.Size([3])
    assert env.num_workers == 3 and not env.is_async
    assert isinstance(env.action_spec, Bounded)
    assert env.action_spec.shape == torch.Size([3, 1])
    assert env.observation_spec["observation"].shape == torch.Size([3, 3])
    assert env.reward_spec.shape == torch.Size([3, 1])
    assert env.full_done_spec["done"].shape == torch.Size([3, 1])
    check_env_specs(env)
    rollout = env.rollout(5)
    assert rollout.batch_size == torch.Size([3, 5]) and rollout.names == [None, "time"]
    env.close()


@pytest.mark.parametrize("categorical", [True, False])
def test_discrete_actions_are_labels_by_default(categorical):
    env = MultiThreadedEnv(2, "CartPole-v1", categorical_action_encoding=categorical)
    if categorical:
        assert isinstance(env.action_spec, Categorical)
        assert env.action_spec.shape == torch.Size([2])
    else:
        assert isinstance(env.action_spec, OneHot)
        assert env.action_spec.shape == torch.Size([2, 2])
    check_env_specs(env)


def test_pong_images_stay_under_observation():
    env = MultiThreadedEnv(2, "ALE/Pong-v5")
    assert env.env_name == "Pong-v5"
    assert list(env.observation_spec.keys()) == ["observation"]
    assert env.observation_spec["observation"].shape == torch.Size([2, 4, 84, 84])
    assert env.observation_spec["observation"].dtype == torch.uint8
    check_env_specs(env)


def test_mujoco_halfcheetah_specs():
    env = MultiThreadedEnv(2, "HalfCheetah-v5")
    assert env.observation_spec["observation"].dtype == torch.float64
    assert env.action_spec.shape == torch.Size([2, 6])
    check_env_specs(env)


def test_wrapper_takes_an_existing_pool():
    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=4, seed=5)
    env = MultiThreadedEnvWrapper(pool)
    assert env.batch_size == torch.Size([4]) and env._env is pool
    check_env_specs(env)


def test_wrapper_refuses_what_is_not_envpool():
    with pytest.raises(TypeError, match=re.escape(NOT_ENVPOOL.format(type="list"))):
        MultiThreadedEnvWrapper([])


# ---------------------------------------------------------------------- seeding
def test_set_seed_rebuilds_the_pool_reproducibly():
    env = MultiThreadedEnv(3, "Pendulum-v1")
    env.set_seed(11)
    first = env.rollout(10, break_when_any_done=False)
    env.set_seed(11)
    assert_allclose_td(first, env.rollout(10, break_when_any_done=False))
    env.set_seed(12)
    assert not torch.equal(first["observation"], env.rollout(2)["observation"])


def test_sub_env_i_is_seeded_with_seed_plus_i():
    env = MultiThreadedEnv(3, "Pendulum-v1")
    env.set_seed(20)
    batched = env.reset()["observation"]
    for i in range(3):
        single = MultiThreadedEnv(1, "Pendulum-v1")
        single.set_seed(20 + i)
        torch.testing.assert_close(single.reset()["observation"][0], batched[i])


def test_wrapper_cannot_reseed_and_says_so():
    env = MultiThreadedEnvWrapper(envpool.make("Pendulum-v1", env_type="gymnasium", num_envs=2))
    with pytest.warns(UserWarning, match=re.escape(SEED_IGNORED.format(seed=3))):
        env.set_seed(3)


def test_a_seed_needs_a_full_reset():
    env = MultiThreadedEnv(2, "Pendulum-v1")
    td = env.reset()
    td["_reset"] = torch.tensor([[True], [False]])
    with pytest.raises(ValueError, match=re.escape(PARTIAL_SEED.format(seed=1))):
        env.reset(td, seed=1)


# ---------------------------------------------------------------------- sync: resets
def test_final_observation_in_next_and_fresh_episode_after_it():
    env = MultiThreadedEnv(3, "CartPole-v1")
    env.set_seed(0)
    policy = lambda td: td.set("action", torch.ones(3, dtype=torch.int64))  # noqa: E731
    rollout = env.rollout(40, policy, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)
    assert done.sum() >= 6
    final = rollout["next", "observation"][done]
    # CartPole ends when the pole passes 12 degrees (0.2095 rad) or the cart leaves [-2.4, 2.4]
    assert ((final[:, 2].abs() > 0.2095) | (final[:, 0].abs() > 2.4)).all()
    index = done.nonzero()
    starts = torch.stack([rollout["observation"][i, t + 1] for i, t in index.tolist() if t < 39])
    assert (starts.abs() <= 0.05).all()  # CartPole starts uniformly in [-0.05, 0.05]
    assert not rollout["done"].any()


def test_partial_reset_restarts_only_masked_sub_envs():
    env = MultiThreadedEnv(3, "Pendulum-v1").set_info_dict_reader(_elapsed_reader())
    td = env.reset()
    action = torch.zeros(3, 1)
    for _ in range(3):
        td = env.step(td.set("action", action))["next"].clone()
    assert td["elapsed_step"].tolist() == [3, 3, 3]
    kept = td["observation"][[0, 2]].clone()
    td["_reset"] = torch.tensor([[False], [True], [False]])
    td = env.reset(td)
    assert td["elapsed_step"].tolist() == [3, 0, 3]
    torch.testing.assert_close(td["observation"][[0, 2]], kept)
    td = env.step(td.set("action", action))["next"]
    assert td["elapsed_step"].tolist() == [4, 1, 4]


def test_frame_skip_repeats_the_action():
    skipping = MultiThreadedEnv(2, "Pendulum-v1", frame_skip=2)
    plain = MultiThreadedEnv(2, "Pendulum-v1")
    outs = []
    for env in (skipping, plain):
        env.set_seed(4)
        outs.append(env.rollout(6 // env.frame_skip, lambda td: td.set("action", torch.ones(2, 1))))
    torch.testing.assert_close(
        outs[0]["next", "observation"][:, -1], outs[1]["next", "observation"][:, -1]
    )
    torch.testing.assert_close(
        outs[0]["next", "reward"].sum(1), outs[1]["next", "reward"].sum(1), rtol=1e-5, atol=1e-4
    )


# ---------------------------------------------------------------------- async mode
def _async(num_envs=4, batch=2, **kwargs):
    create = {"batch_size": batch, "seed": 0, **kwargs}
    return MultiThreadedEnv(num_envs, "CartPole-v1", create_env_kwargs=create)


def test_async_mode_has_the_batch_size_and_env_ids():
    env = _async()
    assert env.is_async and env.num_workers == 4
    assert env.batch_size == torch.Size([2])
    assert env.observation_spec["env_id"].shape == torch.Size([2])
    check_env_specs(env)
    rollout = env.rollout(40, break_when_any_done=False)
    assert rollout.batch_size == torch.Size([2, 40])
    seen = set(rollout["env_id"].flatten().tolist()) | set(
        rollout["next", "env_id"].flatten().tolist()
    )
    assert seen == {0, 1, 2, 3}
    # the next root is the rows EnvPool returned: step_mdp keeps each row's env_id with its data
    torch.testing.assert_close(rollout["env_id"][:, 1:], rollout["next", "env_id"][:, :-1])


def test_async_rows_follow_their_sub_env():
    env = _async(num_envs=3, batch=1)
    env.set_info_dict_reader(_elapsed_reader())
    policy = lambda td: td.set("action", torch.ones(1, dtype=torch.int64))  # noqa: E731
    rollout = env.rollout(90, policy, break_when_any_done=False)
    ids = rollout["next", "env_id"][0]
    elapsed = rollout["next", "elapsed_step"][0]
    done = rollout["next", "done"][0].squeeze(-1)
    assert done.sum() >= 6
    for env_id in range(3):
        steps = elapsed[ids == env_id].tolist()
        ended = done[ids == env_id].tolist()
        # each sub-env counts its own steps; after an episode ends it restarts from 0
        for previous, current, finished in zip(steps, steps[1:], ended):
            assert current == (0 if finished else previous + 1)


def test_async_reset_of_a_running_row_raises():
    env = _async()
    td = env.reset()
    td["_reset"] = torch.tensor([[True], [False]])
    message = ASYNC_RESET_RUNNING.format(rows=[0], ids=td["env_id"][:1].tolist())
    with pytest.raises(ValueError, match=re.escape(message)):
        env.reset(td)


@pytest.mark.parametrize("num_envs", [4, 3])
def test_async_full_resets_restart_every_sub_env(num_envs):
    # 4 sub-envs, batches of 2: the results owed are received and dropped; 3: the pool is rebuilt
    env = _async(num_envs=num_envs, batch=2).set_info_dict_reader(_elapsed_reader())
    for _ in range(3):
        rollout = env.rollout(7, break_when_any_done=False)
        assert (rollout["elapsed_step"][:, 0] == 0).all()  # the first rows start episodes
    assert env.reset()["elapsed_step"].tolist() == [0, 0]


def test_async_wrapper_cannot_restart_an_uneven_pool():
    pool = envpool.make("CartPole-v1", env_type="gymnasium", num_envs=3, batch_size=2)
    env = MultiThreadedEnvWrapper(pool)
    env.rollout(3)
    message = ASYNC_UNEVEN_RESET.format(num_envs=3, batch=2, left=1)
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.reset()


def test_async_mode_refuses_frame_skip():
    with pytest.raises(ValueError, match=re.escape(ASYNC_FRAME_SKIP.format(frame_skip=2))):
        MultiThreadedEnv(4, "CartPole-v1", create_env_kwargs={"batch_size": 2}, frame_skip=2)


# ---------------------------------------------------------------------- flags and extra
def test_flag_alias_and_library_attributes():
    assert rllibs.HAS_ENVPOOL is True and rllibs._has_envpool is True
    assert MultiThreadedEnv.lib is envpool and MultiThreadedEnvWrapper.libname == "envpool"
    assert "Pong-v5" in MultiThreadedEnv.available_envs


def test_actions_are_converted_once_per_step():
    env = MultiThreadedEnv(2, "CartPole-v1")
    td = env.reset()
    td["action"] = torch.tensor([0, 1])
    out = env.step(td)["next"]
    assert out["observation"].dtype == torch.float32
    assert out["reward"].dtype == torch.float32 and out["reward"].shape == torch.Size([2, 1])
    assert np.isfinite(out["observation"].numpy()).all()

"""GymLikeEnv behaviour, through GymWrapper: seeding (pending seed → next reset) and frame skip."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import assert_allclose_td

gym = pytest.importorskip("gymnasium")

from rllibs import GymEnv, GymWrapper  # noqa: E402
from rllibs._gym_like import BAD_FRAME_SKIP  # noqa: E402


# ---------------------------------------------------------------------- seeding
@pytest.mark.parametrize("env_name", ["Pendulum-v1", "CartPole-v1"])
def test_same_seed_same_rollout_other_seed_differs(env_name):
    env = GymEnv(env_name)

    def rollout(seed):
        env.set_seed(seed)
        torch.manual_seed(0)
        return env.rollout(30, break_when_any_done=False)

    first, again, other = rollout(0), rollout(0), rollout(10)
    assert_allclose_td(first, again)
    with pytest.raises(AssertionError):
        assert_allclose_td(first, other)


def test_two_envs_seeded_alike_agree():
    env1, env2 = GymEnv("Pendulum-v1"), GymEnv("Pendulum-v1")
    env1.set_seed(3)
    env2.set_seed(3)
    assert_allclose_td(env1.reset(), env2.reset())


def test_reset_without_pending_seed_does_not_reseed(counting_env_cls):
    env = GymWrapper(counting_env_cls())
    env.set_seed(0)
    first = env.reset()["observation"][1]
    second = env.reset()["observation"][1]
    env.set_seed(0)
    assert env.reset()["observation"][1] == first
    assert second != first


def test_reset_seed_keyword_reseeds(counting_env_cls):
    env = GymWrapper(counting_env_cls())
    assert env.reset(seed=4)["observation"][1] == env.reset(seed=4)["observation"][1]


def test_set_seed_seeds_the_action_space(counting_env_cls):
    gym_env = counting_env_cls()
    env = GymWrapper(gym_env)
    env.set_seed(1)
    first = [gym_env.action_space.sample() for _ in range(10)]
    env.set_seed(1)
    assert [gym_env.action_space.sample() for _ in range(10)] == first


# ---------------------------------------------------------------------- frame skip
@pytest.mark.parametrize("frame_skip,reward,count", [(1, 1.0, 1), (3, 6.0, 3), (4, 10.0, 4)])
def test_frame_skip_repeats_the_action_and_sums_rewards(
    counting_env_cls, frame_skip, reward, count
):
    env = GymWrapper(counting_env_cls(max_steps=10), frame_skip=frame_skip)
    td = env.rand_step(env.reset())
    assert td["next", "reward"].item() == reward
    assert td["next", "observation"][0].item() == count
    assert not td["next", "done"].any()


def test_frame_skip_stops_at_the_first_done(counting_env_cls):
    env = GymWrapper(counting_env_cls(max_steps=5), frame_skip=3)
    td = env.reset()
    td = env.rand_step(td)  # steps 1..3
    td = env.rand_step(td["next"].clone())  # steps 4, 5 (done at 5)
    assert td["next", "reward"].item() == 4.0 + 5.0
    assert td["next", "observation"][0].item() == 5
    assert td["next", "terminated"].all() and td["next", "done"].all()


@pytest.mark.parametrize("frame_skip", [0, -1, 1.5])
def test_bad_frame_skip_is_refused(counting_env_cls, frame_skip):
    with pytest.raises(ValueError, match=re.escape(BAD_FRAME_SKIP.format(frame_skip=frame_skip))):
        GymWrapper(counting_env_cls(), frame_skip=frame_skip)

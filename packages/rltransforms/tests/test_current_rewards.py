"""Rewards and episode ends of current torchrl: LineariseRewards, SuccessReward,
TerminateTransform, RandomTruncationTransform."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlcore import check_env_specs
from rlmocks import CountingEnv, GenericTestEnv, NestedCountingEnv
from rlspecs import Bounded, Categorical, Composite, Unbounded
from rltransforms import (
    Compose,
    LineariseRewards,
    RandomTruncationTransform,
    StepCounter,
    SuccessReward,
    TerminateTransform,
    TransformedEnv,
)

pytestmark = pytest.mark.filterwarnings("error")


def _ones(td):
    return td.set("action", torch.ones(*td.batch_size, 1, dtype=torch.int8))


def _two_rewards(env, td):
    obs = td["observation"] + 1
    reward = torch.cat([obs, -2 * obs], -1)
    return td.empty().update({"observation": obs, "reward": reward})


def _multi_objective_env(reward_spec):
    return GenericTestEnv(
        observation_spec=Unbounded((1,)),
        action_spec=Bounded(-1.0, 1.0, (1,)),
        reward_spec=reward_spec,
        step_func=_two_rewards,
    )


def _success_step(env, td):
    obs = td["observation"] + 1
    return td.empty().update(
        {"observation": obs, "success": obs >= 2, "reward": torch.full((1,), 7.0)}
    )


def _success_env():
    observations = Composite(
        observation=Unbounded((1,)), success=Categorical(2, (1,), dtype=torch.bool)
    )
    return GenericTestEnv(
        observation_spec=observations,
        action_spec=Bounded(-1.0, 1.0, (1,)),
        step_func=_success_step,
    )


# ---------------------------------------------------------------- LineariseRewards
def test_linearise_rewards_weighted_sum_in_an_env():
    env = TransformedEnv(
        _multi_objective_env(Unbounded((2,))), LineariseRewards(["reward"], weights=[1.0, 0.5])
    )
    assert env.reward_spec.shape == (1,)
    check_env_specs(env)
    rollout = env.rollout(2)
    assert rollout["next", "reward"].squeeze(-1).tolist() == [0.0, 0.0]


def test_linearise_rewards_default_weights_sum():
    t = LineariseRewards(in_keys=["r"], out_keys=["r_sum"])
    assert t(TensorDict(r=torch.tensor([1.0, 2.0, 3.0])))["r_sum"].tolist() == [6.0]


def test_linearise_rewards_bounded_spec_keeps_bounds_under_negative_weights():
    spec = Bounded(torch.tensor([0.0, -1.0]), torch.tensor([2.0, 1.0]))
    out = LineariseRewards(["reward"], weights=[1.0, -3.0]).transform_reward_spec(spec)
    assert isinstance(out, Bounded) and out.shape == (1,)
    assert (out.space.low.item(), out.space.high.item()) == (-3.0, 5.0)


def test_linearise_rewards_unbounded_spec_stays_unbounded():
    env = TransformedEnv(_multi_objective_env(Unbounded((2,))), LineariseRewards(["reward"]))
    assert isinstance(env.reward_spec, Unbounded)


def test_linearise_rewards_refuses_discrete_rewards():
    with pytest.raises(NotImplementedError, match="rewards that take discrete values"):
        LineariseRewards(["reward"]).transform_reward_spec(Categorical(3, (2,)))


def test_linearise_rewards_refuses_two_dim_weights():
    with pytest.raises(ValueError, match="Expected weights to be a unidimensional tensor. Got 2"):
        LineariseRewards(["reward"], weights=torch.ones(2, 2))


def test_linearise_rewards_refuses_a_weight_count_mismatch():
    with pytest.raises(ValueError, match=re.escape("should match. Got: 2 and 3")):
        TransformedEnv(
            _multi_objective_env(Unbounded((2,))), LineariseRewards(["reward"], weights=[1, 2, 3])
        )
    with pytest.raises(ValueError, match=re.escape("should match. Got: 2 and 3")):
        LineariseRewards(["r"], weights=[1.0, 2.0, 3.0])(TensorDict(r=torch.ones(2)))


# ---------------------------------------------------------------- SuccessReward
def test_success_reward_replaces_the_step_reward():
    env = TransformedEnv(_success_env(), SuccessReward(scale=5.0))
    spec = env.reward_spec
    assert isinstance(spec, Bounded) and (spec.space.low.item(), spec.space.high.item()) == (0, 5)
    check_env_specs(env)
    assert env.rollout(3)["next", "reward"].squeeze(-1).tolist() == [0.0, 5.0, 5.0]


def test_success_reward_negative_scale_flips_the_bounds():
    env = TransformedEnv(_success_env(), SuccessReward(scale=-1.0, reward_key="penalty"))
    spec = env.full_reward_spec["penalty"]
    assert (spec.space.low.item(), spec.space.high.item()) == (-1.0, 0.0)


def test_success_reward_outside_an_env():
    td = TensorDict(success=torch.tensor([[True], [False]]), batch_size=[2])
    assert SuccessReward(scale=2.0)(td)["reward"].squeeze(-1).tolist() == [2.0, 0.0]


def test_success_reward_without_a_shape_to_follow():
    spec = Composite(
        full_observation_spec=Composite(), full_reward_spec=Composite(), full_done_spec=Composite()
    )
    with pytest.raises(RuntimeError, match="could not infer the reward shape"):
        SuccessReward().transform_output_spec(spec)


# ---------------------------------------------------------------- TerminateTransform
def test_terminate_transform_ends_the_rollout_when_the_predicate_holds():
    env = TransformedEnv(
        CountingEnv(max_steps=100), TerminateTransform(lambda td: td["observation"] >= 3)
    )
    rollout = env.rollout(10, _ones)
    assert rollout["next", "observation"].squeeze(-1).tolist() == [1, 2, 3]
    assert rollout["next", "terminated"].squeeze(-1).tolist() == [False, False, True]
    check_env_specs(env)


def test_terminate_transform_can_leave_done_alone():
    env = TransformedEnv(
        CountingEnv(max_steps=100),
        TerminateTransform(lambda td: td["observation"] >= 1, write_done=False),
    )
    td = env.step(_ones(env.reset()))
    assert td["next", "terminated"].item() and not td["next", "done"].item()


def test_terminate_transform_broadcasts_a_scalar_flag_over_a_batch():
    env = TransformedEnv(
        CountingEnv(max_steps=100, batch_size=[3]), TerminateTransform(lambda td: True)
    )
    td = env.step(_ones(env.reset()))
    assert td["next", "done"].all()


def test_terminate_transform_flags_nested_done_entries():
    env = TransformedEnv(NestedCountingEnv(max_steps=100), TerminateTransform(lambda td: True))
    td = env.step(env.rand_action(env.reset()))
    assert all(td["next", key].all() for key in env.done_keys if key[-1] != "truncated")


def test_terminate_transform_rejects_a_non_callable():
    with pytest.raises(ValueError, match="`stop` must be a callable."):
        TerminateTransform(stop=True)


def test_terminate_transform_needs_an_env():
    with pytest.raises(RuntimeError, match="cannot be executed without a parent environment"):
        TerminateTransform(lambda td: True)(TensorDict())


# ---------------------------------------------------------------- RandomTruncationTransform
def _random_truncation_env(batch, **kwargs):
    return TransformedEnv(
        CountingEnv(max_steps=1000, batch_size=batch),
        Compose(StepCounter(), RandomTruncationTransform(**kwargs)),
    )


def test_random_truncation_first_horizons_spread_over_the_range():
    torch.manual_seed(0)
    env = _random_truncation_env([64], min_horizon=2, max_horizon=6)
    rollout = env.rollout(6, _ones, break_when_any_done=False)
    truncated_at = rollout["next", "truncated"].squeeze(-1).float().argmax(-1) + 1
    assert set(truncated_at.tolist()) == {1, 2, 3, 4, 5, 6}


def test_random_truncation_env_specs_hold():
    check_env_specs(_random_truncation_env([4], min_horizon=2, max_horizon=6, prob=0.5))


def test_random_truncation_later_episodes_use_max_horizon_without_prob():
    torch.manual_seed(0)
    env = _random_truncation_env([8], min_horizon=2, max_horizon=4, prob=0.0)
    rollout = env.rollout(20, _ones, break_when_any_done=False)
    for row in rollout["next", "step_count"].squeeze(-1).tolist():
        starts = [i for i, count in enumerate(row) if count == 1] + [len(row)]
        episodes = [row[a:b] for a, b in zip(starts, starts[1:])]
        assert len(episodes[0]) <= 4  # the spread of the first reset
        assert all(episode == [1, 2, 3, 4] for episode in episodes[1:-1])


def test_random_truncation_prob_one_draws_short_horizons():
    torch.manual_seed(0)
    env = _random_truncation_env([16], min_horizon=2, max_horizon=3, prob=1.0)
    rollout = env.rollout(30, _ones, break_when_any_done=False)
    assert rollout["next", "step_count"].max() <= 3


def test_random_truncation_needs_a_step_counter():
    with pytest.raises(RuntimeError, match="requires a StepCounter earlier in the transform chain"):
        TransformedEnv(CountingEnv(), RandomTruncationTransform(2, 5))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((2, 5, 1.5), "prob must be in [0, 1], got 1.5"),
        ((2, 5, 0.0, -0.1), "first_episode_prob must be in [0, 1], got -0.1"),
        ((0, 5), "min_horizon must be >= 1, got 0"),
        ((1, 0), "max_horizon must be >= 1, got 0"),
        ((5, 2), "min_horizon (5) must be <= max_horizon (2)"),
    ],
)
def test_random_truncation_rejects_bad_arguments(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        RandomTruncationTransform(*args)


def test_random_truncation_cannot_run_alone():
    with pytest.raises(NotImplementedError, match="cannot be called independently"):
        RandomTruncationTransform(2, 5)(TensorDict())

"""A downstream project's tests, written the way another library would use ``rlmocks``.

The nox session ``downstream`` runs this file in a virtualenv holding only rlspecs, rlcore
and rlmocks (plus pytest): it proves that those three are enough to test code of one's own
against predictable envs. The "project code" under test is the two functions below.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDictBase

from rlcore import EnvBase, check_env_specs, step_mdp
from rlmocks import (
    CountingEnv,
    CountingEnvCountPolicy,
    GenericTestEnv,
    MockSerialEnv,
    NestedCountingEnv,
)
from rlmocks.testing import rand_reset
from rlspecs import Bounded, Unbounded

# ----------------------------------------------------------------- the project's own code


def discounted_returns(rollout: TensorDictBase, gamma: float) -> torch.Tensor:
    """Discounted return from every step of a single-trajectory rollout of shape (*B, T)."""
    rewards = rollout["next", "reward"].squeeze(-1)
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[..., 0])
    for t in range(rewards.shape[-1] - 1, -1, -1):
        running = rewards[..., t] + gamma * running
        returns[..., t] = running
    return returns


def run_episodes(env: EnvBase, policy, steps: int) -> int:
    """Step ``env`` for ``steps`` steps with auto-reset and count the episodes that ended."""
    td = env.reset()
    finished = 0
    for _ in range(steps):
        td, next_td = env.step_and_maybe_reset(policy(td))
        finished += int(td["next", "done"].sum())
        td = next_td
    return finished


# ----------------------------------------------------------------- its tests


def test_discounted_returns_on_a_predictable_reward_stream():
    env = MockSerialEnv()
    env.set_seed(100)  # counter starts at 100 % 17 = 15; rewards are 16, 17, 18
    rollout = env.rollout(3)
    returns = discounted_returns(rollout, gamma=0.5)
    expected = torch.tensor([16 + 0.5 * 17 + 0.25 * 18, 17 + 0.5 * 18, 18.0])
    torch.testing.assert_close(returns, expected)


@pytest.mark.parametrize("batch_size", [(), (3,)])
def test_run_episodes_counts_every_finished_episode(batch_size):
    env = CountingEnv(max_steps=2, batch_size=batch_size)  # done on the 3rd step
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    n_envs = max(1, torch.Size(batch_size).numel())
    assert run_episodes(env, policy, steps=9) == 3 * n_envs


def test_partial_reset_leaves_other_envs_alone():
    env = NestedCountingEnv(batch_size=(4,), nest_done=False)
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    last = step_mdp(env.rollout(3, policy)[..., -1])
    last.update(rand_reset(env))
    reset = last["_reset"].squeeze(-1)
    out = env.reset(last)
    assert (out["data", "states"][reset] == 0).all()
    assert (out["data", "states"][~reset] == 3).all()


def _accumulate(env, td):
    obs = td["observation"] + td["action"]
    return td.empty().update({"observation": obs, "reward": obs.clone()})


def test_a_custom_env_built_from_generic_test_env_meets_its_specs():
    env = GenericTestEnv(
        observation_spec=Unbounded(shape=(1,)),
        action_spec=Bounded(1.0, 1.0, shape=(1,)),
        step_func=_accumulate,
    )
    check_env_specs(env)
    assert env.rollout(4)["next", "reward"].squeeze(-1).tolist() == [1.0, 2.0, 3.0, 4.0]

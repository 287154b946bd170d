"""MultiAgentCountingEnv (grouped agents, one counter) and MockNestedResetEnv (the root prevails)."""

from __future__ import annotations

import logging

import pytest
import torch
from tensordict import TensorDict

from rlcore import MarlGroupMapType
from rlmocks import MockNestedResetEnv, MultiAgentCountingEnv


def test_agents_are_in_one_group_by_default():
    env = MultiAgentCountingEnv(n_agents=3)
    assert env.group_map == {"agents": ["agent_0", "agent_1", "agent_2"]}
    assert env.action_keys == [("agents", f"agent_{i}", "action") for i in range(3)]
    assert env.full_observation_spec["agents", "agent_1", "observation"].shape == (3, 4)


def test_one_group_per_agent_nests_each_agent_under_its_own_group():
    env = MultiAgentCountingEnv(n_agents=2, group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT)
    assert env.reward_keys == [("agent_0", "agent_0", "reward"), ("agent_1", "agent_1", "reward")]


def test_explicit_group_map_is_used():
    group_map = {"red": ["agent_0"], "blue": ["agent_1", "agent_2"]}
    env = MultiAgentCountingEnv(n_agents=3, group_map=group_map)
    assert ("blue", "agent_2", "done") in env.done_keys
    assert ("red", "agent_0", "done") in env.done_keys


def test_group_map_missing_an_agent_is_rejected():
    with pytest.raises(ValueError, match="Agent 'agent_1' is not in any group"):
        MultiAgentCountingEnv(n_agents=2, group_map={"red": ["agent_0"]})


def test_env_done_level_gets_no_terminated():
    env = MultiAgentCountingEnv(n_agents=1, env_done_key="all_done")
    assert env.done_keys == [
        "all_done",
        ("agents", "agent_0", "done"),
        ("agents", "agent_0", "terminated"),
    ]
    assert env.reset_keys[0] == "_reset"


@pytest.mark.parametrize("batch_size", [(), (2,), (2, 3)])
def test_every_done_flips_after_max_steps_plus_one_steps(batch_size):
    env = MultiAgentCountingEnv(n_agents=2, max_steps=2, batch_size=batch_size)
    rollout = env.rollout(10)
    assert rollout.shape == (*batch_size, 3)
    assert rollout["next", "env_done"][..., -1, :].all()
    assert not rollout["next", "env_done"][..., :-1, :].any()
    assert rollout["next", "agents", "agent_1", "terminated"][..., -1, :].all()
    assert (rollout["next", "agents", "agent_0", "reward"] == 0).all()


def test_step_counts_whatever_the_actions():
    env = MultiAgentCountingEnv(n_agents=2, start_val=1)
    td = env.full_action_spec.zero().update(env.reset())
    env.step(td)
    assert env.count.item() == 2


def test_root_reset_mask_resets_only_its_rows():
    env = MultiAgentCountingEnv(n_agents=2, batch_size=(3,))
    env.reset()
    env.rand_step()
    env.reset(TensorDict(_reset=torch.tensor([[True], [False], [True]]), batch_size=[3]))
    assert env.count.squeeze(-1).tolist() == [0, 1, 0]


def test_nested_reset_root_done_prevails_over_agent_done():
    env = MockNestedResetEnv(num_steps=3, done_at_root=True)
    rollout = env.rollout(7, break_when_any_done=False)
    assert rollout["next", "done"].squeeze(-1).tolist() == [0, 0, 1, 0, 0, 1, 0]
    assert rollout["next", "agent_1", "done"].all()
    assert not rollout["next", "agent_2", "done"].any()


def test_nested_reset_agent_done_ends_the_episode_without_root():
    env = MockNestedResetEnv(num_steps=2, done_at_root=False)
    assert "done" not in env.done_keys
    rollout = env.rollout(5, break_when_any_done=False)
    assert rollout["next", "agent_1", "done"].squeeze(-1).tolist() == [0, 1, 0, 1, 0]


def test_nested_reset_env_has_no_data_besides_done_flags():
    env = MockNestedResetEnv(num_steps=2, done_at_root=True)
    assert env.observation_keys == [] and env.action_keys == [] and env.reward_keys == []


def test_nested_reset_logs_the_episode_length(caplog):
    env = MockNestedResetEnv(num_steps=2, done_at_root=True)
    with caplog.at_level(logging.INFO, logger="rlmocks._multi_agent"):
        env.rollout(3, break_when_any_done=False)
    assert "Reset after 2 steps!" in caplog.text

"""AutoResettingCountingEnv and AutoResetHeteroCountingEnv: envs that reset themselves."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlcore import step_mdp
from rlmocks import (
    AutoResetHeteroCountingEnv,
    AutoResettingCountingEnv,
    CountingEnvCountPolicy,
    HeterogeneousCountingEnvPolicy,
)
from rlmocks._auto_reset import PARTIAL_RESET_ERROR


def _count_steps(env, n):
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    td = env.reset()
    observations, done = [], []
    for _ in range(n):
        td = env.step(policy(td))
        observations.append(td["next", "observation"].flatten().tolist())
        done.append(td["next", "done"].flatten().tolist())
        td = step_mdp(td)
    return observations, done


def test_counting_env_resets_itself_at_the_done_step():
    env = AutoResettingCountingEnv(max_steps=2, start_val=0)
    observations, done = _count_steps(env, 6)
    assert observations == [[1], [2], [0], [1], [2], [0]]
    assert done == [[False], [False], [True], [False], [False], [True]]


def test_counting_env_resets_every_batch_element_at_once():
    env = AutoResettingCountingEnv(max_steps=1, batch_size=(2,))
    td = env.reset()
    td["action"] = torch.tensor([[1], [0]], dtype=torch.int8)
    td = step_mdp(env.step(td))
    td["action"] = torch.tensor([[1], [0]], dtype=torch.int8)
    out = env.step(td)["next"]
    assert out["done"].squeeze(-1).tolist() == [True, False]
    assert out["observation"].squeeze(-1).tolist() == [0, 0]


def test_counting_env_rejects_partial_resets():
    env = AutoResettingCountingEnv()
    td = TensorDict(_reset=torch.ones(1, dtype=torch.bool))
    message = PARTIAL_RESET_ERROR.format(cls="AutoResettingCountingEnv", key="_reset")
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.reset(td)


def test_counting_env_rolls_on_with_auto_reset():
    pytest.importorskip("rltransforms")  # auto_reset=True wraps the env in an AutoResetTransform
    env = AutoResettingCountingEnv(max_steps=2, auto_reset=True)
    rollout = env.rollout(7, CountingEnvCountPolicy(env.action_spec), break_when_any_done=False)
    assert rollout["observation"].flatten().tolist() == [0, 1, 2, 0, 1, 2, 0]
    assert rollout["next", "done"].flatten().tolist() == [0, 0, 1, 0, 0, 1, 0]


@pytest.mark.parametrize("batch_size", [(), (2,), (2, 1)])
def test_hetero_count_is_per_agent_and_starts_at_start_val(batch_size):
    env = AutoResetHeteroCountingEnv(start_val=2, batch_size=batch_size)
    assert env.count.shape == (*batch_size, 3, 1)
    env.count.zero_()
    env.reset()
    assert (env.count == 2).all()


def test_hetero_agents_count_their_own_actions_and_wrap_to_zero():
    env = AutoResetHeteroCountingEnv(max_steps=2)
    td = env.reset()
    actions = env.full_action_spec.zero()
    for i in range(3):
        actions["lazy"][..., i]["action"][..., 0] = 1.0 if i != 1 else 0.0
    counts = []
    for _ in range(3):
        env.step(td.update(actions))
        counts.append(env.count.squeeze(-1).tolist())
    assert counts == [[1, 0, 1], [2, 0, 2], [0, 0, 0]]


def test_hetero_step_adds_each_agents_count_to_its_input_observations():
    env = AutoResetHeteroCountingEnv(max_steps=5)
    policy = HeterogeneousCountingEnvPolicy(env.full_action_spec)
    td = policy(env.reset())
    env.step(td)
    env.step(td)
    lazy = td["lazy"]
    assert (lazy[..., 0]["tensor_0"] == 1 + 2).all()
    assert (lazy[..., 2]["camera"] == 1 + 2).all()
    assert (td["state"] == 0).all()


def test_hetero_outputs_are_zeros_and_never_done():
    env = AutoResetHeteroCountingEnv(max_steps=1)
    policy = HeterogeneousCountingEnvPolicy(env.full_action_spec)
    rollout = env.rollout(6, policy, return_contiguous=False)
    assert rollout.shape == (6,)
    assert not rollout["next", "lazy", "done"].any()
    assert (rollout["next", "state"] == 0).all()
    assert (rollout["next", "lazy", "reward"] == 0).all()


def test_hetero_rejects_partial_resets():
    env = AutoResetHeteroCountingEnv()
    td = env.reset().set(("lazy", "_reset"), torch.ones(3, 1, dtype=torch.bool))
    message = PARTIAL_RESET_ERROR.format(cls="AutoResetHeteroCountingEnv", key=("lazy", "_reset"))
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.reset(td)

"""DummyModelBasedEnvBase and ActionObsMergeLinear."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

from rlmocks import ActionObsMergeLinear, DummyModelBasedEnvBase


def world_model() -> TensorDictSequential:
    return TensorDictSequential(
        TensorDictModule(
            ActionObsMergeLinear(5, 4), ["hidden_observation", "action"], ["hidden_observation"]
        ),
        TensorDictModule(nn.Linear(4, 1), ["hidden_observation"], ["reward"]),
    )


def test_action_obs_merge_linear_concatenates_then_projects():
    block = ActionObsMergeLinear(5, 4)
    assert isinstance(block.linear, nn.Linear)
    obs, action = torch.randn(3, 4), torch.randn(3, 1)
    expected = block.linear(torch.cat([obs, action], -1))
    torch.testing.assert_close(block(obs, action), expected)


def test_rollout_keys_and_shapes():
    env = DummyModelBasedEnvBase(world_model(), batch_size=torch.Size([10]))
    rollout = env.rollout(max_steps=100)
    assert set(rollout.keys(True)) == {
        "action",
        "hidden_observation",
        "done",
        "terminated",
        "next",
        ("next", "hidden_observation"),
        ("next", "reward"),
        ("next", "done"),
        ("next", "terminated"),
    }
    assert rollout["next", "hidden_observation"].shape == (10, 100, 4)


def test_step_runs_the_world_model():
    model = world_model()
    env = DummyModelBasedEnvBase(model)
    td = env.reset()
    td["action"] = torch.ones(1)
    out = env.step(td)
    expected = model[0].module(td["hidden_observation"], td["action"])
    torch.testing.assert_close(out["next", "hidden_observation"], expected)


def test_env_is_unlocked_and_the_flag_is_read_only():
    env = DummyModelBasedEnvBase(world_model(), batch_size=torch.Size([10]))
    assert not env.batch_locked
    with pytest.raises(RuntimeError, match="batch_locked is a read-only property"):
        env.batch_locked = False
    td = env.reset()
    td["action"] = env.action_spec.rand()
    env.step(td)
    wrong = td.unsqueeze(-1).expand(10, 2).reshape(-1).to_tensordict()
    with pytest.raises(
        RuntimeError, match=re.escape("Expected a tensordict with shape==env.batch_size")
    ):
        env.step(wrong)


def test_unbatched_env_steps_a_batched_tensordict():
    env = DummyModelBasedEnvBase(world_model(), batch_size=torch.Size([]))
    td = env.reset()
    td["action"] = env.action_spec.rand()
    out = env.step(td.expand(2))
    assert out["next", "hidden_observation"].shape == (2, 4)

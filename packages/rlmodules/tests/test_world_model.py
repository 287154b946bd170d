"""WorldModelWrapper: transition then reward."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from rlmodules import SafeModule, WorldModelWrapper

pytestmark = pytest.mark.filterwarnings("error")


class _Merge(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(5, 4)

    def forward(self, obs, action):
        return self.linear(torch.cat([obs, action], -1))


def _world_model():
    return WorldModelWrapper(
        SafeModule(
            _Merge(), in_keys=["hidden_observation", "action"], out_keys=["hidden_observation"]
        ),
        SafeModule(nn.Linear(4, 1), in_keys=["hidden_observation"], out_keys=["reward"]),
    )


def test_world_model_updates_state_then_rewards_the_new_state():
    model = _world_model()
    td = TensorDict(
        hidden_observation=torch.randn(10, 4), action=torch.randn(10, 1), batch_size=[10]
    )
    expected_state = model.get_transition_model_operator().module(
        td["hidden_observation"], td["action"]
    )
    out = model(td.clone())
    torch.testing.assert_close(out["hidden_observation"], expected_state)
    torch.testing.assert_close(out["reward"], model.get_reward_operator().module(expected_state))


def test_world_model_getters_return_the_two_models():
    model = _world_model()
    assert model.get_transition_model_operator() is model.module[0]
    assert model.get_reward_operator() is model.module[1]
    assert set(model.in_keys) == {"hidden_observation", "action"}

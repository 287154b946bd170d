"""Actor, ValueOperator and the actor-value / actor-critic operators."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict
from torch import nn

from rlmodules import MLP, Actor, ActorCriticOperator, ActorValueOperator, SafeModule, ValueOperator
from rlspecs import Bounded, Composite

pytestmark = pytest.mark.filterwarnings("error")


def _trunk():
    return SafeModule(nn.Linear(3, 4), in_keys=["observation"], out_keys=["hidden"])


def _obs(n=5):
    return TensorDict(observation=torch.randn(n, 3), batch_size=[n])


def test_actor_reads_observation_and_writes_action_by_default():
    actor = Actor(nn.Linear(3, 2))
    assert actor.in_keys == ["observation"]
    assert actor.out_keys == ["action"]
    assert actor(_obs())["action"].shape == (5, 2)


def test_actor_stores_leaf_spec_under_action_and_projects_when_safe():
    spec = Bounded(-0.5, 0.5, shape=(2,))
    actor = Actor(lambda x: x[..., :2] * 1e3, spec=spec, safe=True)
    assert isinstance(actor.spec, Composite)
    assert actor.spec["action"] == spec
    assert actor(_obs())["action"].abs().max() <= 0.5


def test_actor_to_returns_the_actor():
    actor = Actor(nn.Linear(1, 1, bias=False))
    assert actor.to("cpu") is actor
    assert isinstance(actor, SafeModule)


def test_value_operator_writes_state_value_from_observation():
    value = ValueOperator(nn.Linear(3, 1))
    assert value.out_keys == ["state_value"]
    assert value(_obs())["state_value"].shape == (5, 1)


def test_value_operator_reading_action_writes_state_action_value():
    value = ValueOperator(MLP(out_features=1, num_cells=[]), in_keys=["hidden", "action"])
    assert value.out_keys == ["state_action_value"]
    td = TensorDict(hidden=torch.zeros(5, 4), action=torch.zeros(5, 2), batch_size=[5])
    assert value(td)["state_action_value"].shape == (5, 1)


def _actor_critic():
    return ActorCriticOperator(
        _trunk(),
        SafeModule(nn.Linear(4, 2), in_keys=["hidden"], out_keys=["action"]),
        ValueOperator(MLP(out_features=1, num_cells=[]), in_keys=["hidden", "action"]),
    )


def test_actor_critic_runs_common_then_policy_then_critic():
    op = _actor_critic()
    td = op(_obs())
    assert set(td.keys()) == {"observation", "hidden", "action", "state_action_value"}
    hidden = op.module[0].module(td["observation"])
    torch.testing.assert_close(td["action"], op.module[1].module(hidden))
    torch.testing.assert_close(
        td["state_action_value"], op.module[2].module(torch.cat([hidden, td["action"]], -1))
    )


def test_actor_critic_policy_operator_writes_no_value():
    op = _actor_critic()
    td = op.get_policy_operator()(_obs())
    assert "action" in td.keys()
    assert "state_action_value" not in td.keys()
    assert op.get_policy_head() is op.module[1]
    assert op.get_value_head() is op.module[2]


def test_actor_critic_critic_operator_is_the_whole_operator():
    op = _actor_critic()
    assert op.get_critic_operator() is op


def test_actor_critic_has_no_value_operator():
    with pytest.raises(RuntimeError, match=re.escape("call get_critic_operator() instead")):
        _actor_critic().get_value_operator()


def test_actor_critic_rejects_state_value_head():
    with pytest.raises(
        RuntimeError, match=re.escape("writes 'state_value', a value of the state alone")
    ):
        ActorCriticOperator(
            _trunk(),
            SafeModule(nn.Linear(4, 2), in_keys=["hidden"], out_keys=["action"]),
            ValueOperator(nn.Linear(4, 1), in_keys=["hidden"]),
        )


def test_actor_critic_backpropagates_into_common_trunk():
    op = _actor_critic()
    op(_obs())["state_action_value"].sum().backward()
    assert op.module[0].module.weight.grad is not None


def test_actor_critic_missing_observation_names_it():
    with pytest.raises(KeyError, match=re.escape("could not find the in_key(s) ['observation']")):
        _actor_critic()(TensorDict(obs=torch.zeros(3)))


def test_actor_value_operator_value_operator_skips_policy():
    op = ActorValueOperator(
        _trunk(),
        SafeModule(nn.Linear(4, 2), in_keys=["hidden"], out_keys=["action"]),
        ValueOperator(nn.Linear(4, 1), in_keys=["hidden"]),
    )
    td = op.get_value_operator()(_obs())
    assert "state_value" in td.keys()
    assert "action" not in td.keys()
    assert set(op(_obs()).keys()) == {"observation", "hidden", "action", "state_value"}

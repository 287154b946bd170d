"""Action transforms: DiscreteActionProjection (alone, inverted, in an env) and ActionMask."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv, MaskedEnv, OneHotEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rlspecs import OneHot
from rltransforms import (
    ActionMask,
    Compose,
    DiscreteActionProjection,
    StepCounter,
    TransformedEnv,
)
from rltransforms._action import (
    MASK_FORWARD_ERROR,
    MASK_NO_PARENT_ERROR,
    PROJECTION_SHAPE_ERROR,
)

pytestmark = pytest.mark.filterwarnings("error")


# -------------------------------------------------------------------- DiscreteActionProjection
@pytest.mark.parametrize("action_n", [2, 4])
def test_discrete_action_projection_inverse_keeps_valid_actions_and_redraws_others(action_n):
    torch.manual_seed(0)
    t = DiscreteActionProjection(num_actions_effective=3, max_actions=5)
    action = torch.nn.functional.one_hot(torch.full((100,), action_n), 5)
    td = TensorDict(action=action, batch_size=[100])
    out = t.inv(td)
    assert out["action"].shape == (100, 3) and (out["action"].sum(-1) == 1).all()
    if action_n < 3:
        assert (out["action"].argmax(-1) == action_n).all()
    else:
        assert len(out["action"].argmax(-1).unique()) == 3  # redrawn among the valid ones
    assert td["action"].shape == (100, 5)


def test_discrete_action_projection_forward_widens_stored_actions():
    t = DiscreteActionProjection(3, 5)
    td = TensorDict(action=torch.tensor([0, 1, 0]))
    assert t(td)["action"].tolist() == [0, 1, 0, 0, 0]
    assert nn.Sequential(Compose(DiscreteActionProjection(3, 5)))(
        TensorDict(action=torch.tensor([0, 0, 1]))
    )["action"].shape == (5,)
    untouched = DiscreteActionProjection(3, 5, include_forward=False)(
        TensorDict(action=torch.tensor([0, 1, 0]))
    )
    assert untouched["action"].shape == (3,)


def test_discrete_action_projection_in_an_env():
    base = OneHotEnv(n=3)
    env = TransformedEnv(base, DiscreteActionProjection(3, 7))
    assert isinstance(env.action_spec, OneHot) and env.action_spec.shape == (7,)
    check_env_specs(env)
    td = env.reset().set("action", torch.nn.functional.one_hot(torch.tensor(6), 7))
    out = env.step(td)
    assert base.received.shape == (3,) and base.received.sum() == 1
    assert out["action"].shape == (7,)  # the caller's action is left as sent


def test_discrete_action_projection_errors():
    with pytest.raises(RuntimeError, match="`max_actions` int must be greater or equal"):
        DiscreteActionProjection(5, 3)
    with pytest.raises(
        RuntimeError, match=re.escape(PROJECTION_SHAPE_ERROR.format(got=4, expected=5))
    ):
        DiscreteActionProjection(3, 5).inv(TensorDict(action=torch.zeros(4)))
    with pytest.raises(KeyError, match="'act' not found in the action spec"):
        TransformedEnv(CountEnv(), DiscreteActionProjection(3, 5, action_key="act"))


# --------------------------------------------------------------------------------- ActionMask
@pytest.mark.parametrize("one_hot", [False, True])
def test_action_mask_restricts_random_actions_to_the_allowed_ones(one_hot):
    torch.manual_seed(0)
    env = TransformedEnv(MaskedEnv(one_hot=one_hot), ActionMask())
    check_env_specs(env)
    rollout = env.rollout(10)
    actions = rollout["action"].long().argmax(-1) if one_hot else rollout["action"]
    assert sorted(actions.tolist()) == [0, 1, 2, 3]  # each action once, then done
    assert rollout["next", "done"][-1].all()


def test_action_mask_is_reset_with_the_env():
    env = TransformedEnv(MaskedEnv(), ActionMask())
    env.rollout(2)
    assert not env.action_spec.mask.all()
    env.reset()
    assert env.action_spec.mask.all()


def test_action_mask_with_other_transforms_and_errors():
    env = TransformedEnv(MaskedEnv(), Compose(StepCounter(), ActionMask()))
    check_env_specs(env)
    with pytest.raises(RuntimeError, match=re.escape(MASK_FORWARD_ERROR.format(cls=ActionMask))):
        ActionMask()(TensorDict(action_mask=torch.ones(4, dtype=torch.bool)))
    with pytest.raises(RuntimeError, match=re.escape(MASK_NO_PARENT_ERROR.format(cls=ActionMask))):
        ActionMask()._call(TensorDict(action_mask=torch.ones(4, dtype=torch.bool)))
    with pytest.raises(ValueError, match="The action spec must be one of .*'action'"):
        TransformedEnv(CountEnv(), ActionMask()).reset()
    with pytest.raises(ValueError, match="The mask key must be a nested key"):
        ActionMask(mask_key=3)

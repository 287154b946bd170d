"""KLRewardTransform (torchrl 0.4's RLHF transform) on tensordict.nn actors."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import NormalParamExtractor
from tensordict.nn import ProbabilisticTensorDictModule as Prob
from tensordict.nn import ProbabilisticTensorDictSequential as Seq
from tensordict.nn import TensorDictModule as Mod
from torch import nn

from rlmocks import ContinuousActionVecMockEnv
from rltransforms import Compose, KLRewardTransform, TransformedEnv
from rltransforms._kl_reward_transform import (
    GRAD_BUFFER_ERROR,
    LOG_PROB_MISSING_ERROR,
    ONE_KEY_ERROR,
)

pytestmark = pytest.mark.filterwarnings("error")


def _actor(n_obs: int = 7, n_act: int = 7, log_prob_key: str | None = None) -> Seq:
    net = Mod(
        nn.Sequential(nn.Linear(n_obs, 2 * n_act), NormalParamExtractor()),
        in_keys=["observation"],
        out_keys=["loc", "scale"],
    )
    kwargs = {} if log_prob_key is None else {"log_prob_key": log_prob_key}
    prob = Prob(
        in_keys=["loc", "scale"],
        out_keys=["action"],
        distribution_class=torch.distributions.Normal,
        return_log_prob=True,
        **kwargs,
    )
    return Seq(net, prob)


def _shift_parameters(actor: nn.Module) -> None:
    with torch.no_grad():
        for param in actor.parameters():
            param.add_(0.5)


@pytest.mark.parametrize("out_key", ["reward", "reward_kl"])
def test_kl_reward_changes_the_reward_once_the_actor_moves(out_key):
    torch.manual_seed(0)
    actor = _actor()
    env = TransformedEnv(ContinuousActionVecMockEnv(), KLRewardTransform(actor, out_keys=out_key))
    base_reward = torch.zeros(3, 1)  # the mock env's reward
    with torch.no_grad():
        same = env.rollout(3, actor)
    # the frozen actor is the acting one: no divergence yet
    assert torch.equal(same["next", out_key], base_reward)
    _shift_parameters(actor)
    with torch.no_grad():
        moved = env.rollout(3, actor)
    assert (moved["next", out_key] != base_reward).all()
    if out_key == "reward_kl":
        assert torch.equal(moved["next", "reward"], base_reward)


def test_kl_reward_adds_coef_times_the_log_prob_difference():
    # torchrl 0.4: reward + coef * (log pi(a) - log pi_0(a)); a negative coef is a penalty
    torch.manual_seed(0)
    actor = _actor(n_obs=3, n_act=2)
    frozen = _actor(n_obs=3, n_act=2)
    frozen.load_state_dict(actor.state_dict())
    t = KLRewardTransform(actor, coef=-0.5, out_keys=["reward_kl"])
    _shift_parameters(actor)
    step = actor(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))
    step["next", "reward"] = torch.ones(4, 1)
    out = t(step)
    reference = frozen.get_dist(step.clone()).log_prob(step["action"]).sum(-1, keepdim=True)
    current = step["action_log_prob"].sum(-1, keepdim=True)
    torch.testing.assert_close(out["next", "reward_kl"], 1 - 0.5 * (current - reference))


def test_kl_reward_specs_and_reset():
    actor = _actor()
    env = TransformedEnv(
        ContinuousActionVecMockEnv(), KLRewardTransform(actor, out_keys=["reward_kl"])
    )
    assert env.observation_spec["reward_kl"].shape == env.reward_spec.shape
    assert env.reset()["reward_kl"].tolist() == [0.0]  # a zero reward at reset (torchrl 0.4)
    same = TransformedEnv(ContinuousActionVecMockEnv(), KLRewardTransform(actor))
    assert "reward_kl" not in same.observation_spec.keys()
    assert same.reward_spec.shape == (1,)


def test_kl_reward_frozen_parameters_do_not_follow_the_actor():
    actor = _actor()
    t = KLRewardTransform(actor)
    before = [p.clone() for p in t.frozen_params.values(True, True)]
    _shift_parameters(actor)
    after = list(t.frozen_params.values(True, True))
    assert all(torch.equal(a, b) for a, b in zip(before, after))
    assert not any(p.requires_grad for p in after)
    assert list(t.parameters()) == []


def test_kl_reward_requires_grad_makes_the_frozen_copy_differentiable():
    actor = _actor(n_obs=3, n_act=2)
    t = KLRewardTransform(actor, out_keys=["reward_kl"], requires_grad=True)
    assert len(list(t.parameters())) == 2 and all(p.requires_grad for p in t.parameters())
    with torch.no_grad():
        step = actor(TensorDict(observation=torch.randn(4, 3), batch_size=[4]))
    step["next", "reward"] = torch.zeros(4, 1)
    t(step)["next", "reward_kl"].sum().backward()
    assert all(p.grad is not None for p in t.parameters())


def test_kl_reward_finds_the_log_prob_key_of_the_actor():
    assert KLRewardTransform(_actor()).sample_log_prob_key == "action_log_prob"
    custom = _actor(log_prob_key="sample_log_prob")
    assert KLRewardTransform(custom).sample_log_prob_key == "sample_log_prob"


def test_kl_reward_in_keys_include_the_actor_inputs():
    t = KLRewardTransform(_actor(), in_keys="reward")
    assert t.in_keys == ["reward", "observation"] and t.out_keys == ["reward"]
    assert isinstance(Compose(t), Compose)


@pytest.mark.parametrize(
    ("in_keys", "out_keys"), [(["a", "b"], None), (["reward"], ["a", "b"])], ids=["in", "out"]
)
def test_kl_reward_takes_one_key(in_keys, out_keys):
    expected = ONE_KEY_ERROR.format(
        in_keys=in_keys, out_keys=list(in_keys) if out_keys is None else out_keys
    )
    with pytest.raises(ValueError, match=re.escape(expected)):
        KLRewardTransform(_actor(), in_keys=in_keys, out_keys=out_keys)


def test_kl_reward_refuses_keys_that_are_not_keys():
    with pytest.raises(ValueError, match="invalid in_keys / out_keys"):
        KLRewardTransform(_actor(), in_keys=[3])


def test_kl_reward_refuses_buffers_that_require_grad():
    actor = _actor()
    actor.module[0].register_buffer("bad", torch.zeros(1, requires_grad=True))
    with pytest.raises(ValueError, match=re.escape(GRAD_BUFFER_ERROR)):
        KLRewardTransform(actor)


def test_kl_reward_needs_the_policy_log_prob():
    env = TransformedEnv(ContinuousActionVecMockEnv(), KLRewardTransform(_actor()))
    assert LOG_PROB_MISSING_ERROR.startswith("KLRewardTransform: the current policy")
    # (a KeyError's text shows its quotes escaped)
    with pytest.raises(KeyError, match=r"log-probability .*action_log_prob.* is not in the step"):
        env.rollout(2)  # random actions carry no log-probability

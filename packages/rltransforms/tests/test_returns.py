"""TargetReturn (reduce/constant, partial resets) and Reward2GoTransform (inverse on [B, T] data)."""

from __future__ import annotations

import pytest
import torch
from _transform_b_envs import RandomDoneEnv
from _transform_envs import CountEnv, NestedDoneEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rltransforms import Compose, Reward2GoTransform, TargetReturn, TransformedEnv

pytestmark = pytest.mark.filterwarnings("error")


# ---------------------------------------------------------------------------- TargetReturn
@pytest.mark.parametrize("mode", ["reduce", "constant"])
@pytest.mark.parametrize("batch", [(), (2,)])
def test_target_return_single_trans_env_check(mode, batch):
    env = TransformedEnv(CountEnv(batch), TargetReturn(10.0, mode=mode))
    check_env_specs(env)
    assert "target_return" in env.observation_spec.keys()
    assert "target_return" in env.state_spec.keys()


@pytest.mark.parametrize("mode", ["reduce", "constant"])
def test_target_return_transform_env(mode):
    env = TransformedEnv(CountEnv(), TargetReturn(10.0, mode=mode))
    rollout = env.rollout(4)
    target = rollout["next", "target_return"].squeeze(-1)
    if mode == "reduce":
        assert target.tolist() == [9.0, 8.0, 7.0, 6.0]  # one unit of reward per step
    else:
        assert (target == 10).all()
    assert rollout["target_return"][0].item() == 10


def test_target_return_partial_resets():
    env = TransformedEnv(RandomDoneEnv((3,), p_done=0.3), TargetReturn(5.0))
    rollout = env.rollout(12, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)
    target = rollout["target_return"].squeeze(-1)
    assert done[:, :-1].any()
    # a sub-env restarts at 5 after its episode ends, the others keep counting down
    assert (target[:, 1:][done[:, :-1]] == 5).all()
    next_target = rollout["next", "target_return"].squeeze(-1)
    assert (target[:, 1:][~done[:, :-1]] == next_target[:, :-1][~done[:, :-1]]).all()


def test_target_return_nested_rewards():
    env = TransformedEnv(NestedDoneEnv(), TargetReturn(3.0))
    assert env.transform.out_keys == [("data", "target_return")]
    check_env_specs(env)
    rollout = env.rollout(2)
    assert (rollout["next", "data", "target_return"][-1] == 1).all()


@pytest.mark.parametrize("batch", [[], [1], [3, 2]])
@pytest.mark.parametrize("mode", ["reduce", "constant"])
def test_target_return_transform_no_env(batch, mode):
    t = TargetReturn(target_return=10.0, mode=mode, in_keys=["reward"], reset_key="_reset")
    reward = torch.randn((*batch, 1))
    td = TensorDict({("next", "reward"): reward}, batch_size=batch)
    td_reset = t._reset(td, td.empty())
    next_td = t._step(td_reset, td.get("next"))
    if mode == "reduce":
        torch.testing.assert_close(next_td["target_return"] + reward, torch.full_like(reward, 10))
    else:
        assert (next_td["target_return"] == 10).all()


def test_target_return_transform_compose():
    t = Compose(TargetReturn(10.0, in_keys=["reward"]))
    td = TensorDict({("next", "reward"): torch.ones(2, 1)}, [2])
    td_reset = t._reset(td, td.empty())
    assert (t._step(td_reset, td.get("next"))["target_return"] == 9).all()


def test_target_return_forward_refuses_and_errors():
    t = TargetReturn(10.0)
    with pytest.raises(NotImplementedError, match="cannot be executed without a parent"):
        nn.Sequential(t, nn.Identity())(TensorDict())
    with pytest.raises(ValueError, match="Mode can only be"):
        TargetReturn(1.0, mode="other")
    with pytest.raises(ValueError, match="must match"):
        t._apply_target("reward", torch.zeros(2, 1), torch.zeros(2))
    with pytest.raises(KeyError, match="reset the env first"):
        t._step(TensorDict(), TensorDict(reward=torch.zeros(1)))
    assert t.inv(TensorDict()).is_empty() and not t.has_inverse


# ---------------------------------------------------------------------------- Reward2Go
def _episodes(batch, steps, n_done, seed=0):
    generator = torch.Generator().manual_seed(seed)
    done = torch.zeros(batch, steps, 1, dtype=torch.bool)
    for i in range(batch):
        idx = torch.randperm(steps, generator=generator)[:n_done]
        done[i, idx] = True
    reward = torch.randn(batch, steps, 1, generator=generator)
    return TensorDict(
        {"misc": torch.randn(batch, steps, 1), "next": {"done": done, "reward": reward}},
        [batch, steps],
    )


def _reference(reward, done, gamma):
    out = torch.zeros_like(reward)
    for b in range(reward.shape[0]):
        acc = 0.0
        for t in reversed(range(reward.shape[1])):
            acc = reward[b, t] + (0.0 if done[b, t] else gamma * acc)
            out[b, t] = acc
    return out


@pytest.mark.parametrize("gamma", [0.99, 1.0])
@pytest.mark.parametrize("done_flags", [1, 5])
@pytest.mark.parametrize("steps", [5, 20])
def test_reward2go_transform_inverse(gamma, done_flags, steps):
    td = _episodes(10, steps, min(done_flags, steps))
    r2g = Reward2GoTransform(gamma=gamma, out_keys=["reward2go"])
    out = r2g.inv(td)
    assert "reward2go" not in td.keys()  # inv works on a copy
    expected = _reference(td["next", "reward"], td["next", "done"], gamma)
    torch.testing.assert_close(out["reward2go"], expected)


def test_reward2go_transform_rb_time_dim_and_unbatched():
    td = _episodes(4, 6, 2)
    r2g = Reward2GoTransform(gamma=0.9, out_keys=["r2g"])
    expected = r2g.inv(td)["r2g"]
    transposed = td.clone()
    transposed.names = [None, "time"]
    transposed = transposed.transpose(0, 1).contiguous()
    torch.testing.assert_close(r2g.inv(transposed)["r2g"], expected.transpose(0, 1))
    single = td[0].clone()
    torch.testing.assert_close(r2g.inv(single)["r2g"], expected[0])


def test_reward2go_transform_compose_and_forward():
    td = _episodes(3, 5, 1)
    compose = Compose(Reward2GoTransform(gamma=0.5, out_keys=["r2g"]))
    assert "r2g" in compose.inv(td).keys()
    r2g = Reward2GoTransform(gamma=0.5, out_keys=["r2g"])
    assert r2g(td) is td and "r2g" not in td.keys()  # forward is the identity
    model = nn.Sequential(r2g, nn.Identity())
    assert "r2g" not in model(td).keys()


def test_reward2go_default_keys_overwrite_the_reward():
    td = _episodes(2, 4, 1)
    out = Reward2GoTransform(gamma=1.0).inv(td)
    torch.testing.assert_close(
        out["next", "reward"], _reference(td["next", "reward"], td["next", "done"], 1.0)
    )


def test_reward2go_refuses_envs():
    r2g = Reward2GoTransform(gamma=0.9, out_keys=["r2g"])
    with pytest.raises(ValueError, match="only an inverse transform"):
        TransformedEnv(CountEnv(), r2g)
    env = TransformedEnv(CountEnv())
    with pytest.raises(ValueError, match="only an inverse transform"):
        env.append_transform(Reward2GoTransform())
    with pytest.raises(ValueError, match="only an inverse transform"):
        Reward2GoTransform()._call(TensorDict())


def test_reward2go_errors():
    r2g = Reward2GoTransform(gamma=0.9, out_keys=["r2g"])
    td = _episodes(2, 4, 1)
    td["next", "done"][1] = False
    with pytest.raises(RuntimeError, match="No episode ends found"):
        r2g.inv(td)
    with pytest.raises(KeyError, match="done flag"):
        r2g.inv(TensorDict({"next": {"reward": torch.zeros(3, 1)}}, [3]))
    td = _episodes(2, 4, 1).exclude(("next", "reward"))
    with pytest.raises(KeyError, match="could not find any of the input keys"):
        r2g.inv(td)

"""Reward transforms alone, in a Compose, in nn.Sequential and in an env: RewardScaling,
BinarizeReward, RewardClipping, RewardSum."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv, NestedDoneEnv, PixelEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rlspecs import Binary, Bounded, Categorical, Composite, Unbounded
from rltransforms import (
    BinarizeReward,
    Compose,
    RewardClipping,
    RewardScaling,
    RewardSum,
    TransformedEnv,
)
from rltransforms._reward import (
    BINARIZE_SHAPE_ERROR,
    KEY_COUNT_ERROR,
    NO_RESET_KEYS_ERROR,
    RESET_COUNT_ERROR,
)

pytestmark = pytest.mark.filterwarnings("error")


# ------------------------------------------------------------------------------ RewardScaling
@pytest.mark.parametrize("batch", [[], [2], [2, 3]])
@pytest.mark.parametrize("standard_normal", [True, False])
@pytest.mark.parametrize("keys", [None, ["reward_1"]])
def test_reward_scaling_maps_only_its_keys(batch, standard_normal, keys):
    torch.manual_seed(0)
    t = RewardScaling(loc=1.0, scale=10.0, in_keys=keys, standard_normal=standard_normal)
    key = "reward" if keys is None else keys[0]
    td = TensorDict(
        {key: torch.randn(*batch, 1), "dont touch": torch.randn(*batch, 1)}, batch_size=batch
    )
    copy = td.clone()
    t(td)
    expected = (copy[key] - 1) / 10 if standard_normal else copy[key] * 10 + 1
    torch.testing.assert_close(td[key], expected)
    assert (td["dont touch"] == copy["dont touch"]).all()


def test_reward_scaling_clamps_the_scale_and_keeps_unbounded_specs():
    t = RewardScaling(loc=0.0, scale=0.0)
    assert t.scale.item() == pytest.approx(1e-6)
    spec = Unbounded((1,))
    assert RewardScaling(1.0, 2.0).transform_reward_spec(spec) == spec


def test_reward_scaling_maps_bounded_reward_specs():
    spec = RewardScaling(1.0, 2.0).transform_reward_spec(Bounded(-1.0, 3.0, (1,)))
    assert isinstance(spec, Bounded)
    assert (spec.low.item(), spec.high.item()) == (-1.0, 7.0)
    spec = RewardScaling(1.0, 2.0, standard_normal=True).transform_reward_spec(
        Bounded(-1.0, 3.0, (1,))
    )
    assert (spec.low.item(), spec.high.item()) == (-1.0, 1.0)


def test_reward_scaling_in_an_env_compose_and_model():
    env = TransformedEnv(PixelEnv(), Compose(RewardScaling(loc=1.0, scale=0.5)))
    check_env_specs(env)
    assert env.rand_step()["next", "reward"].item() == 2.0  # 2 * 0.5 + 1
    model = nn.Sequential(RewardScaling(0.0, 3.0), nn.Identity())
    assert model(TensorDict(reward=torch.ones(1)))["reward"].item() == 3.0


def test_reward_scaling_rejects_specs_it_cannot_map():
    with pytest.raises(TypeError, match="RewardScaling: cannot transform the spec"):
        RewardScaling(1.0, 2.0).transform_reward_spec(Categorical(3))


# ----------------------------------------------------------------------------- BinarizeReward
@pytest.mark.parametrize("batch", [[], [4], [6, 4]])
def test_binarize_reward_flags_positive_rewards(batch):
    torch.manual_seed(0)
    reward = torch.randn(*batch, 1)
    misc = torch.randn(*batch, 1)
    td = TensorDict({"misc": misc.clone(), "reward": reward.clone()}, batch)
    BinarizeReward()(td)
    assert td["reward"].dtype == torch.int8
    assert (td["reward"] == (reward > 0)).all()
    assert (td["misc"] == misc).all()


def test_binarize_reward_in_compose_model_and_env():
    td = TensorDict(reward=torch.tensor([[0.5], [-1.0]]), batch_size=[2])
    assert Compose(BinarizeReward())(td.clone())["reward"].squeeze(-1).tolist() == [1, 0]

    class RewardPlus(nn.Module):
        def forward(self, td):
            return td["reward"] + 1

    out = nn.Sequential(BinarizeReward(), RewardPlus())(td.clone())
    assert out.squeeze(-1).tolist() == [2, 1]
    env = TransformedEnv(PixelEnv(), BinarizeReward())
    assert isinstance(env.reward_spec, Binary)
    check_env_specs(env)
    rollout = env.rollout(3)
    assert env.reward_spec.is_in(rollout["next", "reward"])


def test_binarize_reward_on_a_nested_reward_and_a_lone_spec():
    env = TransformedEnv(NestedDoneEnv(), BinarizeReward(in_keys=[("data", "reward")]))
    check_env_specs(env)
    assert env.full_reward_spec["data", "reward"].dtype == torch.int8
    spec = BinarizeReward().transform_reward_spec(Unbounded((3, 1)))
    assert isinstance(spec, Binary) and spec.shape == (3, 1)


def test_binarize_reward_needs_a_singleton_last_dim():
    with pytest.raises(RuntimeError, match=re.escape(BINARIZE_SHAPE_ERROR.format(shape=(3,)))):
        BinarizeReward()(TensorDict(reward=torch.zeros(3)))


# ----------------------------------------------------------------------------- RewardClipping
def test_reward_clipping_needs_a_bound():
    with pytest.raises(ValueError, match="give clamp_min, clamp_max or both"):
        RewardClipping()


def test_reward_clipping_lone_specs_and_model():
    spec = RewardClipping(-1.0, 1.0).transform_reward_spec(Unbounded((1,)))
    assert isinstance(spec, Bounded) and spec.high.item() == 1.0
    model = nn.Sequential(RewardClipping(0.0, 0.5), nn.Identity())
    assert model(TensorDict(reward=torch.full((1,), 3.0)))["reward"].item() == 0.5
    composite = RewardClipping(0.0, 0.5).transform_reward_spec(Composite(reward=Unbounded(1)))
    assert isinstance(composite["reward"], Bounded)


# ---------------------------------------------------------------------------------- RewardSum
def test_reward_sum_hooks_without_an_env():
    batch = 4
    t = RewardSum()
    assert t.in_keys == ["reward"] and t.out_keys == ["episode_reward"]
    reward = torch.rand(batch, 1)
    td = TensorDict(
        {"done": torch.zeros(batch, 1, dtype=torch.bool), ("next", "reward"): reward},
        batch_size=[batch],
    )
    next_td = t._step(td, td["next"])
    assert (next_td["episode_reward"] == reward).all()
    td["episode_reward"] = next_td["episode_reward"]
    assert (t._step(td, td["next"].clone())["episode_reward"] == 2 * reward).all()
    td["_reset"] = torch.ones(batch, 1, dtype=torch.bool)
    with pytest.raises(TypeError, match=re.escape(NO_RESET_KEYS_ERROR)):
        t._reset(td, td.empty())
    t.reset_keys = ["_reset"]
    assert (t._reset(td, td.empty())["episode_reward"] == 0).all()
    td["_reset"] = torch.tensor([[True], [False], [True], [False]])
    kept = t._reset(td, td.empty())["episode_reward"].squeeze(-1)
    assert (kept == torch.tensor([0, 1, 0, 1]) * td["episode_reward"].squeeze(-1)).all()


@pytest.mark.parametrize("in_keys", [["reward"], ["reward_1", "reward_2"]])
@pytest.mark.parametrize("out_keys", [["episode_reward"], ["episode_reward_1", "episode_reward_2"]])
@pytest.mark.parametrize("reset_keys", [["_reset"], ["_reset1", "_reset2"]])
def test_reward_sum_key_lengths_must_match(in_keys, out_keys, reset_keys):
    batch = 10
    td = TensorDict(
        {
            **{key: torch.zeros(batch, dtype=torch.bool) for key in reset_keys},
            **{key: torch.randn(batch) for key in out_keys},
        },
        [],
    )
    if len(in_keys) != len(out_keys):
        with pytest.raises(ValueError, match="RewardSum expects the same number of input"):
            RewardSum(in_keys=in_keys, reset_keys=reset_keys, out_keys=out_keys)
        assert "RewardSum expects the same number" in KEY_COUNT_ERROR
        return
    t = RewardSum(in_keys=in_keys, reset_keys=reset_keys, out_keys=out_keys)
    if len(in_keys) != len(reset_keys):
        message = RESET_COUNT_ERROR.format(reset_keys=reset_keys, in_keys=in_keys)
        with pytest.raises(ValueError, match=re.escape(message)):
            t._reset(td, td.empty())
    else:
        out = t._reset(td, td.empty())
        for key in out_keys:
            assert (out[key] == td[key]).all()  # no reset flagged: the sums carry on


@pytest.mark.parametrize("in_key", ["reward", ("some", "nested")])
def test_reward_sum_on_stored_data_needs_a_time_dim(in_key):
    t = RewardSum(in_keys=[in_key], out_keys=[("some", "nested_sum")])
    td = TensorDict({("next", in_key): torch.ones(10)}, [])
    with pytest.raises(ValueError, match="At least one dimension of the tensordict"):
        t(td)
    td.batch_size = [10]
    td.names = ["time"]
    with pytest.raises(KeyError):
        t(td)
    t = RewardSum(in_keys=[("next", in_key)], out_keys=[("some", "nested_sum")])
    assert t(td)["some", "nested_sum"].tolist() == list(range(1, 11))


def test_reward_sum_in_a_model_sums_along_time():
    td = TensorDict(reward=torch.ones(2, 3, 1), batch_size=[2, 3], names=[None, "time"])
    out = nn.Sequential(Compose(RewardSum()), nn.Identity())(td)
    assert out["episode_reward"][1].squeeze(-1).tolist() == [1, 2, 3]


def test_reward_sum_can_register_the_sum_as_a_reward():
    env = TransformedEnv(CountEnv(), RewardSum(reward_spec=True))
    assert "episode_reward" in env.full_reward_spec.keys()
    assert "episode_reward" not in env.observation_spec.keys()
    check_env_specs(env)
    assert env.rollout(3)["next", "episode_reward"].squeeze(-1).tolist() == [1, 2, 3]


def test_reward_sum_tracks_several_rewards_with_their_own_reset_keys():
    class TwoRewards(CountEnv):
        def __init__(self):
            super().__init__(batch_size=(2,))
            self.full_reward_spec = Composite(
                reward=Unbounded((2, 1)), bonus=Unbounded((2, 1)), shape=(2,)
            )

        def _step(self, tensordict):
            out = super()._step(tensordict)
            out["bonus"] = 2 * out["reward"]
            return out

    env = TransformedEnv(TwoRewards(), RewardSum())
    assert env.transform.in_keys == ["reward", "bonus"]
    assert env.transform.reset_keys == ["_reset", "_reset"]
    check_env_specs(env)
    rollout = env.rollout(3)
    assert rollout["next", "episode_bonus"][0].squeeze(-1).tolist() == [2, 4, 6]
    td = rollout[..., -1]["next"].exclude("reward", "bonus")
    td["_reset"] = torch.tensor([[True], [False]])
    reset = env.reset(td)
    assert reset["episode_bonus"].squeeze(-1).tolist() == [0, 6]

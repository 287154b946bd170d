"""ObservationNorm alone, in a Compose, in nn.Sequential, inverted and in an env; init_stats."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv, DoubleEnv, PixelEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rlspecs import Bounded, Composite
from rltransforms import Compose, ObservationNorm, TransformedEnv
from rltransforms._normalization import (
    NORM_CAT_DIM_ERROR,
    NORM_MIXED_INIT_ERROR,
    NORM_NO_IN_KEYS_ERROR,
    NORM_NO_PARENT_ERROR,
    NORM_ORDER_ERROR,
    NORM_UNINITIALIZED_ERROR,
)

pytestmark = pytest.mark.filterwarnings("error")


class NoisyCountEnv(CountEnv):
    """CountEnv whose observations get noise, so that their spread is not zero."""

    def _step(self, tensordict):
        out = super()._step(tensordict)
        out["observation"] = out["observation"] + torch.randn_like(out["observation"])
        return out


@pytest.mark.parametrize("batch", [[], [1], [3, 2]])
@pytest.mark.parametrize("keys", [["next_observation", "some_other_key"], [("next", "pixels")]])
@pytest.mark.parametrize("nchannels", [1, 3])
@pytest.mark.parametrize("standard_normal", [True, False])
def test_observation_norm_without_env(batch, keys, nchannels, standard_normal):
    torch.manual_seed(0)
    td = TensorDict({key: torch.zeros(*batch, nchannels, 16, 16) for key in keys}, batch)
    td.set("dont touch", torch.randn(*batch, 1))
    loc, scale = torch.rand(nchannels, 1, 1) + 0.1, torch.rand(nchannels, 1, 1) + 0.5
    t = ObservationNorm(loc=loc, scale=scale, in_keys=keys, standard_normal=standard_normal)
    out = nn.Sequential(t, nn.Identity())(td.clone())
    expected = -loc / scale if standard_normal else loc
    for key in keys:
        torch.testing.assert_close(out[key], expected.expand_as(out[key]))
    spec = Bounded(0, 1, (nchannels, 16, 16))
    if len(keys) == 1:
        spec = t.transform_observation_spec(spec)
    else:
        spec = t.transform_observation_spec(Composite({key: spec for key in keys}))[keys[0]]
    low, high = (-loc / scale, (1 - loc) / scale) if standard_normal else (loc, scale + loc)
    torch.testing.assert_close(spec.low, low.expand(nchannels, 16, 16))
    torch.testing.assert_close(spec.high, high.expand(nchannels, 16, 16))


def test_observation_norm_inverse():
    t = ObservationNorm(loc=1.0, scale=2.0, in_keys=["obs"], in_keys_inv=["action"])
    td = TensorDict(obs=torch.ones(2), action=torch.full((1,), 5.0))
    assert t.inv(td)["action"].item() == 2.0 and td["action"].item() == 5.0
    assert Compose(t.clone())(td.clone())["obs"].tolist() == [3.0, 3.0]


def test_observation_norm_argument_errors():
    with pytest.raises(RuntimeError, match=re.escape(NORM_NO_IN_KEYS_ERROR)):
        ObservationNorm()
    with pytest.raises(ValueError, match=re.escape(NORM_MIXED_INIT_ERROR)):
        ObservationNorm(loc=1.0, in_keys=["obs"])
    t = ObservationNorm(in_keys=["next_observation", "next_pixels"])
    with pytest.raises(RuntimeError, match=re.escape(NORM_UNINITIALIZED_ERROR)):
        t._apply_transform(torch.Tensor([1]))
    assert ObservationNorm(loc=0.0, scale=0.0, in_keys=["a"]).scale.item() == pytest.approx(1e-6)


def test_observation_norm_init_stats_errors():
    t = ObservationNorm(in_keys=["next_observation"], loc=0, scale=1)
    with pytest.raises(ValueError, match="cat_dim must be part of or equal to reduce_dim"):
        t.init_stats(num_iter=11, reduce_dim=0, cat_dim=1)
    with pytest.raises(ValueError, match="cat_dim must be part of or equal to reduce_dim"):
        t.init_stats(num_iter=11, reduce_dim=[-1], cat_dim=-2)
    with pytest.raises(ValueError, match=re.escape(NORM_CAT_DIM_ERROR.format(reduce_dim=(3, 4)))):
        t.init_stats(num_iter=11, reduce_dim=(3, 4))
    with pytest.raises(RuntimeError, match="Loc/Scale are already initialized"):
        t.init_stats(num_iter=11)
    t = ObservationNorm(in_keys=["next_observation", "next_pixels"])
    with pytest.raises(RuntimeError, match="Transform has multiple in_keys but no specific key"):
        t.init_stats(num_iter=11)
    with pytest.raises(RuntimeError, match=re.escape(NORM_NO_PARENT_ERROR)):
        ObservationNorm(in_keys=["observation"]).init_stats(num_iter=11)


def test_observation_norm_init_stats_in_order_only():
    env = TransformedEnv(CountEnv())
    first, second = (
        ObservationNorm(in_keys=["observation"]),
        ObservationNorm(in_keys=["observation"]),
    )
    env.append_transform(first)
    env.append_transform(second)
    with pytest.raises(RuntimeError, match=NORM_ORDER_ERROR):
        second.init_stats(num_iter=10, key="observation")
    first.init_stats(num_iter=10)
    second.init_stats(num_iter=10)
    assert second.initialized


@pytest.mark.parametrize("standard_normal", [True, False])
def test_observation_norm_init_stats_standardises(standard_normal):
    torch.manual_seed(0)
    env = TransformedEnv(
        NoisyCountEnv(), ObservationNorm(in_keys=["observation"], standard_normal=standard_normal)
    )
    env.transform.init_stats(num_iter=50)
    assert env.transform.loc.shape == env.observation_spec["observation"].shape
    assert env.transform.loc.dtype == env.observation_spec["observation"].dtype
    check_env_specs(env)


def test_observation_norm_init_stats_batched_and_keep_dims():
    env = TransformedEnv(CountEnv(batch_size=(2,)), ObservationNorm(in_keys=["observation"]))
    env.transform.init_stats(num_iter=11, reduce_dim=(0, 1), cat_dim=1)
    assert env.transform.loc.shape == (3,)
    env = TransformedEnv(PixelEnv(), ObservationNorm(in_keys=["pixels", "other"]))
    with pytest.raises(ValueError, match="keep_dim elements must be part of reduce_dim"):
        env.transform.init_stats(
            num_iter=5, key="pixels", reduce_dim=(0, -2), cat_dim=0, keep_dims=(-1,)
        )
    env.transform.init_stats(
        num_iter=5, key="pixels", reduce_dim=(0, -3, -2), cat_dim=0, keep_dims=(-3, -2)
    )
    assert env.transform.loc.shape == (1, 1, 3)
    env = TransformedEnv(CountEnv(), ObservationNorm(in_keys=["nope"]))
    with pytest.raises(KeyError, match="nope.*is not in the parent env"):
        env.transform.init_stats(3)


def test_observation_norm_statistics_load_into_an_uninitialized_transform():
    trained = TransformedEnv(DoubleEnv(), ObservationNorm(loc=1.0, scale=2.0, in_keys=["obs_a"]))
    fresh = TransformedEnv(DoubleEnv(), ObservationNorm(in_keys=["obs_a"]))
    fresh.load_state_dict(trained.state_dict())
    assert fresh.transform.initialized and fresh.transform.loc.item() == 1.0

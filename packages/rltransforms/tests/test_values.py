"""Elementwise value maps alone, in a Compose, in nn.Sequential, inverted and in an env:
ClipTransform, SignTransform."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv, DoubleEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rlspecs import Bounded, Composite, Unbounded
from rltransforms import ClipTransform, Compose, SignTransform, TransformedEnv
from rltransforms._values import CLIP_NO_BOUND_ERROR, CLIP_SCALAR_ERROR

pytestmark = pytest.mark.filterwarnings("error")


# ------------------------------------------------------------------------------ ClipTransform
def test_clip_transform_checks_its_bounds():
    with pytest.raises(TypeError, match=re.escape(CLIP_NO_BOUND_ERROR)):
        ClipTransform(in_keys=["a"])
    with pytest.raises(TypeError, match=re.escape(CLIP_SCALAR_ERROR.split(" Got")[0])):
        ClipTransform(in_keys=["a"], low=torch.zeros(2))
    with pytest.raises(ValueError, match="`low` must be stricly lower than `high`"):
        ClipTransform(in_keys=["a"], low=1.0, high=0.0)


@pytest.mark.parametrize("low, high", [(-0.1, 0.1), (None, 0.1), (-0.1, None)])
def test_clip_transform_clips_outputs_and_bounds_their_specs(low, high):
    t = ClipTransform(in_keys=["obs", "reward"], low=low, high=high)
    td = TensorDict(obs=torch.tensor([-3.0, 0.0, 3.0]), reward=torch.tensor([5.0]))
    out = Compose(t)(td)
    lo, hi = (-float("inf") if low is None else low), (float("inf") if high is None else high)
    assert out["obs"].min() >= lo and out["obs"].max() <= hi
    spec = t.transform_observation_spec(Composite(obs=Unbounded(3)))["obs"]
    assert isinstance(spec, Bounded)
    if high is not None:
        assert spec.high.max().item() == pytest.approx(high)
    reward_spec = t.transform_reward_spec(Unbounded(1))
    assert isinstance(reward_spec, Bounded)


def test_clip_transform_inverse_clips_the_inputs_only():
    t = ClipTransform(in_keys_inv=["action"], low=-0.5, high=0.5)
    td = TensorDict(action=torch.tensor([2.0]))
    assert t.inv(td)["action"].item() == 0.5 and td["action"].item() == 2.0

    class Recorder(CountEnv):
        def _step(self, tensordict):
            self.received = tensordict["action"].clone()
            return super()._step(tensordict)

    base = Recorder()
    env = TransformedEnv(
        base, ClipTransform(in_keys=["observation"], in_keys_inv=["action"], low=-0.5, high=0.5)
    )
    check_env_specs(env)
    td = env.reset().set("action", torch.full((1,), 3.0))
    out = env.step(td)
    assert base.received.item() == 0.5 and out["action"].item() == 3.0
    assert out["next", "observation"].max() <= 0.5


def test_clip_transform_keeps_tighter_bounds_and_works_in_a_model():
    spec = ClipTransform(in_keys=["a"], low=-1.0, high=1.0).transform_observation_spec(
        Bounded(-0.5, 2.0, (2,))
    )
    assert spec.low.tolist() == [-0.5, -0.5] and spec.high.tolist() == [1.0, 1.0]
    model = nn.Sequential(ClipTransform(in_keys=["a"], low=0.0), nn.Identity())
    assert model(TensorDict(a=torch.tensor([-1.0])))["a"].item() == 0.0


# ------------------------------------------------------------------------------ SignTransform
def test_sign_transform_outputs_inputs_and_specs():
    t = SignTransform(in_keys=["obs"], out_keys=["obs_sign"], in_keys_inv=["action"])
    td = TensorDict(obs=torch.tensor([-3.0, 0.0, 2.0]), action=torch.tensor([-0.2]))
    out = t(td.clone())
    assert out["obs_sign"].tolist() == [-1.0, 0.0, 1.0] and "obs" in out.keys()
    assert t.inv(td)["action"].item() == -1.0
    spec = t.transform_observation_spec(Composite(obs=Unbounded(3)))
    assert isinstance(spec["obs_sign"], Bounded) and spec["obs_sign"].low.min() == -1
    env = TransformedEnv(DoubleEnv(), SignTransform(in_keys=["obs_a", "reward"]))
    check_env_specs(env)
    rollout = env.rollout(3)
    assert set(rollout["next", "obs_a"].unique().tolist()) <= {-1.0, 0.0, 1.0}
    assert isinstance(env.reward_spec, Bounded)
    assert nn.Sequential(SignTransform(in_keys=["x"]))(TensorDict(x=-torch.ones(1)))["x"] == -1

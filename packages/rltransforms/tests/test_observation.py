"""Observation layout transforms alone, in a Compose, in nn.Sequential, inverted and in an env:
CatTensors, FlattenObservation, UnsqueezeTransform, SqueezeTransform, PermuteTransform."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv, DoubleEnv, PixelEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rlspecs import Bounded, Composite, OneHot, Unbounded
from rltransforms import (
    CatTensors,
    Compose,
    FlattenObservation,
    PermuteTransform,
    SqueezeTransform,
    TransformedEnv,
    UnsqueezeTransform,
)
from rltransforms._observation import (
    CAT_LAZY_DIM_ERROR,
    CAT_NO_KEYS_ERROR,
    CAT_ONE_SPEC_ERROR,
    PERMUTE_DIMS_ERROR,
)

pytestmark = pytest.mark.filterwarnings("error")


# --------------------------------------------------------------------------------- CatTensors
@pytest.mark.parametrize(
    "keys", [["observation", ("some_other", "nested_key")], ["observation_pixels"]]
)
def test_cat_tensors_without_env(keys):
    t = CatTensors(in_keys=keys, out_key="observation_out", dim=-2)
    td = TensorDict(
        {key: torch.full((1, 4, 32), float(value)) for value, key in enumerate(keys)}, [1]
    )
    td.set("dont touch", torch.randn(1, 3, 3, dtype=torch.double))
    for call in (t, t._call):
        out = call(td.clone())
        assert out["observation_out"].shape[-2] == len(keys) * 4
        assert out["dont touch"].shape == (1, 3, 3)
        assert not any(key in out.keys(True) for key in keys)
    if len(keys) == 1:
        spec = t.transform_observation_spec(Bounded(0, 1, (1, 4, 32)))
        assert spec.shape == (1, 4, 32)
    else:
        spec = Composite({key: Bounded(0, 1, (1, 4, 32)) for key in keys})
        spec = t.transform_observation_spec(spec)
        assert spec["observation_out"].shape == (1, len(keys) * 4, 32)


def test_cat_tensors_one_leaf_spec_for_several_keys_is_an_error():
    t = CatTensors(["a", "b"], "ab")
    with pytest.raises(ValueError, match=re.escape(CAT_ONE_SPEC_ERROR.format(keys=["a", "b"]))):
        t.transform_observation_spec(Unbounded(3))


@pytest.mark.parametrize("append", [True, False])
def test_cat_tensors_without_in_keys_takes_every_vector_observation(append):
    t = CatTensors(out_key="observation_out", del_keys=False)
    if append:
        env = TransformedEnv(DoubleEnv())
        env.append_transform(t)
    else:
        env = TransformedEnv(DoubleEnv(), t)
    assert t.in_keys == ["obs_a", "obs_b"]
    assert env.observation_spec["observation_out"].shape == (5,)
    check_env_specs(env)
    assert "observation_out" in env.rollout(3).keys()


def test_cat_tensors_without_in_keys_needs_dim_minus_one_and_an_env():
    with pytest.raises(ValueError, match=re.escape(CAT_LAZY_DIM_ERROR.format(dim=-2))):
        CatTensors(dim=-2)
    with pytest.raises(RuntimeError, match=re.escape(CAT_NO_KEYS_ERROR)):
        CatTensors()(TensorDict(a=torch.zeros(2)))
    with pytest.raises(TypeError, match="CatTensors requires out_key to be of type NestedKey"):
        CatTensors(["a"], out_key=3)


@pytest.mark.parametrize("del_keys", [True, False])
@pytest.mark.parametrize("out_key", ["observation_out", ("some", "nested")])
def test_cat_tensors_in_a_model(del_keys, out_key):
    t = CatTensors(
        in_keys=[("some", "nested", "observation"), "observation"],
        out_key=out_key,
        del_keys=del_keys,
    )
    td = TensorDict(
        {("some", "nested", "observation"): torch.randn(3), "observation": torch.randn(3)}
    )
    out = nn.Sequential(t, nn.Identity())(td.clone())
    assert out[out_key].shape == (6,)
    assert (("observation" in out.keys()) is not del_keys) or out_key == "observation"


def test_cat_tensors_sorts_keys_unless_told_not_to():
    td = TensorDict(b=torch.zeros(1), a=torch.ones(1))
    assert CatTensors(["b", "a"], "ab")(td.clone())["ab"].tolist() == [1.0, 0.0]
    assert CatTensors(["b", "a"], "ba", sort=False)(td.clone())["ba"].tolist() == [0.0, 1.0]


def test_cat_tensors_unsqueezes_inputs_that_lack_the_dim():
    t = CatTensors(in_keys=["key1", "key2"], dim=-2, unsqueeze_if_oor=True)
    out = t(TensorDict(key1=torch.zeros(1), key2=torch.ones(1)))
    assert out["observation_vector"].shape == (2, 1)
    spec = t.transform_observation_spec(Composite(key1=Unbounded(1), key2=Unbounded(1)))
    assert spec["observation_vector"].shape == (2, 1)


def test_cat_tensors_in_compose_keeps_missing_keys_tolerant_on_reset():
    env = TransformedEnv(DoubleEnv(), Compose(CatTensors(["obs_a", "obs_b"], "obs")))
    assert env.reset()["obs"].shape == (5,)


# ------------------------------------------------------------------------- FlattenObservation
def test_flatten_observation_flattens_and_maps_the_spec():
    t = FlattenObservation(-3, -1, in_keys=["pixels"])
    td = TensorDict(pixels=torch.randn(2, 4, 5, 3), batch_size=[2])
    assert t(td.clone())["pixels"].shape == (2, 60)
    assert Compose(t.clone())(td.clone())["pixels"].shape == (2, 60)
    spec = t.transform_observation_spec(Bounded(0, 255, (4, 5, 3)))
    assert isinstance(spec, Bounded) and spec.shape == (60,)
    env = TransformedEnv(PixelEnv(), FlattenObservation(-3, -1))
    assert env.observation_spec["pixels"].shape == (60,)
    check_env_specs(env)


def test_flatten_observation_positive_dims_count_after_the_env_batch():
    with pytest.raises(ValueError, match="first_dim should be smaller than 0"):
        FlattenObservation(0, -1)
    t = FlattenObservation(0, 1, in_keys=["observation"], allow_positive_dim=True)
    env = TransformedEnv(CountEnv(batch_size=(2,)), UnsqueezeTransform(-1, in_keys=["observation"]))
    env.append_transform(t)
    assert t.first_dim == 1 and t.last_dim == 2
    assert env.observation_spec["observation"].shape == (2, 3)
    check_env_specs(env)


# ------------------------------------------------------------------ Unsqueeze / Squeeze
@pytest.mark.parametrize("batch", [[], [2], [2, 4]])
@pytest.mark.parametrize("unsqueeze_dim", [-1, -2, -4])
def test_unsqueeze_forward_and_spec(batch, unsqueeze_dim):
    t = UnsqueezeTransform(unsqueeze_dim, in_keys=["observation", ("nested", "key")])
    td = TensorDict(
        {
            "observation": torch.randn(*batch, 3, 16, 16),
            ("nested", "key"): torch.randn(*batch, 3, 16, 16),
        },
        batch,
    )
    out = t(td.clone())
    expected = list(td["observation"].shape)
    expected.insert(len(expected) + unsqueeze_dim + 1, 1)
    assert out["observation"].shape == torch.Size(expected)
    assert out["nested", "key"].shape == torch.Size(expected)
    spec = t.transform_observation_spec(Bounded(-1, 1, (3, 16, 16)))
    expected_spec = [3, 16, 16]
    expected_spec.insert(len(expected_spec) + unsqueeze_dim + 1, 1)
    assert spec.shape == torch.Size(expected_spec) and (spec.high == 1).all()


def test_unsqueeze_inverse_squeezes_inputs_for_the_base_env():
    t = UnsqueezeTransform(-1, in_keys_inv=["action"])
    td = TensorDict(action=torch.randn(2, 3, 1), batch_size=[2])
    out = t.inv(td)
    assert out["action"].shape == (2, 3) and td["action"].shape == (2, 3, 1)
    env = TransformedEnv(CountEnv(), UnsqueezeTransform(-1, in_keys_inv=["action"]))
    assert env.action_spec.shape == (1, 1)
    check_env_specs(env)
    input_spec = Composite(full_action_spec=Composite(action=Bounded(-1, 1, (4,))))
    assert t.transform_input_spec(input_spec)["full_action_spec", "action"].shape == (4, 1)


def test_unsqueeze_keeps_discrete_specs_discrete():
    spec = UnsqueezeTransform(-2, in_keys=["a"]).transform_observation_spec(OneHot(3))
    assert isinstance(spec, OneHot) and spec.shape == (1, 3)


def test_unsqueeze_positive_dims_need_permission_and_count_after_the_batch():
    with pytest.raises(ValueError, match="unsqueeze_dim should be smaller than 0"):
        UnsqueezeTransform(0)
    t = UnsqueezeTransform(0, allow_positive_dim=True, in_keys=["observation"])
    assert t.unsqueeze_dim == 0
    env = TransformedEnv(CountEnv(batch_size=(2,)), t)
    assert t.unsqueeze_dim == 1
    assert env.observation_spec["observation"].shape == (2, 1, 3)
    check_env_specs(env)


def test_squeeze_removes_a_singleton_dim_and_restores_it_on_the_way_in():
    t = SqueezeTransform(-1, in_keys=["obs"], in_keys_inv=["action"])
    assert t.squeeze_dim == -1
    out = t(TensorDict(obs=torch.zeros(2, 1)))
    assert out["obs"].shape == (2,)
    assert t.inv(TensorDict(action=torch.zeros(3)))["action"].shape == (3, 1)
    env = TransformedEnv(CountEnv(), SqueezeTransform(-1, in_keys=["reward"]))
    assert env.reward_spec.shape == ()
    check_env_specs(env)
    model = nn.Sequential(SqueezeTransform(-1, in_keys=["obs"]), nn.Identity())
    assert model(TensorDict(obs=torch.zeros(4, 1)))["obs"].shape == (4,)


# --------------------------------------------------------------------------- PermuteTransform
def test_permute_forward_inverse_and_spec():
    t = PermuteTransform((-1, -3, -2), in_keys=["pixels"], in_keys_inv=["pixels_in"])
    td = TensorDict(pixels=torch.randn(2, 4, 5, 3), pixels_in=torch.randn(2, 3, 4, 5))
    td.batch_size = [2]
    out = t(td.clone())
    assert out["pixels"].shape == (2, 3, 4, 5)
    assert torch.equal(out["pixels"], td["pixels"].permute(0, 3, 1, 2))
    back = t.inv(td)
    assert torch.equal(back["pixels_in"], td["pixels_in"].permute(0, 2, 3, 1))
    spec = t.transform_observation_spec(Bounded(0, 255, (4, 5, 3), dtype=torch.uint8))
    assert spec.shape == (3, 4, 5) and spec.dtype == torch.uint8
    env = TransformedEnv(PixelEnv(), PermuteTransform((-1, -3, -2), in_keys=["pixels"]))
    check_env_specs(env)
    assert env.rollout(2)["pixels"].shape == (2, 3, 4, 5)


def test_permute_inverse_specs_show_the_outside_layout():
    t = PermuteTransform((-1, -2), in_keys_inv=["action"])
    input_spec = Composite(full_action_spec=Composite(action=Bounded(-1, 1, (4, 2))))
    assert t.transform_input_spec(input_spec)["full_action_spec", "action"].shape == (2, 4)


def test_permute_rejects_leading_or_positive_dims():
    with pytest.raises(ValueError, match=re.escape(PERMUTE_DIMS_ERROR.format(n=2, dims=[0, 1]))):
        PermuteTransform((0, 1))

"""Dtype and device casts alone, in a Compose, in nn.Sequential, inverted and in an env:
DTypeCastTransform, DoubleToFloat, DeviceCastTransform."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv, DoubleEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rlspecs import Bounded, Composite
from rltransforms import (
    Compose,
    DeviceCastTransform,
    DoubleToFloat,
    DTypeCastTransform,
    TransformedEnv,
)
from rltransforms._casts import SPEC_DTYPE_ERROR

pytestmark = pytest.mark.filterwarnings("error")


# ------------------------------------------------------------------- DTypeCast / DoubleToFloat
@pytest.mark.parametrize(
    "keys", [["observation", ("some_other", "nested_key")], ["observation_pixels"], ["action"]]
)
@pytest.mark.parametrize("keys_inv", [["action", ("some_other", "nested_key")], ["action"], []])
def test_double_to_float_with_keys(keys, keys_inv):
    t = DoubleToFloat(in_keys=keys, in_keys_inv=keys_inv)
    keys_total = {*keys, *keys_inv}
    td = TensorDict({k: torch.zeros(1, 3, 3, dtype=torch.double) for k in keys_total}, [1])
    td.set("dont touch", torch.zeros(1, 3, 3, dtype=torch.double))
    t(td)
    for key in keys:
        assert td[key].dtype == torch.float
    assert td["dont touch"].dtype == torch.double
    td = td.apply(lambda x: x.float())
    modified = t.inv(td)
    for key in keys_inv:
        assert td[key].dtype == torch.float and modified[key].dtype == torch.double
    assert modified["dont touch"].dtype == torch.float
    if len(keys) == 1:
        spec = t.transform_observation_spec(Bounded(0, 1, (1, 3, 3), dtype=torch.double))
        assert spec.dtype == torch.float and spec.low.dtype == torch.float
    else:
        spec = Composite({k: Bounded(0, 1, (1, 3, 3), dtype=torch.double) for k in keys})
        spec = t.transform_observation_spec(spec)
        assert all(spec[k].dtype == torch.float for k in keys)


def test_double_to_float_without_keys_casts_every_double_entry():
    t = DoubleToFloat()
    td = TensorDict(
        a=torch.zeros(1, dtype=torch.double),
        b=TensorDict(c=torch.zeros(1, dtype=torch.double)),
        d=torch.zeros(1, dtype=torch.int64),
    )
    out = t(td)
    assert out["a"].dtype == out["b", "c"].dtype == torch.float32
    assert out["d"].dtype == torch.int64
    back = t.inv(out)
    assert back["a"].dtype == back["b", "c"].dtype == torch.float64
    assert nn.Sequential(Compose(DoubleToFloat()))(td.clone())["a"].dtype == torch.float32


def test_dtype_cast_refuses_out_keys_when_it_must_scan():
    t = DTypeCastTransform(torch.double, torch.float, out_keys=["x"])
    with pytest.raises(ValueError, match="out_keys cannot be passed then"):
        t(TensorDict(a=torch.zeros(1, dtype=torch.double)))


def test_dtype_cast_in_an_env_finds_its_keys_in_the_specs():
    env = TransformedEnv(DoubleEnv(), DTypeCastTransform(torch.double, torch.float))
    assert env.transform.in_keys == ["obs_a", "obs_b"]
    assert env.transform.in_keys_inv == ["action"]
    assert env.action_spec.dtype == torch.float32
    check_env_specs(env)
    assert env.base_env.last_action_dtype == torch.float64


def test_dtype_cast_given_in_keys_still_finds_the_inputs():
    env = TransformedEnv(DoubleEnv(), DoubleToFloat(in_keys=["obs_a"]))
    assert env.transform.in_keys_inv == ["action"]
    assert env.observation_spec["obs_b"].dtype == torch.float64
    check_env_specs(env)
    env = TransformedEnv(DoubleEnv(), DoubleToFloat(in_keys=["obs_a"], in_keys_inv=[]))
    assert env.action_spec.dtype == torch.float64


def test_dtype_cast_names_a_spec_of_the_wrong_dtype():
    message = SPEC_DTYPE_ERROR.format(
        cls="DoubleToFloat", key="obs", dtype=torch.float32, expected=torch.float64
    )
    with pytest.raises(TypeError, match=re.escape(message)):
        DoubleToFloat(in_keys=["obs"]).transform_observation_spec(
            Composite(obs=Bounded(0, 1, (1,)))
        )


def test_dtype_cast_to_other_dtypes_and_renamed_inputs():
    t = DTypeCastTransform(
        torch.float32, torch.float16, in_keys=["obs"], in_keys_inv=["action"], out_keys_inv=["a16"]
    )
    td = TensorDict(obs=torch.zeros(2), a16=torch.zeros(1, dtype=torch.float16))
    assert t(td.clone())["obs"].dtype == torch.float16
    assert t.inv(td)["action"].dtype == torch.float32
    input_spec = Composite(full_action_spec=Composite(action=Bounded(0, 1, (1,))))
    spec = t.transform_input_spec(input_spec)["full_action_spec"]
    assert "a16" in spec.keys() and "action" not in spec.keys()
    assert spec["a16"].dtype == torch.float16


# ------------------------------------------------------------------------ DeviceCastTransform
def test_device_cast_without_env():
    t = DeviceCastTransform("cpu:1", "cpu:0")
    td = TensorDict(a=torch.randn(()), device="cpu:0")
    assert t(td).device == torch.device("cpu:1")
    assert Compose(t.clone())(td).device == torch.device("cpu:1")
    assert nn.Sequential(Compose(t.clone()))(td).device == torch.device("cpu:1")
    assert t.inv(td.to("cpu:1")).device == torch.device("cpu:0")


def test_device_cast_moves_the_whole_env():
    env = TransformedEnv(CountEnv(device="cpu:0"), DeviceCastTransform("cpu:1"))
    assert env.device == torch.device("cpu:1")
    assert env.transform.device == torch.device("cpu:1")
    assert env.transform.orig_device == torch.device("cpu:0")
    assert env.observation_spec.device == torch.device("cpu:1")
    check_env_specs(env)
    assert env.rollout(3).device == torch.device("cpu:1")


def test_device_cast_of_some_keys_leaves_the_env_without_device():
    env = TransformedEnv(
        CountEnv(device="cpu:0"),
        DeviceCastTransform("meta", in_keys=["observation"], out_keys=["observation_meta"]),
    )
    assert env.device is None
    assert env.observation_spec["observation_meta"].device == torch.device("meta")
    assert env.observation_spec["observation"].device == torch.device("cpu:0")
    out = env.transform(TensorDict(observation=torch.zeros(3), device="cpu:0"))
    assert out["observation_meta"].device.type == "meta"
    assert out["observation"].device == torch.device("cpu")

"""Key-level transforms alone, in a Compose, in nn.Sequential, inverted and in an env:
ExcludeTransform, SelectTransform, RenameTransform, RemoveEmptySpecs."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv, EmptySpecsEnv, ManyKeysEnv, NestedDoneEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rltransforms import (
    Compose,
    ExcludeTransform,
    RemoveEmptySpecs,
    RenameTransform,
    SelectTransform,
    TransformedEnv,
)
from rltransforms._keys import RENAME_OVERLAP_ERROR

pytestmark = pytest.mark.filterwarnings("error")


def _abc():
    return TensorDict(a=torch.randn(1), b=torch.randn(1), c=torch.randn(1))


# --------------------------------------------------------------------------- ExcludeTransform
@pytest.mark.parametrize(
    "wrap",
    [lambda t: t, lambda t: Compose(t), lambda t: nn.Sequential(t, nn.Identity())],
    ids=["alone", "compose", "model"],
)
def test_exclude_transform_without_env(wrap):
    td = wrap(ExcludeTransform("a"))(_abc())
    assert "a" not in td.keys() and {"b", "c"} <= set(td.keys())


def test_exclude_transform_in_an_env():
    env = TransformedEnv(ManyKeysEnv(), ExcludeTransform("a"))
    check_env_specs(env)
    assert "a" not in env.reset().keys() and {"b", "c"} <= set(env.reset().keys())


@pytest.mark.parametrize("key, keys_attr", [("done", "done_keys"), ("reward", "reward_keys")])
def test_exclude_transform_can_drop_done_and_reward(key, keys_attr):
    env = TransformedEnv(ManyKeysEnv(), ExcludeTransform("a", key))
    assert key not in getattr(env, keys_attr)
    check_env_specs(env)
    env = TransformedEnv(ManyKeysEnv(), ExcludeTransform("a"))
    assert key in getattr(env, keys_attr)
    check_env_specs(env)


def test_exclude_transform_nested_keys():
    env = TransformedEnv(NestedDoneEnv(), ExcludeTransform())
    keys = env.rollout(1).keys(True, True)
    assert ("next", "data", "reward") in keys and ("data", "observation") in keys
    env = TransformedEnv(NestedDoneEnv(), ExcludeTransform(("data", "observation")))
    keys = env.rollout(1).keys(True, True)
    assert ("data", "observation") not in keys and ("next", "data", "observation") not in keys


def test_exclude_transform_unknown_key_and_inverse():
    with pytest.raises(KeyError, match="'zz' not found in the environment outputs"):
        TransformedEnv(ManyKeysEnv(), ExcludeTransform("zz"))
    with pytest.raises(TypeError, match="keys must be strings or tuples of strings"):
        ExcludeTransform(3)
    t = ExcludeTransform("a", inverse=True)
    assert "a" in t(_abc()).keys()
    td = _abc()
    assert "a" not in t.inv(td).keys() and "a" in td.keys()


# ---------------------------------------------------------------------------- SelectTransform
@pytest.mark.parametrize(
    "wrap",
    [lambda t: t, lambda t: Compose(t), lambda t: nn.Sequential(t, nn.Identity())],
    ids=["alone", "compose", "model"],
)
def test_select_transform_without_env(wrap):
    td = _abc().set("reward", torch.zeros(1)).set("done", torch.zeros(1, dtype=torch.bool))
    out = wrap(SelectTransform("b"))(td)
    assert set(out.keys()) == {"b", "reward", "done"}
    out = wrap(SelectTransform("b", keep_rewards=False, keep_dones=False))(td)
    assert set(out.keys()) == {"b"}


def test_select_transform_in_an_env():
    env = TransformedEnv(ManyKeysEnv(), SelectTransform("b", "c"))
    check_env_specs(env)
    assert set(env.observation_spec.keys()) == {"b", "c"}
    keys = set(env.rollout(2)["next"].keys())
    assert keys == {"b", "c", "reward", "done", "terminated"}


def test_select_transform_can_drop_rewards_and_dones():
    env = TransformedEnv(
        ManyKeysEnv(), SelectTransform("b", "done", keep_rewards=False, keep_dones=False)
    )
    assert env.reward_keys == [] or "reward" not in env.full_reward_spec.keys()
    assert set(env.full_done_spec.keys()) == {"done"}
    assert "reward" not in env.reset().keys()


# ---------------------------------------------------------------------------- RenameTransform
@pytest.mark.parametrize("create_copy", [True, False])
@pytest.mark.parametrize("mode", ["forward", "_call"])
def test_rename_transform_without_env(create_copy, mode):
    t = RenameTransform(["a"], ["b"], create_copy=create_copy)
    td = TensorDict(a=torch.randn(()))
    getattr(t, mode)(td)
    assert "b" in td.keys()
    assert ("a" in td.keys()) is create_copy


@pytest.mark.parametrize("create_copy", [True, False])
def test_rename_transform_inverse(create_copy):
    t = RenameTransform(["a"], ["b"], ["a"], ["b"], create_copy=create_copy)
    td = TensorDict(b=torch.randn(())).expand(3)
    out = t.inv(td)
    assert "a" in out.keys()
    assert ("b" in out.keys()) is create_copy


@pytest.mark.parametrize("create_copy", [True, False])
def test_rename_transform_in_an_env(create_copy):
    env = TransformedEnv(
        CountEnv(), RenameTransform(["observation"], ["stuff"], create_copy=create_copy)
    )
    check_env_specs(env)
    assert ("observation" in env.observation_spec.keys()) is create_copy
    env = TransformedEnv(
        CountEnv(),
        RenameTransform(["reward", "done"], ["r", "d"], ["action"], ["a"], create_copy=create_copy),
    )
    check_env_specs(env)
    assert "r" in env.full_reward_spec.keys() and "d" in env.full_done_spec.keys()
    assert "a" in env.full_action_spec.keys()


def test_rename_transform_checks_its_keys():
    with pytest.raises(ValueError, match=r"The number of in_keys \(1\) should match"):
        RenameTransform(["a"], ["b", "c"])
    with pytest.raises(ValueError, match=re.escape(RENAME_OVERLAP_ERROR.split(" Got")[0])):
        RenameTransform(["a", "b"], ["b", "c"])


# --------------------------------------------------------------------------- RemoveEmptySpecs
def test_remove_empty_specs_in_an_env_recreates_empty_inputs():
    base = EmptySpecsEnv()
    env = TransformedEnv(base, RemoveEmptySpecs())
    assert "other" not in env.observation_spec.keys()
    assert "other_reward" not in env.full_reward_spec.keys()
    assert "empty_action" not in env.full_action_spec.keys()
    check_env_specs(env)
    rollout = env.rollout(2)
    assert "other" not in rollout["next"].keys() and "other_reward" not in rollout["next"].keys()
    assert base.seen_empty_action


def test_remove_empty_specs_without_env():
    td = TensorDict(a=torch.zeros(1), b=TensorDict(c=TensorDict()), d=TensorDict(e=torch.zeros(1)))
    for t in (RemoveEmptySpecs(), Compose(RemoveEmptySpecs())):
        out = t(td.clone())
        assert set(out.keys(True)) == {"a", "d", ("d", "e")}

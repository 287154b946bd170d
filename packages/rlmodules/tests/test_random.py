"""RandomPolicy: actions sampled from the action spec."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlmodules import RandomPolicy
from rlspecs import Bounded, Categorical, Composite

pytestmark = pytest.mark.filterwarnings("error")


def test_random_policy_with_leaf_spec_writes_action_key():
    spec = Bounded(-1.0, 1.0, shape=(4, 3))
    policy = RandomPolicy(spec)
    td = policy(TensorDict(batch_size=[4]))
    assert td["action"].shape == (4, 3)
    assert spec.is_in(td["action"])
    assert policy.out_keys == ["action"]


def test_random_policy_with_custom_action_key():
    td = RandomPolicy(Categorical(5), action_key=("agent", "act"))(TensorDict())
    assert 0 <= td["agent", "act"] < 5


def test_random_policy_with_composite_writes_every_entry():
    spec = Composite(action=Bounded(0.0, 1.0, shape=(2,)), extra=Categorical(3, shape=(1,)))
    policy = RandomPolicy(spec)
    td = policy(TensorDict())
    assert spec.is_in(td.select("action", "extra"))
    assert set(policy.out_keys) == {"action", "extra"}


def test_random_policy_copies_spec():
    spec = Bounded(-1.0, 1.0, shape=(2,))
    policy = RandomPolicy(spec)
    assert policy.action_spec == spec
    assert policy.action_spec is not spec
    torch.manual_seed(0)
    a = policy(TensorDict())["action"]
    torch.manual_seed(0)
    torch.testing.assert_close(policy(TensorDict())["action"], a)

"""The policies and the count module: what they write, and their argument checks."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlmocks import (
    CountingEnv,
    CountingEnvCountModule,
    CountingEnvCountPolicy,
    DiscreteActionConvMockEnv,
    DiscreteActionConvPolicy,
    DiscreteActionVecMockEnv,
    DiscreteActionVecPolicy,
    HeterogeneousCountingEnv,
    HeterogeneousCountingEnvPolicy,
    MultiKeyCountingEnv,
    MultiKeyCountingEnvPolicy,
    NestedCountingEnv,
)
from rlmocks._policies import LEAF_SPEC_ERROR, NOT_COUNTING_ERROR


def test_count_policy_writes_ones_with_the_spec_dtype_and_batch():
    env = CountingEnv(batch_size=(4,))
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    assert policy.in_keys == [] and policy.out_keys == ["action"]
    td = TensorDict({}, [4])
    assert policy(td) is td
    assert td["action"].dtype == torch.int8
    assert (td["action"] == 1).all() and td["action"].shape == (4, 1)


def test_count_policy_writes_a_nested_key():
    env = NestedCountingEnv(batch_size=(2,))
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    td = policy(env.reset())
    assert td["data", "action"].shape == (2, 3, 1)


def test_count_policy_rejects_a_composite_spec():
    env = CountingEnv()
    message = LEAF_SPEC_ERROR.format(keys=["action"])
    with pytest.raises(TypeError, match=re.escape(message)):
        CountingEnvCountPolicy(env.full_action_spec)


def test_count_module_returns_ones():
    module = CountingEnvCountModule(CountingEnv(batch_size=(3,)).action_spec)
    out = module(torch.zeros(3))
    assert out.shape == (3, 1) and (out == 1).all()


@pytest.mark.parametrize("count", [True, False])
def test_heterogeneous_policy_writes_every_agent(count):
    env = HeterogeneousCountingEnv(batch_size=(2,))
    policy = HeterogeneousCountingEnvPolicy(env.full_action_spec, count=count)
    td = policy(env.reset())
    for i in range(3):
        assert (td["lazy"][..., i]["action"] == int(count)).all()


@pytest.mark.parametrize("batch_size", [(), (2,), (2, 1)])
@pytest.mark.parametrize("steps", [1, 5])
def test_heterogeneous_policy_rollout_counts_each_agent_tensor(batch_size, steps):
    from tensordict import dense_stack_tds

    env = HeterogeneousCountingEnv(batch_size=batch_size)
    policy = HeterogeneousCountingEnvPolicy(env.full_action_spec)
    td = dense_stack_tds(env.rollout(steps, policy, return_contiguous=False))
    for i in range(3):
        agent_obs = td["lazy"][(0,) * len(batch_size)][..., i][f"tensor_{i}"]
        for _ in range(i + 1):
            agent_obs = agent_obs.mean(-1)
        assert (agent_obs == torch.arange(steps)).all()


def test_multikey_policy_deterministic_applies_all_three_edits():
    env = MultiKeyCountingEnv(batch_size=(2,))
    policy = MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True)
    td = policy(TensorDict({}, [2]))
    assert (td["nested_1", "action"] == 1).all()
    assert (td["nested_2", "azione"] == 1).all()
    assert td["action"].tolist() == [[False, True], [False, True]]


def test_multikey_policy_not_counting_writes_zeros():
    env = MultiKeyCountingEnv()
    td = MultiKeyCountingEnvPolicy(env.full_action_spec, count=False, deterministic=True)(
        TensorDict({}, [])
    )
    assert not td["action"].any()
    assert (td["nested_1", "action"] == 0).all() and (td["nested_2", "azione"] == 0).all()


def test_multikey_policy_random_draws_one_scalar_per_call():
    env = MultiKeyCountingEnv(batch_size=(3,))
    policy = MultiKeyCountingEnvPolicy(env.full_action_spec)
    torch.manual_seed(0)
    choice = int(torch.randint(0, 3, ()))
    after = torch.rand(1)
    torch.manual_seed(0)
    td = policy(TensorDict({}, [3]))
    assert torch.rand(1) == after
    edits = [
        bool((td["nested_1", "action"] == 1).all()),
        bool((td["nested_2", "azione"] == 1).all()),
        bool(td["action"][..., 1].all()),
    ]
    assert edits == [i == choice for i in range(3)]


def test_multikey_policy_rejects_random_without_counting():
    with pytest.raises(ValueError, match=re.escape(NOT_COUNTING_ERROR)):
        MultiKeyCountingEnvPolicy(MultiKeyCountingEnv().full_action_spec, count=False)


def test_vec_policy_points_past_the_maximum():
    env = DiscreteActionVecMockEnv()
    td = DiscreteActionVecPolicy()(env.reset())
    # all entries equal: the last maximum is index 6, so the action wraps to 0
    assert td["action"].tolist() == [1, 0, 0, 0, 0, 0, 0]
    env.step(td)


def test_conv_policy_reads_the_diagonal():
    env = DiscreteActionConvMockEnv()
    td = env.reset()
    td["pixels"][0, 3, 3] = 100.0
    assert DiscreteActionConvPolicy()(td)["action"].argmax().item() == 4

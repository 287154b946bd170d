"""HeterogeneousCountingEnv: consolidated lazy stacks, counts shared by agents, resets."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict, dense_stack_tds

from rlmocks import HeterogeneousCountingEnv, HeterogeneousCountingEnvPolicy
from rlmocks._heterogeneous import AGENT_INDEX_ERROR

BATCHES = [(), (2,), (2, 1)]


def test_every_agent_has_every_observation_key():
    spec = HeterogeneousCountingEnv().observation_spec["lazy"]
    expected = {"camera", "lidar", "vector", "tensor_0", "tensor_1", "tensor_2"}
    for i in range(3):
        assert set(spec[i].keys()) == expected
    assert spec[2]["lidar"].shape == (0,)
    assert spec[0]["tensor_1"].shape == (0, 0)
    assert spec[2]["tensor_2"].shape == (1, 2, 3)
    assert spec[1]["vector"].shape == (2,)


def test_action_specs_differ_per_agent():
    spec = HeterogeneousCountingEnv(batch_size=(2,)).full_action_spec["lazy"]
    assert spec.shape == (2, 3)
    assert spec[:, 0]["action"].shape == (2, 3)
    assert spec[:, 1]["action"].shape == (2, 2)


def test_done_is_nested_under_lazy_only():
    env = HeterogeneousCountingEnv()
    assert set(env.done_keys) == {("lazy", "done"), ("lazy", "terminated")}
    assert env.reset_keys == [("lazy", "_reset")]


@pytest.mark.parametrize("i", [-1, 3])
def test_agent_spec_getters_reject_unknown_agents(i):
    env = HeterogeneousCountingEnv()
    message = AGENT_INDEX_ERROR.format(index=i)
    with pytest.raises(ValueError, match=re.escape(message)):
        env.get_agent_obs_spec(i)
    with pytest.raises(ValueError, match=re.escape(message)):
        env.get_agent_action_spec(i)


@pytest.mark.parametrize("batch_size", [(), (32,), (1, 2)])
def test_rand_steps_count_for_every_agent(batch_size):
    env = HeterogeneousCountingEnv(batch_size=batch_size)
    td = env.reset()
    assert (td["lazy"][..., 0]["tensor_0"] == 0).all()
    assert not any("_reset" in str(key) for key in td.keys(True))
    td = env.rand_step()
    assert (td["next", "lazy"][..., 0]["tensor_0"] == 1).all()
    td = env.rand_step()
    assert (td["next", "lazy"][..., 1]["tensor_1"] == 2).all()
    assert (td["next", "state"] == 2).all()
    assert (td["next", "lazy", "reward"] == 0).all()


@pytest.mark.parametrize("batch_size", BATCHES)
@pytest.mark.parametrize("steps", [1, 5])
def test_rollout_keeps_a_lazy_stack_along_the_agent_dim(batch_size, steps):
    env = HeterogeneousCountingEnv(batch_size=batch_size)
    td = dense_stack_tds(env.rollout(steps, return_contiguous=False))
    assert isinstance(td, TensorDict)
    assert isinstance(td["lazy"], LazyStackedTensorDict)
    assert td["lazy"].shape == (*batch_size, steps, 3)
    assert td["lazy"].stack_dim == len(td["lazy"].batch_size) - 1
    assert (td[..., -1]["next", "lazy", "camera"] == steps).all()
    tensor_0 = td["lazy"][(0,) * len(batch_size)][..., 0]["tensor_0"].squeeze(-1)
    assert (tensor_0 == torch.arange(steps)).all()


def test_done_flips_after_max_steps_plus_one_counting_steps():
    env = HeterogeneousCountingEnv(max_steps=2)
    policy = HeterogeneousCountingEnvPolicy(env.full_action_spec)
    td = env.rollout(10, policy, return_contiguous=False)
    assert td.shape == (3,)
    assert td["next", "lazy", "done"].squeeze(-1).all(-1).tolist() == [False, False, True]


def test_zero_actions_leave_the_count():
    env = HeterogeneousCountingEnv()
    policy = HeterogeneousCountingEnvPolicy(env.full_action_spec, count=False)
    td = env.rollout(3, policy, return_contiguous=False)
    assert (td["next", "state"] == 0).all()


def test_partial_reset_uses_any_agent_of_the_nested_reset():
    env = HeterogeneousCountingEnv(batch_size=(2,))
    env.reset()
    td = env.rand_step()["next"]
    reset = torch.zeros(2, 3, 1, dtype=torch.bool)
    reset[0, 1] = True
    td["lazy", "_reset"] = reset
    out = env.reset(td)
    assert env.count.squeeze(-1).tolist() == [0, 1]
    # the framework merges the reset output only where the mask is True
    assert out["lazy"][0, 1]["tensor_1"].flatten().tolist() == [0.0, 0.0]
    assert out["lazy"][1, 1]["tensor_1"].flatten().tolist() == [1.0, 1.0]
    assert not out["lazy", "done"].any()


def test_set_seed_reseeds_torch():
    env = HeterogeneousCountingEnv()
    env.set_seed(7)
    first = env.rand_action()["lazy"][0]["action"]
    env.set_seed(7)
    assert (env.rand_action()["lazy"][0]["action"] == first).all()

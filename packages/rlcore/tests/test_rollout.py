"""EnvBase.rollout: shapes, stopping, auto-reset, policies, callbacks, gradients, lazy stacks."""

from __future__ import annotations

import re

import pytest
import torch
from _rlcore_envs import (
    CountingEnv,
    DifferentiableEnv,
    HeterogeneousEnv,
    NestedCountingEnv,
    UnlockedEnv,
)
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict.nn import TensorDictModule
from torch import nn

from rlcore import step_mdp
from rlcore._rollout import BAD_MAX_STEPS, NO_TENSORDICT


def count_policy(td: TensorDictBase) -> TensorDictBase:
    td["action"] = torch.ones(*td.batch_size, 1, dtype=torch.int8)
    return td


@pytest.mark.parametrize("batch_size", [(), (2,), (3, 2)])
def test_rollout_shape_and_time_dim(batch_size):
    env = CountingEnv(max_steps=100, batch_size=batch_size)
    out = env.rollout(4, count_policy)
    assert out.batch_size == (*batch_size, 4)
    assert out.names[-1] == "time"
    assert out["next"].names[-1] == "time"
    obs = out["next", "observation"].reshape(-1, 4)
    assert (obs == torch.arange(1, 5, dtype=torch.int32)).all()
    assert (out["observation"][..., 1:, :] == out["next", "observation"][..., :-1, :]).all()


def test_rollout_stops_at_first_done():
    env = CountingEnv(max_steps=2)
    out = env.rollout(10, count_policy)
    assert out.batch_size == (3,)
    assert out["next", "done"].squeeze(-1).tolist() == [False, False, True]


def test_rollout_without_break_resets_done_sub_envs():
    env = CountingEnv(max_steps=1, batch_size=(2,))
    out = env.rollout(6, count_policy, break_when_any_done=False)
    assert out.batch_size == (2, 6)
    assert out["observation"][0].squeeze(-1).tolist() == [0, 1] * 3
    assert out["next", "observation"][0].squeeze(-1).tolist() == [1, 2] * 3
    assert out["next", "done"][0].squeeze(-1).tolist() == [False, True] * 3


def test_rollout_partial_auto_reset_only_touches_done_entries():
    env = CountingEnv(max_steps=1, batch_size=(2,))

    def policy(td):
        td["action"] = torch.tensor([[1], [0]], dtype=torch.int8)
        return td

    out = env.rollout(5, policy, break_when_any_done=False)
    assert out["observation"][0].squeeze(-1).tolist() == [0, 1, 0, 1, 0]
    assert out["observation"][1].squeeze(-1).tolist() == [0] * 5


def test_rollout_chaining_without_auto_reset():
    env = CountingEnv(max_steps=1, batch_size=(4,))
    root = env.reset()
    for _ in range(3):
        out = env.rollout(
            2, count_policy, auto_reset=False, break_when_any_done=False, tensordict=root
        )
        assert (env.count == 2).all()
        root = step_mdp(out[..., -1], exclude_action=False)


def test_rollout_without_auto_reset_needs_tensordict():
    with pytest.raises(RuntimeError, match=re.escape(NO_TENSORDICT)):
        CountingEnv().rollout(2, auto_reset=False)


@pytest.mark.parametrize("max_steps", [0, -1, 1.5])
def test_rollout_rejects_bad_max_steps(max_steps):
    with pytest.raises(ValueError, match=re.escape(BAD_MAX_STEPS.format(max_steps=max_steps))):
        CountingEnv().rollout(max_steps)


def test_rollout_default_policy_samples_the_action_spec():
    torch.manual_seed(0)
    out = CountingEnv(max_steps=100, batch_size=(8,)).rollout(5)
    assert out["action"].dtype == torch.int8
    assert set(out["action"].unique().tolist()) <= {0, 1}


def test_rollout_with_tensordict_module_policy():
    env = UnlockedEnv()
    policy = TensorDictModule(nn.Linear(1, 1), in_keys=["observation"], out_keys=["action"])
    out = env.rollout(3, policy)
    assert out["action"].shape == (3, 1)
    assert out["action"].requires_grad


def test_rollout_with_tensor_module_policy():
    env = UnlockedEnv()
    policy = nn.Sequential(nn.Linear(1, 4), nn.Linear(4, 1))
    out = env.rollout(3, policy)
    expected = policy(out["observation"])
    torch.testing.assert_close(out["action"], expected)


def test_rollout_with_module_taking_a_tensordict():
    class TDModule(nn.Module):
        def forward(self, tensordict):
            return count_policy(tensordict)

    assert (CountingEnv().rollout(2, TDModule())["action"] == 1).all()


def test_rollout_with_policy_returning_a_new_tensordict():
    def policy(td):
        return TensorDict({"action": torch.ones(1, dtype=torch.int8)}, [])

    assert (CountingEnv().rollout(3, policy)["action"] == 1).all()


def test_rollout_callback_sees_every_transition():
    seen = []
    CountingEnv(max_steps=100).rollout(
        4, count_policy, lambda env, td: seen.append(td["next", "observation"].item())
    )
    assert seen == [1, 2, 3, 4]


def test_rollout_keeps_policy_extras_across_steps():
    def policy(td):
        hidden = td.get("hidden", torch.zeros(1))
        td["hidden"] = hidden + 1
        return count_policy(td)

    out = CountingEnv(max_steps=100).rollout(3, policy)
    assert out["hidden"].squeeze(-1).tolist() == [1, 2, 3]


def test_rollout_nested_env_keeps_sub_batch_dims():
    env = NestedCountingEnv(batch_size=(4,), nested_dim=5)
    out = env.rollout(3)
    assert out["data"].batch_size == (4, 3, 5)
    assert out["next", "data"].batch_size == (4, 3, 5)


def test_rollout_heterogeneous_returns_lazy_stacks():
    env = HeterogeneousEnv(batch_size=(2,))
    out = env.rollout(3, return_contiguous=False)
    assert out.batch_size == (2, 3)
    agents = out["next", "agents"]
    assert isinstance(agents, LazyStackedTensorDict)
    assert agents.batch_size == (2, 3, 2)
    assert (agents[..., 1]["vector"][:, -1] == 3).all()
    assert out.names[-1] == "time"


def test_rollout_falls_back_to_lazy_stacking_when_keys_change():
    def policy(td):
        count_policy(td)
        if td["observation"].item() == 1:
            td["once"] = torch.zeros(1)
        return td

    env = CountingEnv(max_steps=100)
    out = env.rollout(3, policy, return_contiguous=False)
    assert isinstance(out, LazyStackedTensorDict)
    assert "once" in out[1].keys() and "once" not in out[0].keys()
    with pytest.raises(RuntimeError):
        env.rollout(3, policy)


def test_rollout_falls_back_when_shapes_change():
    def policy(td):
        count_policy(td)
        td["growing"] = torch.zeros(int(td["observation"].item()) + 1)
        return td

    out = CountingEnv(max_steps=100).rollout(3, policy, return_contiguous=False)
    assert isinstance(out, LazyStackedTensorDict)
    assert out[2]["growing"].shape == (3,)


def test_rollout_backprop_through_steps():
    torch.manual_seed(0)
    policy = TensorDictModule(nn.Linear(3, 3), in_keys=["observation"], out_keys=["action"])
    env = DifferentiableEnv()
    out = env.rollout(5, policy)
    grads = torch.autograd.grad(out["next", "reward"].sum(), list(policy.parameters()))
    assert all(g.abs().sum() > 0 for g in grads)


def test_rollout_type_checks_run_on_first_step_only():
    env = CountingEnv(max_steps=100, run_type_checks=True)
    calls = []
    original = env._type_check

    def spy(next_td):
        calls.append(1)
        original(next_td)

    env.__dict__["_type_check"] = spy
    env.rollout(5)
    assert len(calls) == 1
    assert env.run_type_checks


def test_rollout_auto_cast_to_device_on_same_device():
    policy = TensorDictModule(nn.Linear(1, 1), in_keys=["observation"], out_keys=["action"])
    out = UnlockedEnv(device="cpu").rollout(3, policy, auto_cast_to_device=True)
    assert out["action"].device == torch.device("cpu")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_rollout_auto_cast_to_device_moves_data_to_the_policy():
    env = UnlockedEnv(device="cpu")
    policy = TensorDictModule(
        nn.Linear(1, 1, device="cuda"), in_keys=["observation"], out_keys=["action"]
    )
    with pytest.raises(RuntimeError):
        env.rollout(3, policy)
    out = env.rollout(3, policy, auto_cast_to_device=True)
    assert out["action"].device == torch.device("cpu")


def test_rollout_unlocked_env_with_leading_dims():
    env = UnlockedEnv()
    out = env.rollout(3, tensordict=TensorDict({}, [5]))
    assert out.batch_size == (5, 3)


def test_rollout_heterogeneous_auto_reset_merges_lazy_levels():
    env = HeterogeneousEnv(max_steps=1, batch_size=(2,))
    out = env.rollout(5, break_when_any_done=False, return_contiguous=False)
    vector = out["agents"][..., 0]["vector"][0, :, 0]
    assert vector.tolist() == [0.0, 1.0, 0.0, 1.0, 0.0]


def test_rollout_nested_auto_reset():
    env = NestedCountingEnv(max_steps=1, batch_size=(2,))

    def policy(td):
        td["data", "action"] = torch.ones(2, 3, 1, dtype=torch.int8)
        return td

    out = env.rollout(5, policy, break_when_any_done=False)
    assert out["data", "states"][0, :, 0, 0].tolist() == [0, 1, 0, 1, 0]
    assert not out["data", "done"].any()
    assert out["next", "data", "done"][0, :, 0, 0].tolist() == [False, True] * 2 + [False]


def test_rollout_with_non_tensor_entries():
    def policy(td):
        td.set_non_tensor("note", f"step {int(td['observation'])}")
        return count_policy(td)

    out = CountingEnv(max_steps=100).rollout(3, policy)
    assert [out[i].get_non_tensor("note") for i in range(3)] == ["step 0", "step 1", "step 2"]


def test_rollout_tensor_policy_with_several_outputs():
    class TwoHeads(nn.Module):
        def forward(self, observation):
            return torch.ones(*observation.shape[:-1], 1, dtype=torch.int8), observation * 2

    env = CountingEnv(max_steps=100)
    env.full_action_spec = env.full_action_spec.clone().set(
        "scale", env.full_observation_spec["observation"].clone()
    )
    out = env.rollout(2, TwoHeads())
    assert (out["action"] == 1).all()
    assert (out["scale"] == 2 * out["observation"]).all()


def test_rollout_default_policy_on_a_lazy_root():
    out = HeterogeneousEnv(batch_size=(2,)).rollout(2, return_contiguous=False)
    assert out["agents"][..., 1]["action"].shape == (2, 2, 3)

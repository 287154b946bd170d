"""MultiKeyCountingEnv: three counters with their own action, reward and done."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlmocks import MultiKeyCountingEnv, MultiKeyCountingEnvPolicy
from rlmocks.testing import check_rollout_consistency_multikey_env


def test_specs_follow_the_table():
    env = MultiKeyCountingEnv(batch_size=(2,))
    assert env.observation_spec["nested_1", "observation"].shape == (2, 3, 3)
    assert env.observation_spec["nested_2", "observation"].shape == (2, 2, 2)
    assert env.observation_spec["observation"].shape == (2, 10, 10, 3)
    assert env.full_action_spec["nested_1", "action"].dtype == torch.int64
    assert env.full_action_spec["nested_2", "azione"].shape == (2, 2, 1)
    assert env.full_action_spec["action"].dtype == torch.bool
    assert env.full_reward_spec["nested_1", "gift"].shape == (2, 3, 1)
    assert env.full_done_spec["nested_2", "done"].shape == (2, 2, 1)
    assert env.unbatched_observation_spec["observation"].shape == (10, 10, 3)


def _action(nested_1, azione, root):
    return TensorDict(
        {
            "nested_1": TensorDict({"action": torch.tensor(nested_1)}, [3]),
            "nested_2": TensorDict({"azione": torch.tensor(azione).unsqueeze(-1)}, [2]),
            "action": torch.tensor(root),
        },
        [],
    )


def test_step_counts_each_group_separately():
    env = MultiKeyCountingEnv(max_steps=1)
    env.reset()
    out = env.step(_action([1, 0, 1], [0.0, 2.5], [False, True]))["next"]
    assert out["observation"].unique().tolist() == [1.0]
    assert out["reward"].tolist() == [1.0]
    assert out["nested_1", "observation"][:, 0].tolist() == [1.0, 0.0, 1.0]
    assert out["nested_1", "gift"].squeeze(-1).tolist() == [1.0, 0.0, 1.0]
    assert out["nested_2", "observation"][:, 0].tolist() == [0.0, 1.0]
    assert out["nested_2", "reward"].squeeze(-1).tolist() == [0.0, 2.5]
    assert not out["done"].any()
    out = env.step(out.update(_action([1, 0, 0], [0.0, 1.0], [True, False])))["next"]
    assert out["reward"].tolist() == [0.0]
    assert out["nested_1", "done"].squeeze(-1).tolist() == [True, False, False]
    assert out["nested_2", "done"].squeeze(-1).tolist() == [False, True]
    assert out["nested_2", "terminated"].squeeze(-1).tolist() == [False, True]
    assert not out["done"].any()


def test_root_partial_reset_resets_every_counter_of_the_masked_elements():
    env = MultiKeyCountingEnv(batch_size=(2,))
    policy = MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True)
    env.rollout(2, policy)
    out = env.reset(TensorDict({"_reset": torch.tensor([[True], [False]])}, [2]))
    assert out["observation"][:, 0, 0, 0].tolist() == [0.0, 2.0]
    assert out["nested_1", "observation"][:, :, 0].tolist() == [[0.0] * 3, [2.0] * 3]
    assert out["nested_2", "observation"][:, :, 0].tolist() == [[0.0] * 2, [2.0] * 2]


def test_start_val_initialises_every_counter():
    env = MultiKeyCountingEnv(start_val=2)
    assert env.count.item() == 2
    assert (env.count_nested_1 == 2).all() and (env.count_nested_2 == 2).all()
    assert (env.reset()["nested_2", "observation"] == 2).all()


def test_env_draws_nothing_from_the_global_rng():
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    env = MultiKeyCountingEnv(batch_size=(2,))
    env.rollout(3, MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True))
    assert (torch.rand(3) == expected).all()


@pytest.mark.parametrize("batch_size", [(), (2,), (2, 1)])
@pytest.mark.parametrize("max_steps", [2, 5])
def test_deterministic_rollout_is_consistent(batch_size, max_steps):
    env = MultiKeyCountingEnv(batch_size=batch_size, max_steps=max_steps)
    policy = MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True)
    td = env.rollout(5, policy)
    assert td["next", "done"][..., -1, :].all() == (max_steps < 5)
    check_rollout_consistency_multikey_env(td, max_steps=max_steps)


@pytest.mark.parametrize("batch_size", [(), (2,), (2, 1)])
def test_random_rollout_is_consistent(batch_size):
    torch.manual_seed(0)
    env = MultiKeyCountingEnv(batch_size=batch_size, max_steps=5)
    td = env.rollout(5, MultiKeyCountingEnvPolicy(env.full_action_spec))
    check_rollout_consistency_multikey_env(td, max_steps=5)


def test_set_seed_reseeds_torch():
    env = MultiKeyCountingEnv()
    env.set_seed(7)
    first = torch.rand(3)
    env.set_seed(7)
    assert (torch.rand(3) == first).all()

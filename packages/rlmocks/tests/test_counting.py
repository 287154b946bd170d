"""CountingEnv, IncrementingEnv and CountingBatchedEnv: counts, the step where done flips, resets."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlcore import step_mdp
from rlmocks import CountingBatchedEnv, CountingEnv, CountingEnvCountPolicy, IncrementingEnv
from rlmocks._counting import MAX_STEPS_SHAPE_ERROR, START_VAL_SHAPE_ERROR

BATCHES = [(), (1,), (2,), (4,), (32, 5)]


def _ones(env):
    return TensorDict(
        {"action": torch.ones((*env.batch_size, 1), dtype=torch.int8)}, batch_size=env.batch_size
    )


def test_counting_env_specs_have_the_documented_dtypes():
    env = CountingEnv(batch_size=(3,))
    assert env.observation_spec["observation"].dtype == torch.int32
    assert env.observation_spec["observation"].shape == (3, 1)
    assert env.action_spec.dtype == torch.int8
    assert env.action_spec.shape == (3, 1)
    assert env.reward_spec.dtype == torch.float32
    assert set(env.done_keys) == {"done", "terminated"}
    assert list(env.full_state_spec.keys()) == []


def test_counting_env_count_is_zero_before_first_reset_even_with_start_val():
    env = CountingEnv(start_val=3, batch_size=(2,))
    assert (env.count == 0).all()
    assert env.count.dtype == torch.int32
    assert (env.reset()["observation"] == 3).all()


@pytest.mark.parametrize("batch_size", BATCHES)
def test_counting_env_done_flips_on_step_max_steps_plus_one(batch_size, max_steps=3):
    env = CountingEnv(max_steps=max_steps, batch_size=batch_size)
    for i in range(max_steps):
        td = env.step(_ones(env))
        assert not td["next", "done"].any()
        assert (td["next", "observation"] == i + 1).all()
        assert (td["next", "reward"] == 0).all()
    td = env.step(_ones(env))
    assert td["next", "done"].all() and td["next", "terminated"].all()
    assert (td["next", "observation"] == max_steps + 1).all()


def test_counting_env_zero_action_keeps_the_count():
    env = CountingEnv()
    env.reset()
    td = env.step(TensorDict({"action": torch.zeros(1, dtype=torch.int8)}, []))
    assert td["next", "observation"].item() == 0


def test_counting_env_partial_reset_only_touches_masked_entries():
    env = CountingEnv(max_steps=1, start_val=0, batch_size=(4,))
    env.reset()
    for _ in range(2):
        env.step(_ones(env))
    mask = torch.tensor([True, False, True, False]).unsqueeze(-1)
    td = env.reset(TensorDict({"_reset": mask}, batch_size=(4,)))
    assert td["observation"].squeeze(-1).tolist() == [0, 2, 0, 2]
    assert td["done"].squeeze(-1).tolist() == [False, True, False, True]


def test_counting_env_seed_reseeds_torch():
    env = CountingEnv()
    env.set_seed(3)
    first = torch.rand(2)
    env.set_seed(3)
    assert (torch.rand(2) == first).all()


@pytest.mark.parametrize("max_steps", [1, 5])
def test_counting_env_chained_rollouts_reset_the_done_entries(max_steps):
    env = CountingEnv(max_steps=max_steps - 1, batch_size=(4,))
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    input_td = env.reset()
    for _ in range(3):
        rollout = env.rollout(
            max_steps, policy, auto_reset=False, break_when_any_done=False, tensordict=input_td
        )
        assert (env.count == max_steps).all()
        input_td = step_mdp(rollout[..., -1], keep_other=True, exclude_action=False)


def test_counting_env_count_moves_with_to():
    env = CountingEnv(batch_size=(2,))
    assert "count" in dict(env.named_buffers())


def test_incrementing_env_ignores_the_action():
    env = IncrementingEnv(max_steps=2)
    env.reset()
    td = env.step(TensorDict({"action": torch.zeros(1, dtype=torch.int8)}, []))
    assert td["next", "observation"].item() == 1
    rollout = env.rollout(10)
    assert rollout["next", "observation"].squeeze(-1).tolist() == [1, 2, 3]


def test_counting_batched_env_each_element_has_its_own_limit():
    env = CountingBatchedEnv(max_steps=torch.tensor([0, 1, 2]), batch_size=(3,))
    env.reset()
    dones = [env.step(_ones(env))["next", "done"].squeeze(-1).tolist() for _ in range(3)]
    assert dones == [
        [True, False, False],
        [True, True, False],
        [True, True, True],
    ]


def test_counting_batched_env_resets_to_per_element_start_val():
    env = CountingBatchedEnv(
        max_steps=torch.tensor([5, 5]), start_val=torch.tensor([1, 3]), batch_size=(2,)
    )
    assert env.reset()["observation"].squeeze(-1).tolist() == [1, 3]
    env.step(_ones(env))
    td = env.reset(TensorDict({"_reset": torch.tensor([[False], [True]])}, batch_size=(2,)))
    assert td["observation"].squeeze(-1).tolist() == [2, 3]


def test_counting_batched_env_broadcasts_a_scalar_start_val():
    env = CountingBatchedEnv(
        max_steps=torch.tensor([5, 5]), start_val=torch.tensor(2), batch_size=(2,)
    )
    assert env.reset()["observation"].squeeze(-1).tolist() == [2, 2]


def test_counting_batched_env_rejects_max_steps_of_the_wrong_shape():
    with pytest.raises(RuntimeError, match=re.escape(MAX_STEPS_SHAPE_ERROR)):
        CountingBatchedEnv(max_steps=torch.tensor([1, 2]), batch_size=(3,))


def test_counting_batched_env_rejects_start_val_of_the_wrong_size():
    message = START_VAL_SHAPE_ERROR.format(batch_size=torch.Size([3]), shape=torch.Size([2]))
    with pytest.raises(ValueError, match=re.escape(message)):
        CountingBatchedEnv(
            max_steps=torch.tensor([1, 2, 3]), start_val=torch.tensor([1, 2]), batch_size=(3,)
        )


def test_counting_env_rejects_a_tensordict_of_the_wrong_batch():
    env = CountingEnv(batch_size=(2,))
    td = TensorDict({"action": torch.ones(3, 1, dtype=torch.int8)}, batch_size=(3,))
    with pytest.raises(
        RuntimeError, match=re.escape("Expected a tensordict with shape==env.batch_size")
    ):
        env.step(td)


def _float64_reward(env):
    env.reward_spec = env.reward_spec.to(torch.float64)
    return env.rand_step(env.reset())["next", "reward"].dtype


def test_counting_env_reward_is_float32_whatever_the_spec_by_default():
    assert _float64_reward(CountingEnv()) == torch.float32


def test_counting_env_reward_takes_the_spec_dtype_with_adapt_dtype():
    assert _float64_reward(CountingEnv(adapt_dtype=True)) == torch.float64

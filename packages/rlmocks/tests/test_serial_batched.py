"""MockSerialEnv and MockBatched*Env: seeded counters that ignore the action."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import TensorDictModule

from rlmocks import MockBatchedLockedEnv, MockBatchedUnLockedEnv, MockSerialEnv
from rlmocks._serial_batched import SEED_ERROR

SHAPE_ERROR = "Expected a tensordict with shape==env.batch_size"


def test_serial_env_has_no_counter_before_seeding():
    env = MockSerialEnv()
    assert not hasattr(env, "counter")
    assert env.is_closed is False
    assert env.batch_locked


def test_serial_env_rollout_is_predictable():
    env = MockSerialEnv()
    env.set_seed(100)
    assert env.counter == 15 and env.max_val == 115
    linear = torch.nn.Linear(1, 1, bias=False)
    linear.weight.data.fill_(1.0)
    policy = TensorDictModule(linear, ["observation"], ["action"])
    td = env.rollout(200, policy)
    assert td.shape == (100,)
    assert td["observation"].squeeze(-1).tolist() == list(range(15, 115))
    assert td["next", "observation"].squeeze(-1).tolist() == list(range(16, 116))
    assert td["next", "reward"].squeeze(-1).tolist() == list(range(16, 116))
    assert td["action"].squeeze(-1).tolist() == list(range(15, 115))
    assert td["next", "done"][-1].item() and not td["next", "done"][:-1].any()


def test_serial_env_reset_keeps_the_counter():
    env = MockSerialEnv()
    env.set_seed(1)
    env.rand_step(env.reset())
    assert env.reset()["observation"].item() == 2.0


def test_serial_env_rand_step_needs_no_action():
    env = MockSerialEnv()
    env.set_seed(5)
    td = env.rand_step(env.reset())
    assert "action" not in td.keys()
    assert td["next", "reward"].item() == 6.0


@pytest.mark.parametrize("cls", [MockSerialEnv, MockBatchedLockedEnv])
@pytest.mark.parametrize("seed", [0, -3])
def test_seed_must_be_positive(cls, seed):
    with pytest.raises(ValueError, match=re.escape(SEED_ERROR.format(cls=cls.__name__, seed=seed))):
        cls().set_seed(seed)


@pytest.mark.parametrize("batch_size", [(), (32,), (32, 1), (32, 0)])
def test_batched_env_outputs_follow_the_batch(batch_size):
    env = MockBatchedLockedEnv(batch_size=batch_size)
    assert env.counter == 0
    env.set_seed(1)
    td = env.reset()
    assert td.batch_size == batch_size
    assert td["observation"].shape == (*batch_size, 1)
    td = env.rand_step(td)
    assert (td["next", "observation"] == 2).all()
    assert (td["next", "reward"] == 2).all()
    assert not td["next", "done"].any()
    assert "observation" in env.full_state_spec.keys()


def test_batched_locked_env_rejects_other_batches():
    env = MockBatchedLockedEnv("cpu")
    assert env.batch_locked
    with pytest.raises(RuntimeError, match="batch_locked is a read-only property"):
        env.batch_locked = False
    env.set_seed(1)
    td = env.reset()
    td["action"] = env.action_spec.rand()
    with pytest.raises(RuntimeError, match=re.escape(SHAPE_ERROR)):
        env.step(td.expand(2).clone())


def test_batched_unlocked_env_takes_leading_dims_from_the_input():
    env = MockBatchedUnLockedEnv()
    assert not env.batch_locked
    env.set_seed(1)
    td = env.reset()
    td["action"] = env.action_spec.rand()
    out = env.step(td.expand(2).clone())
    assert out["next", "observation"].shape == (2, 1)
    reset = env.reset(TensorDict({}, [3]))
    assert reset.batch_size == (3,)


def test_batched_unlocked_env_with_a_batch_still_checks_the_trailing_batch():
    env = MockBatchedUnLockedEnv(batch_size=(2,))
    env.set_seed(1)
    td = env.reset()
    td["action"] = env.action_spec.rand()
    with pytest.raises(RuntimeError, match=re.escape("Expected a tensordict with shape")):
        env.step(td.expand(2, 2).reshape(-1).clone())

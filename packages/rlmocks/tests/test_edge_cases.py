"""Edge-case envs: no data at all, scalar actions, an env that raises, an env that cannot stack."""

from __future__ import annotations

import re

import pytest
import torch

from rlmocks import (
    EnvThatDoesNothing,
    EnvThatErrorsAfter10Iters,
    EnvThatErrorsBecauseOfStack,
    EnvWithScalarAction,
)
from rlmocks._edge_cases import MAX_STEPS_ERROR


def test_env_that_does_nothing_has_only_done_flags():
    env = EnvThatDoesNothing(batch_size=(2,))
    assert env.observation_keys == [] and env.action_keys == [] and env.reward_keys == []
    rollout = env.rollout(4)
    assert rollout.shape == (2, 4)
    assert set(rollout["next"].keys()) == {"done", "terminated"}
    assert not rollout["next", "done"].any()


@pytest.mark.parametrize(
    ("singleton", "batch_size", "shape"),
    [(False, (), ()), (True, (), (1,)), (False, (3,), (3,)), (True, (3,), (3, 1))],
)
def test_scalar_action_has_no_trailing_dim_unless_singleton(singleton, batch_size, shape):
    env = EnvWithScalarAction(singleton=singleton, batch_size=batch_size)
    assert env.action_spec.shape == shape
    assert env.rand_action()["action"].shape == shape


def test_scalar_action_env_never_ends_and_gives_no_reward():
    env = EnvWithScalarAction(batch_size=(2,))
    assert env.done_keys == ["done", "terminated", "truncated"]
    rollout = env.rollout(5)
    assert rollout.shape == (2, 5)
    assert rollout["next", "observation"].shape == (2, 5, 3)
    assert (rollout["next", "reward"] == 0).all()
    assert not rollout["next", "done"].any()


def test_errors_after_10_iters_raises_at_the_eleventh_step():
    env = EnvThatErrorsAfter10Iters()
    td = env.reset()
    for _ in range(10):
        td = env.rand_step(td)
    assert env.counter == 10
    with pytest.raises(RuntimeError, match=re.escape(MAX_STEPS_ERROR)):
        env.rand_step(td)


def test_errors_after_10_iters_counts_across_resets():
    env = EnvThatErrorsAfter10Iters()
    assert env.rollout(6, break_when_any_done=False).shape == (6,)
    with pytest.raises(RuntimeError, match=re.escape(MAX_STEPS_ERROR)):
        env.rollout(6, break_when_any_done=False)


def test_errors_after_10_iters_has_float_done_flags():
    env = EnvThatErrorsAfter10Iters()
    assert env.full_done_spec["done"].dtype == torch.float32
    assert env.done_keys == ["done", "terminated"]


def test_errors_because_of_stack_resets_with_a_reward_and_an_action():
    env = EnvThatErrorsBecauseOfStack(batch_size=(2,))
    td = env.reset()
    assert set(td.keys()) == {"observation", "reward", "action", "done", "terminated"}
    assert td["observation"].shape == (2,)
    assert env.observation_spec["observation"].shape == (2, 1)


def test_errors_because_of_stack_counts_actions_up_to_target():
    env = EnvThatErrorsBecauseOfStack(target=3)
    td = env.reset()
    observations, done = [], []
    for action in [1, 0, 1, 1, 1]:
        td["action"] = torch.tensor([action])
        td = env.step(td)
        observations.append(td["next", "observation"].item())
        done.append(td["next", "done"].item())
        td = td["next"].clone()
    assert observations == [1, 1, 2, 3, 3]
    assert done == [False, False, False, True, True]
    assert td["reward"].item() == 1.0


def test_errors_because_of_stack_rollout_fails_to_stack():
    env = EnvThatErrorsBecauseOfStack()
    with pytest.raises(RuntimeError, match="exclusive|reward key was present"):
        env.rollout(10, break_when_any_done=False)


def test_errors_because_of_stack_lazy_rollout_shows_the_reset_reward():
    env = EnvThatErrorsBecauseOfStack()
    rollout = env.rollout(3, break_when_any_done=False, return_contiguous=False)
    assert "reward" in rollout[0].keys()
    assert "reward" not in rollout[1].keys()

"""rollout's options from torchrl 0.4 and current torchrl: ``actions``, ``break_when_all_done``
(partial steps), ``set_truncated``, ``out``, ``storing_device``; and ``"_step"`` masks."""

from __future__ import annotations

import re

import pytest
import torch
from _rlcore_envs import CountingEnv
from tensordict import TensorDict

from rlcore import EnvBase
from rlcore._partial_steps import NO_PARTIAL_STEPS
from rlcore._rollout import BOTH_BREAKS, NO_TRUNCATED, POLICY_AND_ACTIONS
from rlspecs import Categorical, Composite, Unbounded


class Countdown(EnvBase):
    """Not batch-locked: each row counts down from its own start and is done at zero."""

    _batch_locked = False

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(left=Unbounded(1, dtype=torch.int64))
        self.action_spec = Unbounded(1)
        flag = Categorical(2, shape=(1,), dtype=torch.bool)
        self.done_spec = Composite(done=flag, terminated=flag, truncated=flag)
        self.steps_taken = 0

    def _reset(self, tensordict):
        batch = () if tensordict is None else tensordict.batch_size
        start = torch.arange(2, 2 + max(1, batch.numel()), dtype=torch.int64).reshape(*batch, 1)
        return TensorDict({"left": start}, batch)

    def _step(self, tensordict):
        self.steps_taken += tensordict.batch_size.numel()
        left = tensordict["left"] - 1
        return TensorDict(
            {
                "left": left,
                "reward": torch.ones_like(left, dtype=torch.float32),
                "terminated": left <= 0,
            },
            tensordict.batch_size,
        )

    def _set_seed(self, seed):
        pass


def test_actions_replay_open_loop_and_cap_the_length():
    env = CountingEnv(max_steps=100)
    actions = [torch.ones(1, dtype=torch.int8), torch.zeros(1, dtype=torch.int8)] * 3
    out = env.rollout(50, actions=actions)
    assert out.batch_size == (6,)
    assert out["action"].flatten().tolist() == [1, 0, 1, 0, 1, 0]
    assert out["next", "observation"].flatten().tolist() == [1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match=re.escape(POLICY_AND_ACTIONS)):
        env.rollout(3, policy=lambda td: td, actions=actions)


def test_break_when_all_done_runs_until_every_row_is_done():
    env = Countdown()
    start = TensorDict({}, [3])
    out = env.rollout(10, tensordict=start, break_when_all_done=True)
    # rows start at 2, 3, 4: the rollout ends when the last is done (4 steps)
    assert out.batch_size == (3, 4)
    done = out["next", "done"].squeeze(-1)
    assert done[:, -1].all() and not done[2, :-1].any()
    # a finished row stops stepping and repeats its last transition
    assert out["next", "left"].squeeze(-1).tolist() == [[1, 0, 0, 0], [2, 1, 0, 0], [3, 2, 1, 0]]
    assert env.steps_taken == 2 + 3 + 4


def test_break_when_all_done_on_a_batch_locked_env_without_partial_steps_raises():
    env = CountingEnv(max_steps=1, batch_size=(2,))
    message = NO_PARTIAL_STEPS.format(cls="CountingEnv", rows="[[1]]")[:60]
    with pytest.raises(NotImplementedError, match=re.escape(message)):
        env.rollout(
            6,
            lambda td: td.set("action", torch.tensor([[0], [1]], dtype=torch.int8)),
            break_when_all_done=True,
        )


def test_both_breaks_are_refused():
    with pytest.raises(TypeError, match=re.escape(BOTH_BREAKS)):
        CountingEnv().rollout(3, break_when_any_done=True, break_when_all_done=True)


def test_a_step_mask_on_a_batch_locked_env():
    env = CountingEnv(batch_size=(2,))
    td = env.reset()
    td["action"] = torch.ones(2, 1, dtype=torch.int8)
    td["_step"] = torch.tensor([False, False])
    out = env.step(td)  # no row steps: the input's observations, a zero reward
    assert out["next", "observation"].flatten().tolist() == [0, 0]
    assert "_step" not in out.keys()
    td["_step"] = torch.tensor([True, True])
    assert env.step(td)["next", "observation"].flatten().tolist() == [1, 1]


def test_set_truncated_marks_the_last_step():
    env = Countdown()
    out = env.rollout(1, tensordict=TensorDict({}, [2]), set_truncated=True)
    assert out["next", "truncated"].squeeze(-1)[:, -1].all()
    assert out["next", "done"].squeeze(-1)[:, -1].all()
    with pytest.raises(RuntimeError, match=re.escape(NO_TRUNCATED)):
        CountingEnv().rollout(2, set_truncated=True)


def test_out_and_storing_device():
    env = CountingEnv(max_steps=100)
    first = env.rollout(4, break_when_any_done=False)
    target = first.clone().zero_()
    torch.manual_seed(0)
    env.set_seed(0)
    result = env.rollout(4, out=target, break_when_any_done=False)
    assert result is target and result["next", "observation"].shape == (4, 1)
    assert result["next", "observation"].abs().sum() > 0
    stored = env.rollout(3, storing_device="cpu", break_when_any_done=False)
    assert stored.device == torch.device("cpu")

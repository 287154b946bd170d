"""StateLessCountingEnv: the state (count, max_count) travels in the tensordict."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlmocks import StateLessCountingEnv
from rlmocks._stateless import MISSING_STATE


def _state(count, max_count):
    return TensorDict(
        count=torch.tensor(count, dtype=torch.int32).reshape(-1, 1),
        max_count=torch.tensor(max_count, dtype=torch.int32).reshape(-1, 1),
        batch_size=[len(count)],
    )


def test_done_keys_are_current_torchrls():
    env = StateLessCountingEnv()
    assert sorted(env.done_keys) == ["done", "terminated", "termindated", "truncated"]
    assert not env.batch_locked


def test_reset_starts_at_zero_with_max_count_drawn_in_10_to_20():
    env = StateLessCountingEnv()
    td = env.reset(TensorDict(batch_size=[64]))
    assert td.batch_size == (64,)
    assert (td["count"] == 0).all()
    assert td["max_count"].min() >= 10 and td["max_count"].max() < 20
    assert "reward" not in td.keys()


def test_reset_keeps_the_state_of_its_input():
    td = StateLessCountingEnv().reset(_state([3, 4], [7, 8]))
    assert td["count"].squeeze(-1).tolist() == [3, 4]
    assert td["max_count"].squeeze(-1).tolist() == [7, 8]


def test_step_adds_the_action_to_the_input_count():
    td = _state([3, 4], [10, 10])
    td["action"] = torch.tensor([[2], [5]], dtype=torch.int32)
    out = StateLessCountingEnv().step(td)["next"]
    assert out["count"].squeeze(-1).tolist() == [5, 9]
    assert out["max_count"].squeeze(-1).tolist() == [10, 10]
    assert out["reward"].shape == (2, 1)


def test_done_once_count_reaches_max_count():
    td = _state([1, 1], [2, 3])
    td["action"] = torch.ones(2, 1, dtype=torch.int32)
    out = StateLessCountingEnv().step(td)["next"]
    assert out["done"].squeeze(-1).tolist() == [True, False]
    assert out["terminated"].squeeze(-1).tolist() == [True, False]
    assert not out["truncated"].any()


def test_rollout_stops_at_the_smallest_max_count():
    env = StateLessCountingEnv()
    start = env.reset(_state([0, 0], [4, 6]))
    rollout = env.rollout(
        10,
        lambda td: td.set("action", torch.ones(*td.shape, 1, dtype=torch.int32)),
        tensordict=start,
        auto_reset=False,
    )
    assert rollout.shape == (2, 4)
    assert rollout["next", "count"][1].squeeze(-1).tolist() == [1, 2, 3, 4]


def test_step_without_state_names_the_missing_keys():
    td = TensorDict(action=torch.ones(1, dtype=torch.int32))
    message = MISSING_STATE.format(keys=["action"])
    with pytest.raises(KeyError, match=re.escape(message)):
        StateLessCountingEnv().step(td)

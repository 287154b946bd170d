"""StepCounter and InitTracker outside an env: their hooks on plain tensordicts, their key lists."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv, NestedDoneEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs, step_mdp
from rlspecs import Composite
from rltransforms import Compose, InitTracker, StepCounter, TransformedEnv
from rltransforms._counters import INIT_TRACKER_FORWARD_ERROR, STEP_COUNTER_FORWARD_ERROR

pytestmark = pytest.mark.filterwarnings("error")


@pytest.mark.parametrize("batch", [[], [4], [6, 4]])
@pytest.mark.parametrize("max_steps", [None, 1, 5])
@pytest.mark.parametrize("reset_workers", [True, False])
def test_step_counter_hooks_count_and_truncate_without_an_env(batch, max_steps, reset_workers):
    torch.manual_seed(0)
    counter = StepCounter(max_steps)
    done = torch.zeros(*batch, 1, dtype=torch.bool)
    td = TensorDict({"done": done, ("next", "done"): done}, batch)
    _reset = torch.zeros((), dtype=torch.bool)
    while reset_workers and not _reset.any():
        _reset = torch.randn(done.shape) < 0
        td.set("_reset", _reset)
    td.set("step_count", torch.zeros(*batch, 1, dtype=torch.int))
    td_reset = counter._reset(td, td.empty())
    assert not td_reset["step_count"].any()
    td = td.update(td_reset)
    steps = 0
    while max_steps is None or steps < max_steps:
        td.set("next", counter._step(td, td.get("next")))
        steps += 1
        assert (td["next", "step_count"] == steps).all()
        td = step_mdp(td)
        td["next", "done"] = done
        if max_steps is None:
            break
    if max_steps is not None:
        assert (td["step_count"] == max_steps).all()
        assert td["truncated"].all() and td["done"].all()
    td_reset = counter._reset(td, td.empty())
    if reset_workers:
        assert (td_reset["step_count"][_reset] == 0).all()
        assert (td_reset["step_count"][~_reset] == steps).all()
    else:
        assert (td_reset["step_count"] == 0).all()


def test_step_counter_key_lists_can_be_set_for_nested_data():
    counter = StepCounter(2, step_count_key="count")
    assert counter.step_count_keys == ["count"] and counter.reset_keys == ["_reset"]
    counter.step_count_keys = [("agent", "count")]
    counter.truncated_keys = [("agent", "truncated")]
    counter.done_keys = [("agent", "done")]
    counter.reset_keys = [("agent", "_reset")]
    td = TensorDict({"agent": TensorDict(done=torch.zeros(3, 1, dtype=torch.bool), batch_size=[3])})
    td_reset = counter._reset(td, td.clone())
    assert td_reset["agent", "count"].shape == (3, 1)
    next_td = counter._step(td_reset, td_reset.empty().set("agent", TensorDict(batch_size=[3])))
    next_td = counter._step(next_td, next_td.clone())
    assert next_td["agent", "truncated"].all() and next_td["agent", "done"].all()


def test_step_counter_key_lists_follow_the_env_done_groups():
    env = TransformedEnv(NestedDoneEnv(), StepCounter(3))
    counter = env.transform
    assert counter.step_count_keys == [("data", "step_count")]
    assert counter.truncated_keys == [("data", "truncated")]
    assert counter.reset_keys == [("data", "_reset")]
    assert counter.done_keys == [("data", "done")]


@pytest.mark.parametrize(
    "call",
    [
        lambda t, td: t(td),
        lambda t, td: Compose(t)(td),
        lambda t, td: nn.Sequential(t, nn.Identity())(td),
    ],
)
@pytest.mark.parametrize(
    "make, message",
    [(StepCounter, STEP_COUNTER_FORWARD_ERROR), (InitTracker, INIT_TRACKER_FORWARD_ERROR)],
)
def test_trackers_called_on_stored_data_say_they_need_an_env(call, make, message):
    with pytest.raises(NotImplementedError, match=re.escape(message)):
        call(make(), TensorDict(batch_size=[]))


def test_step_counter_standalone_observation_spec_gets_a_count_per_group():
    spec = StepCounter().transform_observation_spec(Composite(shape=(2,)))
    assert spec["step_count"].shape == (2, 1) and spec["step_count"].dtype == torch.int64


def test_step_counter_update_done_false_leaves_done_alone():
    env = TransformedEnv(CountEnv(), StepCounter(2, update_done=False))
    rollout = env.rollout(4, break_when_any_done=False)
    assert rollout["next", "truncated"].squeeze(-1).tolist() == [False, True, True, True]
    assert not rollout["next", "done"].any()


def test_init_tracker_hooks_run_without_an_env():
    tracker = InitTracker()
    assert tracker.init_keys == ["is_init"] and tracker.out_keys == ["is_init"]
    td = TensorDict(done=torch.zeros(3, 1, dtype=torch.bool), batch_size=[3])
    assert tracker._reset(td.empty(), td.clone())["is_init"].all()
    partial = td.clone().set("_reset", torch.tensor([[True], [False], [True]]))
    flags = tracker._reset(partial, td.clone())["is_init"]
    assert flags.squeeze(-1).tolist() == [True, False, True]
    assert not tracker._call(td.clone())["is_init"].any()


def test_init_tracker_init_keys_can_be_set_and_follow_nested_groups():
    tracker = InitTracker(init_key="first")
    tracker.init_keys = [("agent", "first")]
    tracker.reset_keys = [("agent", "_reset")]
    td = TensorDict(agent=TensorDict(done=torch.zeros(2, 1, dtype=torch.bool), batch_size=[2]))
    assert tracker._reset(td.empty(), td.clone())["agent", "first"].shape == (2, 1)
    env = TransformedEnv(NestedDoneEnv(), InitTracker())
    assert env.transform.init_keys == [("data", "is_init")]
    check_env_specs(env)
    with pytest.raises(ValueError, match="set init_keys instead"):
        env.transform.out_keys = ["x"]

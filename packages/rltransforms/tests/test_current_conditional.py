"""ConditionalSkip (skip env steps by condition) and ConditionalPolicySwitch (another policy
acts by condition)."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlcore import check_env_specs
from rlmocks import CountingEnv, StateLessCountingEnv
from rltransforms import (
    Compose,
    ConditionalPolicySwitch,
    ConditionalSkip,
    StepCounter,
    TransformedEnv,
)

rlbatched = pytest.importorskip("rlbatched", reason="the batched-env cases need rlbatched")

pytestmark = pytest.mark.filterwarnings("error")


def _ones(td):
    return td.set("action", torch.ones(*td.batch_size, 1, dtype=torch.int8))


def _odd(td):
    return td["observation"] % 2 == 1


class _RecordingStateLessEnv(StateLessCountingEnv):
    """A StateLessCountingEnv (not batch-locked) that records the batch size of each step."""

    def __init__(self):
        super().__init__()
        self.stepped_batches = []

    def _step(self, tensordict):
        self.stepped_batches.append(tuple(tensordict.batch_size))
        return super()._step(tensordict)


def _stateless_start(env, rows=2):
    td = env.reset(TensorDict(batch_size=[rows]))
    return td.set("action", torch.ones(rows, 1, dtype=torch.int32))


def _skip_rows(*rows):
    return ConditionalSkip(lambda td: torch.tensor(rows))


# ---------------------------------------------------------------- ConditionalSkip
def test_conditional_skip_writes_the_step_mask():
    t = ConditionalSkip(cond=lambda td: td["step_count"] % 2 == 1)
    td = TensorDict(step_count=torch.tensor([[0], [1]]), batch_size=[2])
    assert t._inv_call(td)["_step"].tolist() == [True, False]


def test_conditional_skip_combines_with_an_existing_mask():
    t = ConditionalSkip(cond=lambda td: torch.tensor([False, True]))
    td = TensorDict(_step=torch.tensor([False, True]), batch_size=[2])
    assert t._inv_call(td)["_step"].tolist() == [False, False]


def test_conditional_skip_without_a_skip_steps_as_usual():
    env = TransformedEnv(CountingEnv(max_steps=100), ConditionalSkip(lambda td: False))
    check_env_specs(env)
    assert env.rollout(3, _ones)["next", "observation"].squeeze(-1).tolist() == [1, 2, 3]


def test_conditional_skip_skips_every_other_step_of_nested_envs():
    # current torchrl's example: the skip covers the env holding ConditionalSkip (and the
    # envs it wraps), not an outer TransformedEnv
    inner = TransformedEnv(CountingEnv(max_steps=100), StepCounter(step_count_key="inner"))
    middle = TransformedEnv(
        inner,
        Compose(
            StepCounter(step_count_key="middle"),
            ConditionalSkip(cond=lambda td: td["step_count"] % 2 == 1),
        ),
        auto_unwrap=False,
    )
    env = TransformedEnv(middle, StepCounter(), auto_unwrap=False)
    rollout = env.rollout(6, _ones)
    assert rollout["observation"].squeeze(-1).tolist() == [0, 1, 1, 2, 2, 3]
    assert rollout["inner"].squeeze(-1).tolist() == [0, 1, 1, 2, 2, 3]
    assert rollout["middle"].squeeze(-1).tolist() == [0, 1, 1, 2, 2, 3]
    assert rollout["step_count"].squeeze(-1).tolist() == [0, 1, 2, 3, 4, 5]


def test_conditional_skip_output_of_a_skipped_step():
    env = TransformedEnv(CountingEnv(max_steps=100), ConditionalSkip(lambda td: True))
    td = env.step(_ones(env.reset()))
    assert td["next", "observation"].item() == 0  # not stepped: the input's observation
    assert td["next", "reward"].item() == 0 and not td["next", "done"].item()
    assert env.base_env.count.item() == 0


def test_conditional_skip_also_skips_the_transforms_of_its_env():
    env = TransformedEnv(CountingEnv(max_steps=100), Compose(StepCounter(), ConditionalSkip(_odd)))
    rollout = env.rollout(4, _ones)
    # once odd, the env is skipped and its own StepCounter does not count: it stays odd
    assert rollout["next", "observation"].squeeze(-1).tolist() == [1, 1, 1, 1]
    assert rollout["next", "step_count"].squeeze(-1).tolist() == [1, 1, 1, 1]


def test_conditional_skip_steps_the_other_rows_of_an_unlocked_env():
    base = _RecordingStateLessEnv()
    env = TransformedEnv(base, ConditionalSkip(lambda td: torch.tensor([False, True])))
    td = env.step(_stateless_start(env))
    assert td["next", "count"].squeeze(-1).tolist() == [1, 0]
    assert torch.equal(td["next", "max_count"], td["max_count"])
    assert base.stepped_batches == [(1,)]  # the skipped row never reached the base env


def test_conditional_skip_hands_the_mask_to_a_batched_env():
    batched = rlbatched.SerialEnv(2, lambda: CountingEnv(max_steps=100))
    env = TransformedEnv(batched, Compose(StepCounter(), _skip_rows(False, True)))
    try:
        td = env.step(_ones(env.reset()))
        assert td["next", "observation"].squeeze(-1).tolist() == [1, 0]
        # the batched env's partial step runs the transforms on the whole batch (torchrl's too)
        assert td["next", "step_count"].squeeze(-1).tolist() == [1, 1]
        env.transform[1].cond = lambda td: torch.tensor([False, False])
        td = env.step(_ones(td["next"].clone()))
        assert td["next", "observation"].squeeze(-1).tolist() == [2, 1]
    finally:
        env.close()


def test_conditional_skip_of_every_row_needs_no_partial_steps():
    env = TransformedEnv(CountingEnv(max_steps=100, batch_size=[2]), _skip_rows(True, True))
    td = env.step(_ones(env.reset()))
    assert td["next", "observation"].squeeze(-1).tolist() == [0, 0]
    assert td["next", "reward"].squeeze(-1).tolist() == [0, 0]


def test_conditional_skip_of_some_rows_of_a_locked_env_without_partial_steps():
    env = TransformedEnv(CountingEnv(max_steps=100, batch_size=[2]), _skip_rows(False, True))
    message = (
        "TransformedEnv cannot step some of its rows only: its transform (ConditionalSkip) asks "
        "rows [[0]] to step and the others to skip (a '_step' mask), and the base env "
        "CountingEnv is batch-locked"
    )
    with pytest.raises(NotImplementedError, match=re.escape(message)):
        env.step(_ones(env.reset()))


def test_conditional_skip_cannot_run_outside_an_env():
    with pytest.raises(NotImplementedError, match="cannot be executed without a parent"):
        ConditionalSkip(_odd)(TensorDict())


# ---------------------------------------------------------------- ConditionalPolicySwitch
def _odd_rows(td):
    return (td["observation"] % 2 == 1).reshape(td.batch_size or (1,))


def _switch_env(**kwargs):
    return TransformedEnv(
        CountingEnv(max_steps=100, **kwargs),
        Compose(
            StepCounter(step_count_key="total"),
            ConditionalPolicySwitch(policy=_ones, condition=_odd_rows),
            StepCounter(step_count_key="main"),
        ),
    )


def test_policy_switch_plays_where_the_condition_holds():
    env = _switch_env()
    rollout = env.rollout(3, _ones)
    assert rollout["next", "observation"].squeeze(-1).tolist() == [2, 4, 6]
    # the inner counter sees both policies' steps, the outer one the main policy's only
    assert rollout["next", "total"].squeeze(-1).tolist() == [2, 4, 6]
    assert rollout["next", "main"].squeeze(-1).tolist() == [1, 2, 3]


def test_policy_switch_env_specs_hold():
    check_env_specs(_switch_env())


def test_policy_switch_plays_first_at_reset_where_the_condition_holds():
    env = TransformedEnv(
        CountingEnv(max_steps=100),
        ConditionalPolicySwitch(policy=_ones, condition=lambda td: td["observation"] == 0),
    )
    td = env.reset()
    assert td["observation"].item() == 1 and "reward" not in td.keys()


def test_policy_switch_on_every_sub_env_of_a_batch():
    env = _switch_env(batch_size=[2])
    rollout = env.rollout(2, _ones)
    assert rollout["next", "observation"].squeeze(-1).tolist() == [[2, 4], [2, 4]]


def test_policy_switch_partial_on_a_batch_locked_env():
    env = TransformedEnv(
        CountingEnv(max_steps=100, batch_size=[2]),
        ConditionalPolicySwitch(policy=_ones, condition=lambda td: torch.tensor([True, False])),
    )
    with pytest.raises(RuntimeError, match="Cannot run partial steps in a batched locked"):
        env.rollout(2, _ones)


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        (lambda td: 1, "should return a boolean or a tensor"),
        (lambda td: torch.ones(3, dtype=torch.bool), "must have the shape of the tensordict"),
    ],
)
def test_policy_switch_checks_the_condition(condition, message):
    env = TransformedEnv(
        CountingEnv(max_steps=100), ConditionalPolicySwitch(policy=_ones, condition=condition)
    )
    with pytest.raises(RuntimeError, match=message):
        env.reset()


def test_policy_switch_cannot_run_alone():
    with pytest.raises(RuntimeError, match="cannot be called independently"):
        ConditionalPolicySwitch(policy=_ones, condition=_odd)(TensorDict())

"""ConditionalSkip (skip env steps by condition) and ConditionalPolicySwitch (another policy
acts by condition)."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlcore import check_env_specs
from rlmocks import CountingEnv
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


class _RecordingCountingEnv(CountingEnv):
    """A CountingEnv that records the `"_step"` entry its steps receive."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.partial_steps = []

    def _step(self, tensordict):
        self.partial_steps.append(tensordict.get("_step", None))
        return super()._step(tensordict)


class _PartialStepsEnv(TransformedEnv):
    """A TransformedEnv claiming partial-step support (what ConditionalSkip checks for)."""

    _supports_partial_steps = True


# ---------------------------------------------------------------- ConditionalSkip
def test_conditional_skip_writes_the_step_mask():
    t = ConditionalSkip(cond=lambda td: td["step_count"] % 2 == 1)
    td = TensorDict(step_count=torch.tensor([[0], [1]]), batch_size=[2])
    assert t._inv_call(td)["_step"].tolist() == [True, False]


def test_conditional_skip_combines_with_an_existing_mask():
    t = ConditionalSkip(cond=lambda td: torch.tensor([False, True]))
    td = TensorDict(_step=torch.tensor([False, True]), batch_size=[2])
    assert t._inv_call(td)["_step"].tolist() == [False, False]


def test_conditional_skip_hands_the_mask_to_an_env_taking_partial_steps():
    base = _RecordingCountingEnv(max_steps=100)
    env = _PartialStepsEnv(base, ConditionalSkip(_odd))
    td = env.step(_ones(env.reset()))
    env.step(_ones(td["next"].clone()))
    assert [step.item() for step in base.partial_steps] == [True, False]


def test_conditional_skip_without_a_skip_steps_as_usual():
    env = TransformedEnv(CountingEnv(max_steps=100), ConditionalSkip(lambda td: False))
    check_env_specs(env)
    assert env.rollout(3, _ones)["next", "observation"].squeeze(-1).tolist() == [1, 2, 3]


def test_conditional_skip_refuses_to_step_what_it_should_skip():
    env = TransformedEnv(CountingEnv(max_steps=100), Compose(StepCounter(), ConditionalSkip(_odd)))
    message = "the condition asks to skip the step of 1 of 1 sub-envs, but TransformedEnv"
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.rollout(3, _ones)


def test_conditional_skip_over_a_batched_env_refuses_partial_steps():
    batched = rlbatched.SerialEnv(2, lambda: CountingEnv(max_steps=100))
    env = TransformedEnv(batched, ConditionalSkip(lambda td: td["observation"].squeeze(-1) > 0))
    td = env.step(_ones(env.reset()))
    with pytest.raises(RuntimeError, match="skip the step of 2 of 2 sub-envs"):
        env.step(_ones(td["next"].clone()))
    env.close()


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

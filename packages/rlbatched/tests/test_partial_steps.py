"""Partial steps through SerialEnv and ParallelEnv: a ``"_step"`` mask steps the flagged sub-envs
only, the others giving ``rlcore.placeholder_next`` (their input's observations and done flags, a
zero reward), and ``rollout(break_when_all_done=True)`` runs until every sub-env is done."""

from __future__ import annotations

import pytest
import torch
from batched_test_envs import RewardCountingEnv
from tensordict import TensorDict

from rlbatched import SerialEnv
from rlmocks import CountingEnv, HeterogeneousCountingEnv
from rltransforms import StepCounter, TransformedEnv

KINDS = ["serial", "fork", "spawn"]


def _ones(td):
    return td.set("action", torch.ones(*td.batch_size, 1, dtype=torch.int8))


def _counts(env) -> list[int]:
    return [int(count.item()) for count in env.count]  # forwarded: one value per sub-env


@pytest.mark.parametrize("use_buffers", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_a_step_mask_steps_the_flagged_sub_envs_only(make_kind, kind, use_buffers):
    env = make_kind(kind, 3, CountingEnv, use_buffers=use_buffers)
    td = _ones(env.reset())
    td["_step"] = torch.tensor([True, False, True])
    out = env.step(td)
    assert out["next", "observation"].flatten().tolist() == [1, 0, 1]
    assert _counts(env) == [1, 0, 1]
    assert "_step" not in out.keys()


@pytest.mark.parametrize("use_buffers", [True, False])
@pytest.mark.parametrize("kind", KINDS)
def test_sub_envs_left_out_give_their_input_and_a_zero_reward(make_kind, kind, use_buffers):
    env = make_kind(kind, 3, RewardCountingEnv, use_buffers=use_buffers)
    td = _ones(env.reset())
    env.step(td)  # every "next" buffer holds a step's output: the placeholder must replace it
    td["observation"] = torch.tensor([[7], [8], [9]], dtype=torch.int32)
    td["done"] = td["terminated"] = torch.tensor([[False], [True], [False]])
    td["_step"] = torch.tensor([False, True, False])
    out = env.step(td)["next"]
    assert out["observation"].flatten().tolist() == [7, 2, 9]
    assert out["reward"].flatten().tolist() == [0.0, 2.0, 0.0]
    assert out["done"].flatten().tolist() == [False, False, False]
    assert _counts(env) == [1, 2, 1]


def test_a_mask_over_sub_env_batch_dims_steps_a_sub_env_if_any_row_is_flagged(make_fork):
    env = make_fork(3, CountingEnv, create_env_kwargs={"batch_size": (2,)})
    td = _ones(env.reset())
    td["_step"] = torch.tensor([[True, False], [False, False], [False, True]])
    out = env.step(td)
    assert out["next", "observation"][:, :, 0].tolist() == [[1, 1], [0, 0], [1, 1]]


@pytest.mark.parametrize("kind", ["serial", "fork"])
def test_heterogeneous_sub_envs_step_partially(make_kind, kind):
    env = make_kind(kind, 2, HeterogeneousCountingEnv, use_buffers=True)
    td = env.reset()
    td.update(env.full_action_spec.one())
    td["_step"] = torch.tensor([False, True])
    out = env.step(td)["next"]
    assert out["lazy"][0][0]["tensor_0"].tolist() == [0.0]
    assert out["lazy"][1][0]["tensor_0"].tolist() == [1.0]


@pytest.mark.parametrize("kind", KINDS)
def test_break_when_all_done_runs_every_sub_env_to_its_end(make_kind, kind):
    env = make_kind(kind, 3, CountingEnv, [{"max_steps": n} for n in (1, 2, 4)])
    out = env.rollout(20, _ones, break_when_all_done=True)
    # CountingEnv is done once its count exceeds max_steps: after 2, 3 and 5 steps
    assert out.batch_size == (3, 5)
    done = out["next", "done"].squeeze(-1)
    assert done[:, -1].all()
    assert done.sum(-1).tolist() == [4, 3, 1]  # a finished sub-env repeats its last step
    assert _counts(env) == [2, 3, 5]


@pytest.mark.parametrize("kind", ["serial", "fork"])
def test_break_when_all_done_through_a_transformed_batched_env(make_kind, kind):
    env = TransformedEnv(make_kind(kind, 2, CountingEnv, [{"max_steps": 1}, {}]), StepCounter())
    out = env.rollout(10, _ones, break_when_all_done=True)
    assert out.batch_size == (2, 6)
    assert out["next", "done"].squeeze(-1)[:, -1].all()


def test_no_sub_env_flagged_steps_none(make_fork):
    env = make_fork(2, CountingEnv)
    td = _ones(env.reset())
    td["_step"] = torch.zeros(2, dtype=torch.bool)
    assert env.step(td)["next", "observation"].flatten().tolist() == [0, 0]
    assert _counts(env) == [0, 0]


def test_a_partial_step_input_is_checked_whole(make_fork):
    env = make_fork(2, CountingEnv)
    env.reset()
    td = TensorDict({"_step": torch.tensor([True, False])}, [2])
    with pytest.raises(KeyError, match="action"):
        env.step(td)


class _UnlockedCounting(CountingEnv):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._batch_locked = False


def test_a_batch_of_unlocked_sub_envs_steps_only_the_masked_rows():
    env = SerialEnv(3, _UnlockedCounting)
    try:
        assert not env.batch_locked
        td = env.reset()
        td["action"] = torch.ones(3, 1, dtype=torch.int64)
        td["_step"] = torch.tensor([True, False, True])
        assert env.step(td)["next", "observation"].squeeze(-1).tolist() == [1, 0, 1]
    finally:
        env.close()

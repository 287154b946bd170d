"""Partial steps through SerialEnv: a ``"_step"`` mask steps the flagged sub-envs only, and
``rollout(break_when_all_done=True)`` runs until every sub-env is done."""

from __future__ import annotations

import torch

from rlbatched import SerialEnv
from rlmocks import CountingEnv
from rltransforms import StepCounter, TransformedEnv


def _ones(td):
    return td.set("action", torch.ones(*td.batch_size, 1, dtype=torch.int8))


def test_a_step_mask_steps_the_flagged_sub_envs_only():
    env = SerialEnv(3, CountingEnv)
    td = _ones(env.reset())
    td["_step"] = torch.tensor([True, False, True])
    out = env.step(td)
    assert out["next", "observation"].flatten().tolist() == [1, 0, 1]
    assert out["next", "reward"].flatten().tolist()[1] == 0
    assert [sub.count.item() for sub in env._envs] == [1, 0, 1]
    assert "_step" not in out.keys()


def test_break_when_all_done_runs_every_sub_env_to_its_end():
    make = [lambda n=n: CountingEnv(max_steps=n) for n in (1, 2, 4)]
    env = SerialEnv(3, make)
    out = env.rollout(20, _ones, break_when_all_done=True)
    # CountingEnv is done once its count exceeds max_steps: after 2, 3 and 5 steps
    assert out.batch_size == (3, 5)
    done = out["next", "done"].squeeze(-1)
    assert done[:, -1].all()
    assert done.sum(-1).tolist() == [4, 3, 1]  # a finished sub-env repeats its last step
    assert [sub.count.item() for sub in env._envs] == [2, 3, 5]


def test_break_when_all_done_through_a_transformed_serial_env():
    env = TransformedEnv(
        SerialEnv(2, [lambda: CountingEnv(max_steps=1), CountingEnv]), StepCounter()
    )
    out = env.rollout(10, _ones, break_when_all_done=True)
    assert out.batch_size == (2, 6)
    assert out["next", "done"].squeeze(-1)[:, -1].all()

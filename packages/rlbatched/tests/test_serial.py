"""SerialEnv specifics: gradients flow through it, errors name the sub-env."""

from __future__ import annotations

import functools

import pytest
import torch
from batched_test_envs import DifferentiableEnv, FailingCountingEnv

from rlbatched import SerialEnv


def test_backprop_matches_stacked_single_envs():
    """Gradients through a SerialEnv rollout equal those through the stacked single envs."""
    torch.manual_seed(0)
    policy = torch.nn.Linear(3, 3)

    def act(td):
        return td.set("action", policy(td["observation"]))

    env0 = DifferentiableEnv(seed=0)
    env1 = DifferentiableEnv(seed=5)
    r = torch.stack([env0.rollout(10, act), env1.rollout(10, act)])
    g = torch.autograd.grad(r["next", "reward"].sum(), policy.parameters())
    env = SerialEnv(
        2,
        [
            functools.partial(DifferentiableEnv, seed=0),
            functools.partial(DifferentiableEnv, seed=5),
        ],
    )
    r_serial = env.rollout(10, act)
    g_serial = torch.autograd.grad(r_serial["next", "reward"].sum(), policy.parameters())
    torch.testing.assert_close(g, g_serial)


def test_sub_env_error_keeps_type_and_names_index():
    """An exception from sub-env i propagates unchanged, with a note naming i."""
    env = SerialEnv(2, FailingCountingEnv, create_env_kwargs=[{}, {"fail_on": "reset"}])
    with pytest.raises(ValueError, match="boom in _reset") as info:
        env.reset()
    assert "raised by sub-env 1 of SerialEnv during reset" in info.value.__notes__
    env.close()

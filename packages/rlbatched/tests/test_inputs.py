"""Input checks of the batched envs: dtype representability and heterogeneous (lazy) specs."""

from __future__ import annotations

import re

import pytest
import torch
from batched_test_envs import ExtraObsCountingEnv
from tensordict import LazyStackedTensorDict

from rlcore.step_inputs import BAD_SHAPE
from rlmocks import (
    CountingEnv,
    HeterogeneousCountingEnv,
    HeterogeneousCountingEnvPolicy,
    NestedCountingEnv,
)


def test_lazy_specs_are_checked_per_worker(make_batched):
    """Different tasks (lazily stacked specs): a missing or misshapen action is refused."""
    env = make_batched(2, [CountingEnv, ExtraObsCountingEnv])
    td = env.reset()
    cls = type(env).__name__
    with pytest.raises(KeyError, match=re.escape(f"{cls}.step: the input has no 'action' entry")):
        env.step(td.exclude("action"))
    bad = td.clone()
    bad.set("action", torch.ones(2, 2, dtype=torch.int8))
    with pytest.raises(
        ValueError,
        match=re.escape(
            BAD_SHAPE.format(
                where=f"{cls}.step", role="action", key="action", got=(2,), expected=(1,)
            )
        ),
    ):
        env.step(bad)
    good = env.step(td.set("action", torch.ones(2, 1, dtype=torch.int8)))
    assert good["next", "observation"].tolist() == [[1], [1]]
    assert isinstance(good, LazyStackedTensorDict)


def test_heterogeneous_actions_inside_a_sub_env_are_checked(make_batched):
    env = make_batched(2, lambda: HeterogeneousCountingEnv(batch_size=(1, 2)))
    policy = HeterogeneousCountingEnvPolicy(env.input_spec["full_action_spec"])
    td = policy(env.reset())
    assert env.step(td.clone())["next"] is not None
    missing = td.clone()
    del missing["lazy", "action"]
    with pytest.raises(KeyError, match=re.escape("('lazy', 'action')")):
        env.step(missing)


def test_nested_action_leaf_missing_is_named(make_batched):
    env = make_batched(2, lambda: NestedCountingEnv(nest_obs_action=True, batch_size=(4,)))
    td = env.reset()
    with pytest.raises(KeyError, match=re.escape("('data', 'action')")):
        env.step(td)

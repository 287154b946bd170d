"""Input checks of the batched envs: dtype representability and heterogeneous (lazy) specs."""

from __future__ import annotations

import re

import pytest
import torch
from batched_test_envs import ExtraObsCountingEnv
from tensordict import LazyStackedTensorDict

from rlbatched._inputs import BAD_SHAPE, unrepresentable
from rlmocks import (
    CountingEnv,
    HeterogeneousCountingEnv,
    HeterogeneousCountingEnvPolicy,
    NestedCountingEnv,
)


@pytest.mark.parametrize(
    ("value", "dtype", "why"),
    [
        (torch.tensor([1, 2]), torch.int8, None),
        (torch.tensor([-129]), torch.int8, "min -129, max -129; torch.int8 holds -128 to 127"),
        (torch.tensor([255]), torch.uint8, None),
        (torch.tensor([256.0]), torch.uint8, "min 256.0, max 256.0; torch.uint8 holds 0 to 255"),
        (torch.tensor([1.5]), torch.int64, "non-integer values"),
        (torch.tensor([float("nan")]), torch.int32, "non-finite values"),
        (
            torch.tensor([2.0**63]),
            torch.int64,
            "min 9.223372036854776e+18, max 9.22337"
            "2036854776e+18; torch.int64 holds -9223372036854775808 to 9223372036854775807",
        ),
        (torch.tensor([0, 1]), torch.bool, None),
        (torch.tensor([2]), torch.bool, "values other than 0 and 1"),
        (torch.tensor([True]), torch.int8, None),
        (torch.tensor([1e300], dtype=torch.float64), torch.float32, "values overflow to infinity"),
        (torch.tensor([0.1], dtype=torch.float64), torch.float32, None),
        (torch.tensor([70000]), torch.float16, "values overflow to infinity"),
        (torch.tensor([float("inf")]), torch.float16, None),
        (torch.tensor([1 + 1j]), torch.float32, "non-zero imaginary parts"),
        (torch.zeros(0, dtype=torch.int64), torch.int8, None),
    ],
)
def test_unrepresentable(value, dtype, why):
    assert unrepresentable(value, dtype) == why


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

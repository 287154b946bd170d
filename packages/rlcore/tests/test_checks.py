"""check_env_specs: agreement of keys, shapes, dtypes and values between specs and data."""

from __future__ import annotations

import re

import pytest
import torch
from _rlcore_envs import (
    CountingEnv,
    HeterogeneousEnv,
    NestedCountingEnv,
    TerminatedOnlyEnv,
    UnlockedEnv,
)

from rlcore import check_env_specs
from rlspecs import Bounded, Composite, Unbounded


@pytest.mark.parametrize(
    "make",
    [
        lambda: CountingEnv(),
        lambda: CountingEnv(batch_size=(2, 3)),
        lambda: TerminatedOnlyEnv(batch_size=(2,)),
        lambda: NestedCountingEnv(batch_size=(2,)),
        lambda: NestedCountingEnv(has_root_done=True),
        lambda: UnlockedEnv(),
    ],
)
def test_consistent_envs_pass(make):
    check_env_specs(make())


@pytest.mark.parametrize("batch_size", [(), (2,)])
def test_heterogeneous_env_passes_with_lazy_stacks(batch_size):
    check_env_specs(HeterogeneousEnv(batch_size=batch_size), return_contiguous=False)


def test_seed_restores_the_global_rng():
    torch.manual_seed(1)
    expected = torch.rand(1)
    torch.manual_seed(1)
    check_env_specs(CountingEnv(), seed=0)
    assert torch.rand(1) == expected


def test_missing_spec_key_is_reported():
    env = CountingEnv()
    env.observation_spec = Composite(
        observation=Unbounded(1, dtype=torch.int32), extra=Unbounded(1)
    )
    with pytest.raises(AssertionError, match="The keys of the specs and data do not match"):
        check_env_specs(env)


def test_shape_mismatch_is_reported():
    env = CountingEnv()
    env.observation_spec = Composite(observation=Unbounded(2, dtype=torch.int32))
    with pytest.raises(
        AssertionError, match="The shapes of the data and specs don't match for key 'observation'"
    ):
        check_env_specs(env)


def test_dtype_mismatch_is_reported_unless_disabled():
    env = CountingEnv()
    env.observation_spec = Composite(observation=Unbounded(1, dtype=torch.int64))
    with pytest.raises(AssertionError, match="The dtypes of the data and specs don't match"):
        check_env_specs(env)
    with pytest.raises(AssertionError, match="not in the spec's domain"):
        check_env_specs(env, check_dtype=False)


class OutOfRangeEnv(CountingEnv):
    """Declares ``echo`` in [0, 1] but writes 5 at every step."""

    def __init__(self) -> None:
        super().__init__(max_steps=100)
        self.observation_spec = Composite(
            observation=Unbounded(1, dtype=torch.int32), echo=Bounded(0, 1, shape=(1,))
        )

    def _reset(self, tensordict):
        return super()._reset(tensordict).set("echo", torch.zeros(1))

    def _step(self, tensordict):
        return super()._step(tensordict).set("echo", torch.full((1,), 5.0))


def test_values_outside_the_spec_domain_are_reported():
    message = "The root data for the observation spec is not in the spec's domain: key 'echo'"
    with pytest.raises(AssertionError, match=re.escape(message)):
        check_env_specs(OutOfRangeEnv())


def test_run_type_checks_raise_type_errors():
    env = CountingEnv(run_type_checks=True)
    check_env_specs(env)
    env.output_spec.unlock_()
    env.output_spec["full_reward_spec", "reward"].dtype = torch.int
    with pytest.raises(TypeError, match="expected reward.dtype to be torch.int32"):
        check_env_specs(env)

"""Current torchrl's mocks made for batched envs, run through ``rlbatched.SerialEnv``.

rlmocks does not depend on rlbatched: these cases skip where it is not installed.
"""

from __future__ import annotations

import re
from functools import partial

import pytest

from rlcore import check_env_specs
from rlmocks import (
    EnvThatErrorsAfter10Iters,
    EnvWithMetadata,
    FastImageEnv,
    MockNestedResetEnv,
    MultiAgentCountingEnv,
)
from rlmocks._edge_cases import MAX_STEPS_ERROR

rlbatched = pytest.importorskip("rlbatched")

FACTORIES = [
    EnvWithMetadata,
    partial(MockNestedResetEnv, num_steps=3, done_at_root=True),
    partial(MultiAgentCountingEnv, n_agents=2),
    partial(FastImageEnv, img_shape=(1, 4, 4), batch_size=(3,)),
]


@pytest.mark.parametrize("factory", FACTORIES, ids=lambda f: getattr(f, "func", f).__name__)
def test_serial_env_of_current_mock_passes_check_env_specs(factory):
    env = rlbatched.SerialEnv(2, factory)
    check_env_specs(env, seed=0)
    env.close()


def test_serial_metadata_counts_in_each_worker():
    env = rlbatched.SerialEnv(2, EnvWithMetadata)
    rollout = env.rollout(3)
    assert [list(row) for row in rollout["next", "non_tensor"]] == [[1, 2, 3], [1, 2, 3]]
    env.close()


def test_serial_nested_reset_resets_on_the_root_done_only():
    env = rlbatched.SerialEnv(2, partial(MockNestedResetEnv, num_steps=3, done_at_root=True))
    rollout = env.rollout(7, break_when_any_done=False)
    assert rollout["next", "done"][0].squeeze(-1).tolist() == [0, 0, 1, 0, 0, 1, 0]
    assert rollout["next", "agent_1", "done"].all()
    env.close()


def test_serial_error_after_10_iters_surfaces():
    env = rlbatched.SerialEnv(2, EnvThatErrorsAfter10Iters)
    with pytest.raises(RuntimeError, match=re.escape(MAX_STEPS_ERROR)):
        env.rollout(20, break_when_any_done=False)
    env.close()


def test_serial_multi_agent_env_done_after_max_steps():
    env = rlbatched.SerialEnv(2, partial(MultiAgentCountingEnv, n_agents=2, max_steps=2))
    rollout = env.rollout(10)
    assert rollout.shape == (2, 3)
    assert rollout["next", "env_done"][:, -1].all()
    env.close()


def test_serial_fast_image_stacks_worker_batches():
    env = rlbatched.SerialEnv(2, partial(FastImageEnv, img_shape=(1, 4, 4), batch_size=(3,)))
    rollout = env.rollout(2)
    assert rollout["next", "pixels"].shape == (2, 3, 2, 1, 4, 4)
    env.close()

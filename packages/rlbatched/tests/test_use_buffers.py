"""``use_buffers``: batched envs with or without buffers laid out once from the sub-envs' specs.

Left unset, buffers are used unless a sub-env has dynamic specs (torchrl's rule). Without them,
each step and reset stacks the sub-envs' own outputs (a ParallelEnv's workers send them through
their pipes), so sub-envs whose data change shape between steps go through.
"""

from __future__ import annotations

import re

import pytest
import torch
from batched_test_envs import FailingCountingEnv, GrowingObsEnv, StartStateEnv
from tensordict import LazyStackedTensorDict, TensorDict

from rlbatched import ParallelEnv, SerialEnv
from rlbatched._batched_base import USE_BUFFERS_ERROR
from rlmocks import CountingEnv, HeterogeneousCountingEnv


def _ones(n: int) -> TensorDict:
    return TensorDict({"action": torch.ones(n, 1, dtype=torch.int8)}, [n])


@pytest.mark.parametrize("kind", ["serial", "fork", "spawn"])
def test_sub_envs_whose_data_grow_go_through_without_buffers(make_kind, kind):
    env = make_kind(kind, 2, GrowingObsEnv)
    td = env.reset()
    assert env.use_buffers is False
    assert env.batch_size == (2, 2)
    assert [td[0, i]["obs"].shape for i in (0, 1)] == [(1,), (2,)]
    td["action"] = torch.zeros(2, 2, 1)
    out = env.step(td)["next"]
    assert [out[1, i]["obs"].tolist() for i in (0, 1)] == [[1.0, 1.0], [1.0, 1.0, 1.0]]
    assert out["reward"].flatten().tolist() == [1.0] * 4
    rollout = env.rollout(3, return_contiguous=False)
    assert rollout[0, 1, 2]["next", "obs"].shape == (5,)


def test_default_keeps_buffers_for_static_specs(make_batched):
    env = make_batched(2, CountingEnv)
    env.reset()
    assert env.use_buffers is True


def test_heterogeneous_sub_envs_default_to_no_buffers(make_batched):
    """HeterogeneousCountingEnv's lazily stacked specs report -1 dims: dynamic, as in torchrl."""
    env = make_batched(2, HeterogeneousCountingEnv)
    env.reset()
    assert env.use_buffers is False
    rollout = env.rollout(3, return_contiguous=False)
    assert rollout.batch_size == (2, 3)
    for agent in range(3):
        obs = rollout["lazy"][0][..., agent][f"tensor_{agent}"]
        assert (obs.flatten(1).mean(-1) == torch.arange(3)).all()


def test_buffers_can_be_forced_for_dynamic_specs(make_fork):
    """use_buffers=True lays the buffers out from the current spec shapes (the seed era's way),
    where torchrl would warn and go without."""
    env = make_fork(2, HeterogeneousCountingEnv, use_buffers=True)
    env.reset()
    assert env.use_buffers is True and env.shared_tensordict_parent is not None
    assert env.rollout(2, return_contiguous=False).batch_size == (2, 2)


def test_parallel_env_without_buffers_has_no_shared_buffer(make_fork):
    env = make_fork(2, CountingEnv, use_buffers=False)
    env.reset()
    assert env.use_buffers is False and env.shared_tensordict_parent is None


@pytest.mark.parametrize("kind", ["serial", "fork", "spawn"])
def test_results_without_buffers_equal_those_with(make_kind, kind):
    with_buffers = make_kind(kind, 3, CountingEnv)
    without = make_kind(kind, 3, CountingEnv, use_buffers=False)
    rollouts = []
    for env in (with_buffers, without):
        env.set_seed(0)
        torch.manual_seed(0)  # the random actions
        rollouts.append(env.rollout(4))
    a, b = rollouts
    assert set(a.keys(True, True)) == set(b.keys(True, True))
    for key in a.keys(True, True):
        assert torch.equal(a[key], b[key]), key


@pytest.mark.parametrize("kind", ["serial", "fork", "spawn"])
def test_partial_reset_without_buffers(make_kind, kind):
    """A sub-env not reset gives zeros under the caller's entries, as with buffers."""
    env = make_kind(kind, 3, StartStateEnv, use_buffers=False)
    env.reset()
    td = TensorDict(
        {
            "start": torch.tensor([[5.0], [6.0], [7.0]]),
            "observation": torch.tensor([[1.0], [2.0], [3.0]]),
            "_reset": torch.tensor([True, False, True]),
        },
        [3],
    )
    out = env.reset(td)
    assert out["observation"].flatten().tolist() == [5.0, 2.0, 7.0]


def test_input_is_checked_without_buffers(make_batched):
    env = make_batched(2, CountingEnv, use_buffers=False)
    env.reset()
    with pytest.raises(KeyError, match="action"):
        env.step(TensorDict({}, [2]))
    with pytest.raises(ValueError, match=re.escape("'action' has shape (2, 3)")):
        env.step(TensorDict({"action": torch.ones(2, 3, dtype=torch.int8)}, [2]))


def test_worker_error_without_buffers_names_the_worker(make_fork):
    env = make_fork(
        2, FailingCountingEnv, create_env_kwargs=[{}, {"fail_on": "step"}], use_buffers=False
    )
    env.reset()
    with pytest.raises(ValueError, match=re.escape("ParallelEnv worker 1 raised ValueError")):
        env.step(_ones(2))
    assert not env.is_closed
    assert env.reset()["observation"].flatten().tolist() == [0, 0]


def test_seeding_and_forwarding_without_buffers(make_fork):
    env = make_fork(2, CountingEnv, use_buffers=False)
    assert env.set_seed(3) is not None
    assert env.max_steps == [5, 5]


@pytest.mark.parametrize("use_buffers", [True, False])
def test_async_steps_and_resets_with_or_without_buffers(make_fork, use_buffers):
    env = make_fork(3, CountingEnv, use_buffers=use_buffers)
    env.reset()
    env.async_step_send(_ones(2), env_index=[2, 0])
    out = env.async_step_recv(min_get=2)
    assert out["env_index"].tolist() == [0, 2]
    assert out["next", "observation"].flatten().tolist() == [1, 1]
    env.async_reset_send(env_index=2)
    out = env.async_reset_recv()
    assert out["env_index"].tolist() == [2] and out["observation"].flatten().tolist() == [0]


def test_heterogeneous_async_steps_without_buffers_stack_lazily(make_fork):
    env = make_fork(2, HeterogeneousCountingEnv)
    td = env.reset()
    td.update(env.full_action_spec.rand())
    env.async_step_send(td)
    out = env.async_step_recv(min_get=2)
    assert out["env_index"].tolist() == [0, 1]
    assert isinstance(out["next", "lazy"], LazyStackedTensorDict)
    assert out["next", "lazy"][0][0]["tensor_0"].tolist() == [1.0]


@pytest.mark.parametrize("bad", ["no", 0.5])
def test_use_buffers_must_be_a_bool_or_none(bad):
    with pytest.raises(TypeError, match=re.escape(USE_BUFFERS_ERROR.format(got=bad))):
        SerialEnv(1, CountingEnv, use_buffers=bad)
    with pytest.raises(TypeError, match="use_buffers must be None, True or False"):
        ParallelEnv(1, CountingEnv, use_buffers=bad)

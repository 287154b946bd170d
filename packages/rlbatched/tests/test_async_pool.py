"""AsyncEnvPool: current torchrl's asynchronous pool, on threads (a SerialEnv's sub-envs) or
worker processes (a ParallelEnv); sends named by ``"env_index"``, receives of the first ready."""

from __future__ import annotations

import re

import pytest
import torch
from batched_test_envs import FailingCountingEnv, GatedCountingEnv, StartStateEnv
from tensordict import LazyStackedTensorDict, TensorDict

from rlbatched import AsyncEnvPool
from rlcore import check_env_specs
from rlmocks import CountingEnv, HeterogeneousCountingEnv

# the backend, and the start method of the multiprocessing one
BACKENDS = ["threading", "fork", "spawn"]


@pytest.fixture
def make_pool():
    """Build AsyncEnvPools (``make_pool(kind, makers, **kwargs)``); each is closed at teardown."""
    built = []

    def make(kind, makers, **kwargs):
        if kind != "threading":
            kwargs.update(backend="multiprocessing", mp_start_method=kind)
        pool = AsyncEnvPool(makers, **kwargs)
        built.append(pool)
        return pool

    yield make
    for pool in built:
        pool.close()


def _actions(n: int, env_index=None) -> TensorDict:
    td = TensorDict({"action": torch.ones(n, 1, dtype=torch.int8)}, [n])
    if env_index is not None:
        td["env_index"] = torch.tensor(env_index)
    return td


@pytest.mark.parametrize("kind", BACKENDS)
def test_reset_step_and_rollout_as_a_batched_env(make_pool, kind):
    pool = make_pool(kind, [CountingEnv] * 3)
    assert pool.batch_size == (3,) and pool.num_envs == 3
    td = pool.reset()
    assert td["env_index"].tolist() == [0, 1, 2]
    td["action"] = torch.tensor([[1], [0], [1]], dtype=torch.int8)
    assert pool.step(td)["next", "observation"].flatten().tolist() == [1, 0, 1]
    rollout = pool.rollout(3, lambda td: td.update(_actions(3)))
    assert rollout.batch_size == (3, 3)
    assert rollout["next", "observation"][:, -1].flatten().tolist() == [3, 3, 3]
    assert (rollout["env_index"] == torch.arange(3).unsqueeze(-1)).all()


@pytest.mark.parametrize("kind", BACKENDS)
def test_async_step_of_some_sub_envs(make_pool, kind):
    pool = make_pool(kind, [CountingEnv] * 3)
    td = pool.reset()
    td["action"] = torch.ones(3, 1, dtype=torch.int8)
    pool.async_step_send(td[1:])  # its rows name sub-envs 1 and 2
    out = pool.async_step_recv(min_get=2)
    assert out["env_index"].tolist() == [1, 2]
    assert out["next", "observation"].flatten().tolist() == [1, 1]
    assert out["action"].flatten().tolist() == [1, 1]  # the rows sent, with their outputs


@pytest.mark.parametrize("kind", ["threading", "fork"])
def test_async_reset_returns_what_the_sub_envs_reset_to(make_pool, kind):
    pool = make_pool(kind, [StartStateEnv] * 3)
    pool.reset()
    pool.async_reset_send(TensorDict({"start": torch.tensor([[4.0], [6.0]])}, [2]), [2, 0])
    out = pool.async_reset_recv(min_get=2)
    assert out["env_index"].tolist() == [0, 2]
    assert out["observation"].flatten().tolist() == [6.0, 4.0]
    assert "action" not in out.keys()


@pytest.mark.parametrize("kind", ["threading", "fork"])
def test_recv_returns_the_first_ready(make_pool, kind, tmp_path):
    gate = tmp_path / "gate"
    pool = make_pool(kind, [GatedCountingEnv] * 3, create_env_kwargs=[{}, {"gate": str(gate)}, {}])
    pool.reset()
    pool.async_step_send(_actions(3))
    assert pool.async_step_recv(min_get=2)["env_index"].tolist() == [0, 2]
    with pytest.raises(RuntimeError, match=re.escape("sub-env 1 still has a step in flight")):
        pool.async_step_send(_actions(1), env_index=1)
    with pytest.raises(RuntimeError, match=re.escape("AsyncEnvPool.step: sub-envs [1] have")):
        pool.step(_actions(3))
    gate.touch()
    assert pool.async_step_recv(env_index=1)["next", "observation"].tolist() == [[1]]


@pytest.mark.parametrize("kind", ["threading", "fork"])
def test_an_int_env_index_sends_one_sub_env_its_own_data(make_pool, kind):
    pool = make_pool(kind, [CountingEnv] * 2)
    pool.reset()
    pool.async_step_send(TensorDict({"action": torch.ones(1, dtype=torch.int8)}, []), 1)
    out = pool.async_step_recv()
    assert out["env_index"].tolist() == [1] and out.batch_size == (1,)


@pytest.mark.parametrize("kind", ["threading", "fork"])
def test_a_failing_sub_env_is_named_and_the_others_delivered(make_pool, kind):
    pool = make_pool(
        kind, [FailingCountingEnv] * 3, create_env_kwargs=[{}, {"fail_on": "step"}, {}]
    )
    pool.reset()
    pool.async_step_send(_actions(3))
    with pytest.raises(ValueError, match="boom in _step") as info:
        pool.async_step_recv(env_index=[0, 1, 2])
    where = "AsyncEnvPool during step" if kind == "threading" else "ParallelEnv worker 1"
    assert where in str(info.value) + "".join(getattr(info.value, "__notes__", []))
    assert pool.async_step_recv(min_get=2)["env_index"].tolist() == [0, 2]


def test_a_failing_synchronous_step_leaves_nothing_in_flight(make_pool):
    pool = make_pool(
        "threading", [FailingCountingEnv] * 2, create_env_kwargs=[{"fail_on": "step"}, {}]
    )
    pool.reset()
    with pytest.raises(ValueError, match="boom in _step"):
        pool.step(_actions(2))
    assert pool.reset()["observation"].flatten().tolist() == [0, 0]


@pytest.mark.parametrize("kind", ["threading", "fork"])
def test_partial_steps_and_resets(make_pool, kind):
    pool = make_pool(kind, [CountingEnv] * 3)
    td = pool.reset()
    td.update(_actions(3))
    td["_step"] = torch.tensor([True, False, True])
    assert pool.step(td)["next", "observation"].flatten().tolist() == [1, 0, 1]
    td = TensorDict({"_reset": torch.tensor([[True], [False], [False]])}, [3])
    pool.reset(td)  # sub-env 0 only
    assert pool.step(_actions(3))["next", "observation"].flatten().tolist() == [1, 1, 2]


@pytest.mark.parametrize("kind", ["threading", "fork"])
def test_the_specs_declare_env_index(make_pool, kind):
    pool = make_pool(kind, [CountingEnv] * 2)
    spec = pool.full_state_spec["env_index"]
    assert spec.shape == (2,) and spec.dtype == torch.int64
    check_env_specs(pool)


@pytest.mark.parametrize("kind", ["threading", "fork"])
def test_stack_lazy_and_dense(make_pool, kind):
    lazy = make_pool(kind, [CountingEnv] * 2, stack="lazy")
    assert isinstance(lazy.reset(), LazyStackedTensorDict)
    with pytest.raises(ValueError, match=re.escape("sub-env 1's specs do not stack")):
        make_pool(kind, [CountingEnv, HeterogeneousCountingEnv])
    mixed = make_pool(kind, [HeterogeneousCountingEnv] * 2, stack="maybe_dense")
    assert mixed.rollout(2, return_contiguous=False).batch_size == (2, 2)


def test_envs_given_built(make_pool):
    envs = [CountingEnv(), CountingEnv(max_steps=1)]
    pool = make_pool("threading", envs)
    pool.reset()
    assert pool._batched._envs == envs


def test_bad_arguments_are_refused():
    with pytest.raises(NotImplementedError, match="backend must be one of"):
        AsyncEnvPool(CountingEnv, backend="asyncio")
    with pytest.raises(NotImplementedError, match="stack must be one of"):
        AsyncEnvPool(CountingEnv, stack="nested")
    with pytest.raises(ValueError, match="mp_start_method applies to backend='multiprocessing'"):
        AsyncEnvPool(CountingEnv, mp_start_method="fork")
    with pytest.raises(ValueError, match="at least one env"):
        AsyncEnvPool([])


def test_recv_without_sends_is_refused(make_pool):
    pool = make_pool("threading", [CountingEnv] * 2)
    pool.reset()
    with pytest.raises(RuntimeError, match=re.escape("AsyncEnvPool.async_step_recv: no step")):
        pool.async_step_recv()
    pool.async_step_send(_actions(2))
    with pytest.raises(ValueError, match="min_get must be an int between 1 and"):
        pool.async_step_recv(min_get=3)
    assert pool.async_step_recv(min_get=2).batch_size == (2,)

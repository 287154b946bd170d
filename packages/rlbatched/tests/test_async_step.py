"""ParallelEnv.async_step_send / async_step_recv: the first ready sub-envs, with their indices."""

from __future__ import annotations

import re

import pytest
import torch
from batched_test_envs import (
    FailingCountingEnv,
    GatedCountingEnv,
    HangingCountingEnv,
    StartStateEnv,
)
from tensordict import TensorDict

from rlcore import EnvClosedError
from rlmocks import CountingEnv
from rlworkers import WorkerDiedError, WorkerTimeoutError


def _actions(n, value=1, env_index=None):
    td = TensorDict({"action": torch.full((n, 1), value, dtype=torch.int8)}, batch_size=[n])
    if env_index is not None:
        td["env_index"] = torch.tensor(env_index, dtype=torch.int64)
    return td


@pytest.mark.parametrize("method", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("num_processes", [4, 2])
def test_send_all_receive_all_equals_step(make_kind, method, num_processes):
    """Receiving every sub-env gives what step gives, rows in env_index order."""
    env = make_kind(method, 4, CountingEnv, num_processes=num_processes)
    ref = make_kind("fork", 4, CountingEnv)
    td, ref_td = env.reset(), ref.reset()
    td["action"] = ref_td["action"] = torch.tensor([[1], [0], [1], [1]], dtype=torch.int8)
    td["extra"] = ref_td["extra"] = torch.arange(4.0)
    env.async_step_send(td)
    out = env.async_step_recv(min_get=4)
    expected = ref.step(ref_td)
    assert out["env_index"].dtype == torch.int64
    assert out["env_index"].tolist() == [0, 1, 2, 3]
    assert out.batch_size == torch.Size([4])
    for key in expected.keys(True, True):
        assert torch.equal(out[key], expected[key]), key
    assert set(out.keys(True, True)) == {*expected.keys(True, True), "env_index"}
    assert "next" not in td.keys()  # the caller's tensordict is left alone


def test_subsets_are_routed_by_env_index(make_fork):
    env = make_fork(4, CountingEnv, num_processes=2)
    env.reset()
    env.async_step_send(_actions(2, 1, env_index=[3, 1]))
    out = env.async_step_recv(min_get=2)
    assert out["env_index"].tolist() == [1, 3]
    assert out["next", "observation"].flatten().tolist() == [1, 1]
    # the actions travel with their rows: sub-env 2 gets 0, sub-env 0 gets 1
    env.async_step_send(
        _actions(4, 1).set("action", torch.tensor([[1], [1], [0], [1]]).to(torch.int8))
    )
    out = env.async_step_recv(min_get=4)
    assert out["next", "observation"].flatten().tolist() == [1, 2, 0, 2]
    assert out["action"].flatten().tolist() == [1, 1, 0, 1]


def test_recv_returns_the_first_ready_and_keeps_the_rest_in_flight(make_fork, tmp_path):
    # sub-env 1 steps only once the gate file exists: it cannot be ready early (a loaded
    # machine made a 1 s sleep against a 0.9 s bound unreliable), and a recv that waited for
    # it would time out instead of returning
    gate = tmp_path / "gate"
    env = make_fork(3, GatedCountingEnv, create_env_kwargs=[{}, {"gate": str(gate)}, {}])
    env.reset()
    env.async_step_send(_actions(3))
    out = env.async_step_recv(min_get=2)  # did not wait for sub-env 1
    assert out["env_index"].tolist() == [0, 2]
    with pytest.raises(
        RuntimeError, match=re.escape("async_step_send: sub-env 1 still has a step in flight")
    ):
        env.async_step_send(_actions(1, env_index=[1]))
    with pytest.raises(RuntimeError, match=re.escape("ParallelEnv.step: sub-envs [1] have")):
        env.step(_actions(3))
    with pytest.raises(RuntimeError, match=re.escape("ParallelEnv.reset: sub-envs [1] have")):
        env.reset()
    gate.touch()
    env.async_step_send(_actions(2, env_index=[0, 2]))  # those that came back go again
    out = env.async_step_recv(min_get=3)
    assert out["env_index"].tolist() == [0, 1, 2]
    assert out["next", "observation"].flatten().tolist() == [2, 1, 2]
    with pytest.raises(RuntimeError, match=re.escape("async_step_recv: no step in flight")):
        env.async_step_recv()
    env.step(_actions(3))  # sync step works again once nothing is in flight


def test_min_get_and_env_index_are_validated(make_fork):
    env = make_fork(2, CountingEnv)
    env.reset()
    for bad in ([0, 0], [2, 0], [-1, 0]):
        with pytest.raises(
            ValueError,
            match=re.escape("sub-env indices in [0, 2)") + ".*got " + re.escape(f"{bad}."),
        ):
            env.async_step_send(_actions(2, env_index=bad))
    td = _actions(2)
    td["env_index"] = torch.tensor([0, 1], dtype=torch.int32)
    with pytest.raises(ValueError, match="dtype torch.int32"):
        env.async_step_send(td)
    with pytest.raises(RuntimeError, match="batch"):
        env.async_step_send(_actions(3))
    with pytest.raises(KeyError, match="action"):
        env.async_step_send(TensorDict({}, batch_size=[2]))
    with pytest.raises(ValueError, match=re.escape("'action' has shape (1, 2)")):
        env.async_step_send(
            TensorDict(
                {
                    "action": torch.ones(1, 2, dtype=torch.int8),
                    "env_index": torch.tensor([1]),
                },
                batch_size=[1],
            )
        )
    env.async_step_send(_actions(2))
    with pytest.raises(ValueError, match=re.escape("min_get must be an int between 1 and")):
        env.async_step_recv(min_get=3)
    assert env.async_step_recv(min_get=2).batch_size == torch.Size([2])


def test_worker_error_in_async_step(make_fork):
    env = make_fork(3, FailingCountingEnv, create_env_kwargs=[{}, {"fail_on": "step"}, {}])
    env.reset()
    env.async_step_send(_actions(3))
    with pytest.raises(ValueError, match=re.escape("ParallelEnv worker 1 raised ValueError")):
        while True:
            env.async_step_recv()
    assert not env.is_closed
    while env._async:  # the others are still delivered
        assert 1 not in env.async_step_recv()["env_index"].tolist()
    env.reset()


def test_dead_worker_in_async_step(make_fork):
    env = make_fork(2, CountingEnv)
    td = env.reset()  # the whole input: the step command goes through shared memory only
    td["action"] = torch.ones(2, 1, dtype=torch.int8)
    env._workers[1].kill()
    env._workers[1].join()
    env.async_step_send(td)
    with pytest.raises(WorkerDiedError, match="ParallelEnv worker 1"):
        env.async_step_recv(min_get=2)
    assert env.is_closed
    with pytest.raises(EnvClosedError):
        env.async_step_send(_actions(2))
    env.reset()
    env.async_step_send(_actions(2))
    assert env.async_step_recv(min_get=2)["env_index"].tolist() == [0, 1]


def test_hung_worker_in_async_step(make_fork):
    env = make_fork(2, HangingCountingEnv, create_env_kwargs=[{}, {"hang": True}])
    env.reset()
    env.async_step_send(_actions(2))
    assert env.async_step_recv()["env_index"].tolist() == [0]
    # only the hung worker's wait is timed short: with worker_timeout=1 from the start, a
    # start-up or sub-env 0's step taking over 1 s on a loaded machine failed the test
    env._pool.timeout = 1.0
    with pytest.raises(WorkerTimeoutError, match="ParallelEnv worker 1"):
        env.async_step_recv()
    assert env.is_closed


# ---------------------------------------------------------------------- asynchronous resets
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_async_reset_of_some_sub_envs(make_kind, method):
    env = make_kind(method, 3, CountingEnv)
    env.reset()
    env.step(_actions(3))
    env.async_reset_send(env_index=[2, 0])
    out = env.async_reset_recv(min_get=2)
    assert out["env_index"].tolist() == [0, 2]
    assert out["observation"].flatten().tolist() == [0, 0]
    assert set(out.keys()) == {"observation", "done", "terminated", "env_index"}
    assert [int(c.item()) for c in env.count] == [0, 1, 0]


@pytest.mark.parametrize("use_buffers", [True, False])
def test_async_reset_reads_the_rows_sent(make_fork, use_buffers):
    env = make_fork(3, StartStateEnv, use_buffers=use_buffers)
    env.reset()
    td = TensorDict({"start": torch.tensor([[4.0], [5.0]])}, [2])
    td["env_index"] = torch.tensor([1, 2])
    env.async_reset_send(td)
    out = env.async_reset_recv(min_get=2)
    assert out["observation"].flatten().tolist() == [4.0, 5.0]


def test_one_sub_env_by_int_env_index(make_fork):
    env = make_fork(3, CountingEnv)
    env.reset()
    one = TensorDict({"action": torch.ones(1, dtype=torch.int8)}, [])  # sub-env 1's own batch
    env.async_step_send(one, env_index=1)
    out = env.async_step_recv(env_index=1)
    assert out["env_index"].tolist() == [1] and out["next", "observation"].tolist() == [[1]]


def test_recv_by_env_index_waits_for_those_and_max_get_caps_the_rest(make_fork):
    env = make_fork(4, CountingEnv)
    env.reset()
    env.async_step_send(_actions(4))
    assert env.async_step_recv(env_index=[3, 1])["env_index"].tolist() == [1, 3]
    first = env.async_step_recv(min_get=1, max_get=1)["env_index"].tolist()
    assert len(first) == 1
    rest = env.async_step_recv(min_get=1)["env_index"].tolist()
    assert sorted(first + rest) == [0, 2]


def test_steps_and_resets_in_flight_are_told_apart(make_fork):
    env = make_fork(2, CountingEnv)
    env.reset()
    env.async_reset_send(env_index=0)
    with pytest.raises(
        RuntimeError, match=re.escape("async_step_send: sub-env 0 still has a reset in flight")
    ):
        env.async_step_send(_actions(1), env_index=[0])
    with pytest.raises(RuntimeError, match=re.escape("async_step_recv: no step in flight")):
        env.async_step_recv()
    with pytest.raises(ValueError, match=re.escape("env_index [1] names sub-envs with no reset")):
        env.async_reset_recv(env_index=1)
    with pytest.raises(ValueError, match=re.escape("max_get must be an int greater than or")):
        env.async_reset_recv(min_get=1, max_get=0)
    assert env.async_reset_recv()["env_index"].tolist() == [0]


def test_env_index_of_batched_sub_envs_spans_their_dims(make_fork):
    env = make_fork(3, CountingEnv, create_env_kwargs={"batch_size": (2,)})
    env.reset()
    td = TensorDict({"action": torch.ones(2, 2, 1, dtype=torch.int8)}, [2, 2])
    td["env_index"] = torch.tensor([[2, 2], [0, 0]])
    env.async_step_send(td)
    out = env.async_step_recv(min_get=2)
    assert out["env_index"].tolist() == [[0, 0], [2, 2]]
    td["env_index"] = torch.tensor([[2, 0], [0, 2]])
    with pytest.raises(ValueError, match=re.escape("got [[2, 0], [0, 2]]")):
        env.async_step_send(td)


def test_a_closed_env_reopens_on_an_async_reset_of_every_sub_env(make_fork):
    env = make_fork(2, CountingEnv)
    env.reset()
    env.close()
    with pytest.raises(EnvClosedError, match="a partial reset"):
        env.async_reset_send(env_index=[0])
    env.async_reset_send()
    assert env.async_reset_recv(min_get=2)["observation"].flatten().tolist() == [0, 0]
    env.step(_actions(2))

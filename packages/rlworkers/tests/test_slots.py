"""WorkerPool with several slots per process, first-ready gathering and the forkserver method."""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import re

import pytest
from _pool_workers import echo_worker

from rlworkers import WorkerDiedError, WorkerPool, prepare_forkserver
from rlworkers._failures import WORKER_DIED
from rlworkers._pool import BAD_SLOTS, NOTHING_SENT

METHODS = [
    m for m in ("fork", "spawn", "forkserver") if m in multiprocessing.get_all_start_methods()
]
START_S = 120.0


@pytest.fixture(params=METHODS)
def method(request):
    return request.param


@pytest.fixture
def pools():
    started = []
    yield started
    for pool in started:
        pool.shutdown()


def _started(pools, method, slots, **kwargs):
    kwargs.setdefault("timeout", 30.0)
    pool = WorkerPool(
        [(echo_worker, ())] * len(slots),
        start_method=method,
        label="test worker",
        slots=slots,
        **kwargs,
    )
    pools.append(pool)
    assert pool.gather("start", timeout=START_S) == [None] * sum(slots)
    return pool


def test_slots_share_their_process_and_reply_each(pools, method):
    pool = _started(pools, method, [2, 1])
    assert (pool.num_workers, pool.num_slots) == (2, 3)
    pids = pool.request("pid", "pid")
    assert pids[0] == pids[1] != pids[2]
    assert pids[0] == pool.procs[0].pid and pids[2] == pool.procs[1].pid
    assert pool.request("echo", "echo", payloads={0: "a", 1: "b", 2: "c"}) == ["a", "b", "c"]
    pool.broadcast(b"p", "hot")  # the per-step path: flags only
    assert pool.gather("hot") == pids
    pool.broadcast(b"p", "hot", indices=[2])
    assert pool.gather("hot", [2]) == [pids[2]]


def test_gather_ready_returns_the_first_replies_and_keeps_the_rest(pools, method, tmp_path):
    # slot 1 answers only once the file exists, so it cannot be ready early (a 2 s sleep
    # against a 1.9 s bound failed when the others took that long on a loaded machine), and
    # a gather that waited for it would time out instead of returning
    gate = str(tmp_path / "gate")
    pool = _started(pools, method, [1, 1, 1])
    pool.send(0, "sleep", 0.0)
    pool.send(1, "wait_for_file", gate)
    pool.send(2, "sleep", 0.0)
    ready = pool.gather_ready("sleep", [0, 1, 2], min_ready=2)
    assert ready == {0: 0.0, 2: 0.0}
    assert pool.pending == [1]
    open(gate, "w").close()
    assert pool.gather_ready("sleep", [1]) == {1: gate}
    assert pool.pending == []
    with pytest.raises(
        RuntimeError,
        match=re.escape(NOTHING_SENT.format(label="test worker", index=0, phase="again")),
    ):
        pool.gather_ready("again", [0])


def test_error_of_one_slot_leaves_the_other_slots_of_its_process(pools, method):
    pool = _started(pools, method, [2])
    pool.send(0, "raise", "value")
    pool.send(1, "echo", 7)
    with pytest.raises(ValueError, match=re.escape("test worker 0 raised ValueError")):
        pool.gather("work", [0, 1])
    assert pool.alive
    assert pool.request("echo", "echo", payloads={0: 1, 1: 2}) == [1, 2]


def test_death_of_a_shared_process_names_its_slots(pools, method):
    pool = _started(pools, method, [1, 2])
    pid = pool.procs[1].pid
    with pytest.raises(WorkerDiedError) as info:
        pool.request("work", "exit", payloads={2: 3})
    assert str(info.value) == WORKER_DIED.format(
        who="test workers 1-2", pid=pid, phase="work", how="exit code 3", after="."
    )
    assert not pool.alive


def test_sync_of_some_slots_leaves_the_others_in_flight(pools, method):
    pool = _started(pools, method, [1, 1])
    pool.send(0, "sleep", 0.0)
    pool.send(1, "sleep", 0.5)
    pool.sync([0])
    assert pool.pending == [1]
    assert pool.gather("sleep", [1]) == [0.5]


def test_slot_counts_are_validated():
    with pytest.raises(ValueError, match=re.escape(BAD_SLOTS.format(workers=2, slots=[1]))):
        WorkerPool([(echo_worker, ())] * 2, start_method="fork", slots=[1])
    with pytest.raises(ValueError, match=re.escape(BAD_SLOTS.format(workers=1, slots=[0]))):
        WorkerPool([(echo_worker, ())], start_method="fork", slots=[0])


@pytest.mark.skipif("forkserver" not in METHODS, reason="no forkserver start method here")
def test_forkserver_preloads_the_pool_and_the_callers_modules(pools):
    prepare_forkserver(["json"])
    _started(pools, "forkserver", [1], preload=("rlspecs",))
    preload = multiprocessing.forkserver._forkserver._preload_modules
    assert {"rlworkers", "json"} <= set(preload)
    # a started server keeps its modules: asking again changes nothing
    prepare_forkserver(["json"])
    assert multiprocessing.forkserver._forkserver._preload_modules == preload

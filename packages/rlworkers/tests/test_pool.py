"""WorkerPool: the one worker protocol, its typed errors and its failure paths, under fork and spawn."""

from __future__ import annotations

import _thread
import gc
import multiprocessing
import os
import pickle
import re
import signal
import threading
import time

import pytest
from _pool_workers import (
    HoldsLock,
    StrRaises,
    TwoArgs,
    echo_worker,
    failing_setup_worker,
    hanging_setup_worker,
)

from rlworkers import (
    RemoteTraceback,
    WorkerDiedError,
    WorkerError,
    WorkerPool,
    WorkerRaisedError,
    WorkerTimeoutError,
)
from rlworkers._failures import INTERRUPTED, STOPPED, WORKER_DIED, WORKER_HUNG, WORKER_RAISED

METHODS = [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()]
START_S = 120.0  # generous: spawned workers import torch on a loaded 2-core machine


@pytest.fixture(params=METHODS)
def method(request):
    return request.param


@pytest.fixture
def pools():
    """Pools a test starts; each is shut down at teardown."""
    started = []
    yield started
    for pool in started:
        pool.shutdown()


def _pool(pools, method, n=2, target=echo_worker, **kwargs):
    kwargs.setdefault("timeout", 30.0)
    pool = WorkerPool([(target, ())] * n, start_method=method, label="test worker", **kwargs)
    pools.append(pool)
    return pool


def _started(pools, method, n=2, **kwargs):
    pool = _pool(pools, method, n, **kwargs)
    assert pool.gather("start", timeout=START_S) == [None] * n
    return pool


def test_request_replies_in_order_and_shutdown_is_idempotent(pools, method):
    pool = _started(pools, method, 3)
    assert pool.request("echo", "echo", payloads={2: "c", 0: "a"}) == ["c", "a"]
    assert pool.request("echo", "echo", 7) == [7, 7, 7]
    pool.broadcast(b"p", "pid")
    assert pool.gather("pid") == [proc.pid for proc in pool.procs]
    procs = list(pool.procs)
    pool.shutdown()
    pool.shutdown()
    assert not pool.alive
    assert all(proc._closed for proc in procs)
    with pytest.raises(WorkerError, match=re.escape("the test workers were stopped")):
        pool.request("echo", "echo", 1)
    assert "{label}" in STOPPED


def test_worker_exception_keeps_type_and_pool(pools, method):
    """A worker's exception is raised with its own type, after every reply is read."""
    pool = _started(pools, method)
    with pytest.raises(ValueError) as info:
        pool.request("work", "raise", payloads={0: "value", 1: "value"})
    text = str(info.value)
    assert text.startswith("test worker 0 raised ValueError during work: bad value")
    assert "Worker traceback:" in text and "_raise" in text
    assert isinstance(info.value.__cause__, ValueError)
    assert pool.request("echo", "echo", 1) == [1, 1]  # the pipes stayed in step
    assert "{traceback}" in WORKER_RAISED


def test_exception_whose_str_raises_is_passed_on(pools, method):
    """A broken ``__str__`` does not kill the worker; the error still names it."""
    pool = _started(pools, method, 1)
    with pytest.raises(WorkerRaisedError) as info:
        pool.request("work", "raise", "str")
    assert str(info.value).startswith(
        "test worker 0 raised StrRaises during work: <unprintable StrRaises object>"
    )
    assert isinstance(info.value.__cause__, StrRaises)
    assert info.value.type_name == "StrRaises" and info.value.index == 0
    assert pool.request("echo", "echo", 2) == [2]


@pytest.mark.parametrize("kind", ["twoargs", "lock"])
def test_exception_that_cannot_be_rebuilt_has_a_remote_traceback_cause(pools, method, kind):
    """Unpicklable here (or anywhere): the cause carries the type name, message and traceback."""
    pool = _started(pools, method, 1)
    with pytest.raises(WorkerRaisedError) as info:
        pool.request("work", "raise", kind)
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    name = {"twoargs": TwoArgs, "lock": HoldsLock}[kind].__name__
    assert cause.type_name == name
    assert cause.message == {"twoargs": "1/2", "lock": "holds a lock"}[kind]
    assert "Traceback (most recent call last)" in cause.traceback and "_raise" in cause.traceback
    assert pool.request("echo", "echo", 3) == [3]


def test_system_exit_in_a_worker_is_not_raised_as_such(pools, method):
    pool = _started(pools, method, 1)
    with pytest.raises(WorkerRaisedError, match="raised SystemExit during work"):
        pool.request("work", "raise", "exit")
    assert pool.request("echo", "echo", 4) == [4]


def test_values_that_do_not_travel_are_errors_naming_the_worker(pools, method):
    pool = _started(pools, method, 1)
    with pytest.raises(TypeError, match="test worker 0 raised TypeError during get"):
        pool.request("get", "unpicklable")
    with pytest.raises(WorkerError, match="test worker 0 answered get with a value that cannot"):
        pool.request("get", "load_fails")
    with pytest.raises(ValueError, match=re.escape("unknown worker command 'nope'; expected")):
        pool.request("nope", "nope")
    assert pool.request("echo", "echo", 5) == [5]


def test_worker_dying_mid_request_is_named_and_stops_the_pool(pools, method):
    pool = _started(pools, method)
    pid = pool.procs[1].pid
    with pytest.raises(WorkerDiedError) as info:
        pool.request("work", "exit", payloads={1: 3})
    err = info.value
    assert str(err) == WORKER_DIED.format(
        who="test worker 1", pid=pid, phase="work", how="exit code 3", after="."
    )
    assert (err.index, err.pid, err.exitcode, err.phase) == (1, pid, 3, "work")
    assert not pool.alive
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("test-worker")]


def test_worker_killed_while_idle_is_named_with_its_signal(pools, method):
    pool = _started(pools, method)
    pid = pool.procs[0].pid
    os.kill(pid, signal.SIGKILL)
    pool.procs[0].join(15)
    with pytest.raises(WorkerDiedError, match=re.escape(f"(pid {pid}) died unexpectedly")) as info:
        pool.request("work", "echo", 1)
    assert info.value.signal_name == "SIGKILL" and info.value.exitcode == -signal.SIGKILL
    assert "killed by SIGKILL" in str(info.value)
    assert not pool.alive


def test_timeout_fires_once_and_stops_every_worker(pools, method):
    pool = _started(pools, method, timeout=1.0, timeout_arg="worker_timeout")
    pids = [proc.pid for proc in pool.procs]
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError) as info:
        pool.request("work", "sleep", payloads={0: 0.0, 1: 3600})
    assert time.monotonic() - start < 15
    err = info.value
    assert str(err) == WORKER_HUNG.format(
        who="test worker 1",
        pid=pids[1],
        seconds=1.0,
        phase="work",
        timeout_arg="worker_timeout",
        after=".",
    )
    assert (err.index, err.seconds, err.phase) == (1, 1.0, "work")
    assert not [p for p in multiprocessing.active_children() if p.pid in pids]
    with pytest.raises(WorkerError, match="were stopped"):  # not a second timeout
        pool.gather("work")


def test_start_timeout_and_start_failure(pools, method):
    pool = _pool(pools, method, 1, target=hanging_setup_worker)
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError, match="did not answer within 3 s during start"):
        pool.gather("start", timeout=3.0)
    assert time.monotonic() - start < 20
    pool = _pool(pools, method, 1, target=failing_setup_worker)
    with pytest.raises(KeyError, match="test worker 0 raised KeyError during start"):
        pool.gather("start", timeout=START_S)


def test_interrupted_exchange_never_gives_a_stale_reply(pools, method):
    """Replies left unread by an exception in the main process are dropped before the next exchange."""
    pool = _started(pools, method)
    pool.send(0, "sleep", 0.5)
    pool.send(1, "echo", "stale")
    # the caller raised before gathering: the next exchange must not read those replies
    assert pool.request("echo", "echo", "fresh") == ["fresh", "fresh"]
    pool.broadcast(b"p", "pid")
    assert pool.request("echo", "echo", "again") == ["again", "again"]


@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt, however the tests were started: a process started in
    the background of a non-interactive shell ignores SIGINT, and then Python installs no
    handler, so ``_thread.interrupt_main`` does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_keyboard_interrupt_while_waiting_then_correct_replies(ctrl_c_raises, pools, method):
    pool = _started(pools, method)
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            pool.request("work", "sleep", 2.0)
    finally:
        timer.cancel()
    assert pool.alive
    assert pool.request("echo", "echo", "after") == ["after", "after"]


def test_interrupted_in_the_middle_of_a_message_stops_the_pool(pools, method):
    """When a reply may have been half read, the pool refuses to go on (never reads garbage)."""
    pool = _started(pools, method)
    conn = pool.conns[1]

    def interrupted_read():
        raise KeyboardInterrupt

    conn.recv_bytes = interrupted_read
    with pytest.raises(KeyboardInterrupt):
        pool.request("echo", "echo", 1)
    del conn.recv_bytes
    with pytest.raises(WorkerError, match="interrupted in the middle of a message during echo"):
        pool.request("echo", "echo", 2)
    assert not pool.alive
    assert "{phase}" in INTERRUPTED


def test_shutdown_from_another_thread_ends_a_wait(pools, method):
    """Closing a pool while its owner waits for a reply ends the wait with an error, no hang."""
    pool = _started(pools, method, 1)
    timer = threading.Timer(0.5, pool.shutdown)
    timer.start()
    start = time.monotonic()
    try:
        with pytest.raises(WorkerError, match="were stopped"):
            pool.request("work", "sleep", 3600)
    finally:
        timer.join()
    assert time.monotonic() - start < 20
    assert not pool.alive


def test_garbage_collected_pool_stops_its_workers(method):
    pool = WorkerPool([(echo_worker, ())], start_method=method, label="test worker")
    pool.gather("start", timeout=START_S)
    pid = pool.procs[0].pid
    del pool
    gc.collect()
    assert pid not in [p.pid for p in multiprocessing.active_children()]


def _resources():
    children = len(multiprocessing.active_children())
    fds = len(os.listdir("/proc/self/fd"))
    threads = threading.active_count()
    return children, fds, threads


def test_start_shutdown_cycles_leak_nothing(method):
    def cycle():
        pool = WorkerPool([(echo_worker, ())] * 2, start_method=method, label="test worker")
        pool.gather("start", timeout=START_S)
        pool.request("echo", "echo", 1)
        pool.shutdown()

    cycle()  # warm-up: lazily created singletons
    before = _resources()
    for _ in range(3):
        cycle()
    assert _resources() == before


def test_error_types_pickle_with_their_attributes():
    err = WorkerDiedError("gone", index=1, pid=2, phase="step", exitcode=-9)
    back = pickle.loads(pickle.dumps(err))
    assert (back.index, back.pid, back.phase, back.exitcode, str(back)) == (
        1,
        2,
        "step",
        -9,
        "gone",
    )
    back = pickle.loads(pickle.dumps(RemoteTraceback("E", "m", "tb")))
    assert (back.type_name, back.message, back.traceback) == ("E", "m", "tb")

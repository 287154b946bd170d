"""Starting workers: the start reply, its own timeout, and failures named for what they are
(a native crash, a death before the worker's code ran, a script without the main guard),
with tracebacks that name the user's file under every start method."""

from __future__ import annotations

import multiprocessing
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from _pool_workers import (
    _LoadFails,
    boxed_setup_worker,
    echo_worker,
    hanging_setup_worker,
    segfault_setup_worker,
    slow_setup_worker,
    start_value_worker,
)

from rlworkers import CloudpickleBox, WorkerDiedError, WorkerPool, WorkerTimeoutError
from rlworkers._failures import NOT_ENTERED, UNGUARDED_MAIN

ALL = [m for m in ("fork", "spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]
PICKLING = [m for m in ALL if m != "fork"]
START_S = 120.0  # generous: a spawned worker's imports on a loaded 2-core machine


@pytest.fixture
def pools():
    started = []
    yield started
    for pool in started:
        pool.shutdown()


def _pool(pools, method, workers, **kwargs):
    kwargs.setdefault("timeout", 30.0)
    kwargs.setdefault("start_timeout", START_S)
    pool = WorkerPool(workers, start_method=method, label="test worker", **kwargs)
    pools.append(pool)
    return pool


def _gone(pids, seconds=15.0) -> bool:
    """True once no process of ``pids`` is a live child of this process."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        live = {p.pid for p in multiprocessing.active_children()}
        if not live & set(pids) and not any(_running(pid) for pid in pids):
            return True
        time.sleep(0.05)
    return False


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def test_start_reply_is_the_value_of_the_start_handler(pools):
    pool = _pool(pools, "fork", [(start_value_worker, ())] * 2)
    pids = pool.gather("start")
    assert pids == [proc.pid for proc in pool.procs]
    assert pool.request("echo", "echo", 3) == [3, 3]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_short_timeout_never_cuts_a_slow_start_and_still_catches_a_hang(pools, method):
    pool = _pool(pools, method, [(slow_setup_worker, (1.0,))], timeout=0.5)
    assert pool.gather("start") == [None]  # start_timeout, not timeout
    start = time.monotonic()
    with pytest.raises(
        WorkerTimeoutError, match=re.escape("within 0.5 s during work (timeout=0.5)")
    ):
        pool.request("work", "sleep", 3600)
    assert time.monotonic() - start < 10


@pytest.mark.parametrize("method", ALL)
def test_hung_start_is_named_and_leaves_no_process(pools, method):
    pool = _pool(pools, method, [(hanging_setup_worker, ())] * 2, start_timeout=1.0)
    pids = [proc.pid for proc in pool.procs]
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError) as info:
        pool.gather("start")
    assert time.monotonic() - start < 1.0 + 5  # every silent worker is killed, none waited for
    err = info.value
    assert (err.phase, err.seconds, err.index) == ("start", 1.0, 0)
    assert "did not answer within 1 s during start (start_timeout=1)" in str(err)
    assert _gone(pids)
    assert not pool.alive


@pytest.mark.parametrize("method", ALL)
def test_native_crash_while_starting_is_named_with_its_signal(pools, method):
    pool = _pool(pools, method, [(echo_worker, ()), (segfault_setup_worker, ())])
    pids = [proc.pid for proc in pool.procs]
    with pytest.raises(WorkerDiedError) as info:
        pool.gather("start")
    err = info.value
    assert (err.index, err.phase, err.signal_name) == (1, "start", "SIGSEGV")
    assert f"test worker 1 (pid {pids[1]}) died unexpectedly during start (killed by SIGSEGV)" in (
        str(err)
    )
    assert _gone(pids)


def _raise_in_user_code():
    def setup():
        raise ValueError("bad task")  # the line the traceback must show

    return setup


@pytest.mark.parametrize("method", ALL)
def test_traceback_of_a_function_sent_by_value_names_its_file_and_line(pools, method):
    setup = _raise_in_user_code()  # a closure: cloudpickle sends it by value
    pool = _pool(pools, method, [(boxed_setup_worker, (CloudpickleBox(setup),))])
    with pytest.raises(ValueError, match="bad task") as info:
        pool.gather("start")
    line = setup.__code__.co_firstlineno + 1
    assert f'File "{__file__}", line {line}, in setup' in str(info.value)
    assert "<dynamic-code>" not in str(info.value)


@pytest.mark.parametrize("method", PICKLING)
def test_death_before_the_worker_code_runs_says_so(pools, method):
    pool = _pool(pools, method, [(echo_worker, (_LoadFails(),))])
    with pytest.raises(WorkerDiedError, match="exit code 1") as info:
        pool.gather("start")
    assert NOT_ENTERED.split("(")[0] in str(info.value)


UNGUARDED_SCRIPT = textwrap.dedent(
    """
    from rlworkers import WorkerPool, serve


    def work(conn):
        serve(conn, lambda: {{}})


    pool = WorkerPool([(work, ())], start_method={method!r}, label="demo worker", start_timeout=60)
    try:
        pool.gather("start")
    except Exception as err:
        print(type(err).__name__, err.exitcode, err)
    """
)


@pytest.mark.parametrize("method", PICKLING)
def test_script_without_main_guard_is_told_to_add_it(tmp_path, method):
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED_SCRIPT.format(method=method))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("WorkerDiedError 71 demo worker 0 (pid ")
    assert f"imported the main module ({script}) again, as {method} workers do" in out.stdout
    assert 'if __name__ == "__main__":' in out.stdout
    assert UNGUARDED_MAIN.splitlines()[-1] in out.stdout
    # the worker's own stderr says it in a line, not in multiprocessing's long traceback
    assert "bootstrapping phase" not in out.stderr
    assert len(out.stderr.splitlines()) <= 2


def test_guard_exit_status_is_distinct_from_other_exits():
    from rlworkers._loop import EXIT_ORPHANED
    from rlworkers._protocol import EXIT_UNGUARDED

    assert EXIT_UNGUARDED not in (0, 1, EXIT_ORPHANED)
    assert os.WEXITSTATUS(EXIT_UNGUARDED << 8) == EXIT_UNGUARDED
    assert signal.SIGSEGV != EXIT_UNGUARDED

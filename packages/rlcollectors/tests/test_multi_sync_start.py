"""MultiSyncDataCollector start-up: the envs are built in the workers only, start-up has its
own timeout, and a worker that hangs, crashes natively or raises while starting is named (with
the user's file in its traceback), leaving no process behind; a script without the main guard
is told to add it."""

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

from rlcollectors import MultiSyncDataCollector
from rlmocks import CountingEnv
from rlworkers import WorkerDiedError, WorkerTimeoutError

pytestmark = pytest.mark.filterwarnings("error")
METHODS = [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()]
LABEL = "MultiSyncDataCollector worker"


def _left() -> list:
    return [p for p in multiprocessing.active_children() if p.name.startswith("MultiSync")]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _pids(path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def hanging_env(record: str) -> CountingEnv:
    """Records its pid, then never finishes building (a licence server that never answers)."""
    with open(record, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(3600)
    return CountingEnv()


def crashing_env() -> CountingEnv:
    """Crashes natively while being built (a segfault in a simulator binding)."""
    os.kill(os.getpid(), signal.SIGSEGV)
    return CountingEnv()


def slow_env(record: str, delay: float = 1.0) -> CountingEnv:
    """Records its pid and takes ``delay`` seconds to build."""
    with open(record, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(delay)
    return CountingEnv()


class StuckEnv(CountingEnv):
    def _step(self, tensordict):
        time.sleep(3600)
        return super()._step(tensordict)


def slow_stuck_env() -> CountingEnv:
    time.sleep(1.0)
    return StuckEnv()


@pytest.mark.parametrize("method", METHODS)
def test_hanging_env_constructor_fails_within_start_timeout_leaving_nothing(tmp_path, method):
    record = tmp_path / "pids"
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError) as info:
        MultiSyncDataCollector(
            [hanging_env],
            frames_per_batch=4,
            create_env_kwargs={"record": str(record)},
            start_timeout=2.0,
            mp_start_method=method,
        )
    assert time.monotonic() - start < 2.0 + 5
    err = info.value
    assert (err.index, err.phase, err.seconds) == (0, "start", 2.0)
    assert f"{LABEL} 0 (pid {err.pid}) did not answer within 2 s during start" in str(err)
    assert "(start_timeout=2)" in str(err)
    assert not _left()
    assert not [pid for pid in _pids(record) if _running(pid)]


@pytest.mark.parametrize("method", METHODS)
def test_native_crash_in_env_constructor_is_named_and_main_process_lives(method):
    with pytest.raises(WorkerDiedError) as info:
        MultiSyncDataCollector(
            [CountingEnv, crashing_env], frames_per_batch=4, mp_start_method=method
        )
    err = info.value
    assert (err.index, err.phase, err.signal_name) == (1, "start", "SIGSEGV")
    assert re.search(
        rf"{LABEL} 1 \(pid \d+\) died unexpectedly during start \(killed by SIGSEGV\)", str(err)
    )
    assert not _left()


def test_short_timeout_never_cuts_a_slow_start_and_still_catches_a_hang():
    collector = MultiSyncDataCollector(
        [slow_stuck_env], frames_per_batch=4, timeout=0.5, mp_start_method="fork"
    )  # 1 s to build its env: past timeout, within start_timeout
    try:
        with pytest.raises(WorkerTimeoutError, match=re.escape("during collect (timeout=0.5)")):
            next(iter(collector))
    finally:
        collector.shutdown()
    assert not _left()


@pytest.mark.parametrize("method", METHODS)
def test_envs_are_built_in_the_workers_only(tmp_path, method):
    record = tmp_path / "pids"
    collector = MultiSyncDataCollector(
        [slow_env, slow_env],
        frames_per_batch=4,
        total_frames=4,
        create_env_kwargs={"record": str(record), "delay": 0.0},
        mp_start_method=method,
    )
    try:
        assert [batch.numel() for batch in collector] == [4]
        workers = {proc.pid for proc in collector._pool.procs}
    finally:
        collector.shutdown()
    built = _pids(record)
    assert len(built) == 2 and set(built) == workers and os.getpid() not in built


def _raising_factory():
    def make_env():
        raise ValueError("no licence")  # the line the traceback must show

    return make_env


def test_worker_traceback_names_the_users_file_under_spawn():
    make_env = _raising_factory()  # a closure: sent by value
    with pytest.raises(ValueError, match="no licence") as info:
        MultiSyncDataCollector([make_env], frames_per_batch=4, mp_start_method="spawn")
    line = make_env.__code__.co_firstlineno + 1
    assert f'File "{__file__}", line {line}, in make_env' in str(info.value)


UNGUARDED = textwrap.dedent(
    """
    from rlcollectors import MultiSyncDataCollector
    from rlmocks import CountingEnv

    try:
        MultiSyncDataCollector([CountingEnv], frames_per_batch=4, mp_start_method="spawn")
    except Exception as err:
        print(type(err).__name__, err)
    """
)


def test_script_without_main_guard_is_told_to_add_it(tmp_path):
    script = tmp_path / "collect.py"
    script.write_text(UNGUARDED)
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"WorkerDiedError {LABEL} 0 (pid ")
    assert f"imported the main module ({script}) again" in out.stdout
    assert 'if __name__ == "__main__":' in out.stdout

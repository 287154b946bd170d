"""Reliability of ParallelEnv's workers: errors, deaths, hangs, leaks, shutdown."""

from __future__ import annotations

import multiprocessing
import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
import torch
from batched_test_envs import DyingCountingEnv, FailingCountingEnv, HangingCountingEnv
from tensordict import TensorDict

from rlbatched import ParallelEnv
from rlmocks import CountingEnv
from rlworkers import WorkerDiedError, WorkerTimeoutError
from rlworkers._failures import WORKER_DIED, WORKER_HUNG, WORKER_RAISED
from rlworkers._protocol import CAN_SPIN, acquire_briefly


def _action(env):
    return TensorDict(
        {"action": torch.ones(*env.batch_size, 1, dtype=torch.int8)}, batch_size=env.batch_size
    )


@pytest.mark.parametrize("phase", ["step", "reset"])
def test_worker_exception_names_worker_and_keeps_original(make_fork, phase):
    """An exception in a sub-env's _step/_reset is re-raised with its type, message and traceback."""
    env = make_fork(2, FailingCountingEnv, create_env_kwargs=[{}, {"fail_on": phase}])
    env.start()
    with pytest.raises(
        ValueError,
        match=re.escape(f"ParallelEnv worker 1 raised ValueError during {phase}: boom in _{phase}"),
    ) as info:
        env.step(_action(env)) if phase == "step" else env.reset()
    text = str(info.value)
    assert "Worker traceback:" in text and f"in _{phase}" in text
    assert isinstance(info.value.__cause__, ValueError)
    assert not env.is_closed  # the other worker answered: the env stays usable
    env.close()
    assert env.is_closed
    assert "{type_name}" in WORKER_RAISED


def test_worker_exception_under_spawn(make_kind):
    """The same error path works when the worker was started by spawn."""
    env = make_kind("spawn", 2, FailingCountingEnv, create_env_kwargs=[{}, {"fail_on": "reset"}])
    with pytest.raises(
        ValueError, match=re.escape("ParallelEnv worker 1 raised ValueError during reset")
    ):
        env.reset()
    env.close()


def test_exception_while_building_env_is_raised_at_start(make_fork):
    """A sub-env that cannot be built makes start() raise, naming the worker, and leaves the env closed."""

    def make(**kwargs):
        raise KeyError("no such task")

    env = make_fork(1, make)  # builds nothing in this process: does not raise
    with pytest.raises(
        KeyError, match=re.escape("ParallelEnv worker 0 raised KeyError during start")
    ):
        env.start()
    assert env.is_closed


def test_worker_dying_mid_step_raises_worker_died_error(make_fork):
    """A worker that dies while stepping surfaces as WorkerDiedError naming it; the env reopens."""
    env = make_fork(2, [CountingEnv, lambda: DyingCountingEnv(die_at=2)])
    env.reset()
    env.step(_action(env))
    pid = env._workers[1].pid
    with pytest.raises(
        WorkerDiedError,
        match=re.escape(
            f"ParallelEnv worker 1 (pid {pid}) died unexpectedly during step (exit code 3)"
        ),
    ) as info:
        env.step(_action(env))
    assert isinstance(info.value, RuntimeError) and info.value.exitcode == 3
    assert env.is_closed
    env.close()
    assert env.reset().shape == (2,)
    assert "{how}" in WORKER_DIED


def test_hanging_worker_raises_after_timeout(make_fork):
    """A worker that does not answer within worker_timeout raises RuntimeError, never hangs."""
    env = make_fork(
        2, HangingCountingEnv, create_env_kwargs=[{}, {"hang": True}], worker_timeout=1.0
    )
    env.reset()
    pid = env._workers[1].pid
    with pytest.raises(
        WorkerTimeoutError,
        match=re.escape(
            f"ParallelEnv worker 1 (pid {pid}) did not answer within 1 s during step "
            "(worker_timeout=1); the env was closed and reopens on the next reset()."
        ),
    ):
        env.step(_action(env))
    assert env.is_closed
    assert not any(p.pid == pid for p in multiprocessing.active_children())
    assert "{timeout_arg}" in WORKER_HUNG


def _resources():
    children = len(multiprocessing.active_children())
    fds = len(os.listdir("/proc/self/fd"))
    # shared memory this process maps (buffers, semaphores); /dev/shm itself is machine-wide,
    # so other programs' segments would come and go in a listing of it
    with open("/proc/self/maps") as maps:
        shm = sorted({line.split()[-1] for line in maps if "/dev/shm/" in line})
    return children, fds, shm


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_create_rollout_close_cycles_leak_nothing(method):
    """Many create/rollout/close cycles leave no child process, fd or shared-memory segment."""

    def cycle():
        env = ParallelEnv(2, CountingEnv, mp_start_method=method)
        env.rollout(3)
        env.close()

    cycle()  # warm-up: lazily created singletons (resource sharer, ...)
    before = _resources()
    for _ in range(5):
        cycle()
    assert _resources() == before


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_garbage_collected_env_stops_its_workers(method):
    """Dropping an open env without close() stops its workers and gives threads back."""
    import gc

    threads = torch.get_num_threads()
    env = ParallelEnv(2, CountingEnv, mp_start_method=method)
    env.reset()
    pids = [p.pid for p in env._workers]
    del env
    gc.collect()
    assert not any(p.pid in pids for p in multiprocessing.active_children())
    assert torch.get_num_threads() == threads


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_interpreter_exits_cleanly_with_open_env(method):
    """A script that leaves a ParallelEnv open (one mid-step) exits with status 0, no traceback."""
    script = textwrap.dedent(
        f"""
        from rlbatched import ParallelEnv
        from rlmocks import CountingEnv
        if __name__ == "__main__":
            env = ParallelEnv(2, CountingEnv, mp_start_method={method!r})
            env.rollout(2)
            pending = ParallelEnv(1, CountingEnv, mp_start_method={method!r})
            pending.reset()
            pending._pool.broadcast(b"s", "step")  # a step whose reply is never read
            print("done")
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "done"
    assert "Traceback" not in proc.stderr


@pytest.mark.skipif(not CAN_SPIN, reason="os.sched_yield is POSIX-only")
def test_acquire_briefly_takes_a_post_or_gives_up_after_its_window():
    semaphore = multiprocessing.get_context("fork").Semaphore(0)
    start = time.monotonic()
    assert not acquire_briefly(semaphore, 0.2)  # nothing posted: gives up after the window
    assert 0.2 <= time.monotonic() - start < 5.0
    semaphore.release()
    start = time.monotonic()
    assert acquire_briefly(semaphore, 30.0)  # posted: taken at once
    assert time.monotonic() - start < 5.0
    assert not semaphore.acquire(False)  # the post was consumed
    assert not acquire_briefly(semaphore, 0.0)  # no window: one try only

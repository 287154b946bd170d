"""ParallelEnv start-up: the main process never runs a sub-env's code (the workers report the
specs, or an EnvCreator has them), reading a spec starts the workers, start-up has its own
timeout, and a sub-env that hangs, crashes natively or raises while being built is named, the
main process living on with no worker left; a script without the main guard is told to add it,
and worker tracebacks name the user's file under every start method."""

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
import torch
from batched_test_envs import SlowCountingEnv
from tensordict import TensorDict

from rlbatched import ParallelEnv
from rlbatched._metadata import SCHEMA_ERROR
from rlcore import EnvCreator
from rlmocks import CountingEnv
from rlspecs import Unbounded
from rlworkers import WorkerDiedError, WorkerTimeoutError

ALL = [m for m in ("fork", "spawn", "forkserver") if m in multiprocessing.get_all_start_methods()]
PICKLING = [m for m in ALL if m != "fork"]


@pytest.fixture
def envs():
    """ParallelEnvs a test builds; each is closed at teardown."""
    built = []
    yield built
    for env in built:
        env.close()


def _env(envs, *args, **kwargs):
    env = ParallelEnv(*args, **kwargs)
    envs.append(env)
    return env


def _left() -> list:
    return [p for p in multiprocessing.active_children() if p.name.startswith("ParallelEnv")]


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False


def _gone(pids, seconds: float = 10.0) -> bool:
    """True once none of ``pids`` runs (forkserver workers are reaped by their server)."""
    deadline = time.monotonic() + seconds
    while any(_running(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _pids(path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _ones(env):
    return TensorDict({"action": torch.ones(*env.batch_size, 1, dtype=torch.int8)}, env.batch_size)


# ---------------------------------------------------------------------- sub-envs of these tests
def recording_env(record: str, delay: float = 0.0, step_delay: float | None = None):
    """Appends its pid to the file ``record``, takes ``delay`` s to build, then is a
    CountingEnv (whose steps take ``step_delay`` s, if given)."""
    with open(record, "a") as f:
        f.write(f"{os.getpid()}\n")
    time.sleep(delay)
    return CountingEnv() if step_delay is None else SlowCountingEnv(delay=step_delay)


def crashing_env():
    """Crashes natively while being built (a segfault in a simulator binding)."""
    os.kill(os.getpid(), signal.SIGSEGV)


class SizedObsEnv(CountingEnv):
    """A CountingEnv with an extra observation ``"extra"`` of shape ``(size,)``."""

    def __init__(self, size: int = 1, **kwargs):
        super().__init__(**kwargs)
        spec = self.full_observation_spec.clone()
        spec["extra"] = Unbounded(size)
        self.full_observation_spec = spec
        self.size = size

    def _step(self, tensordict):
        return super()._step(tensordict).set("extra", torch.zeros(self.size))

    def _reset(self, tensordict=None, **kwargs):
        return super()._reset(tensordict, **kwargs).set("extra", torch.zeros(self.size))


# ---------------------------------------------------------------------- metadata from workers
@pytest.mark.parametrize("method", ALL)
def test_main_process_never_builds_a_sub_env(envs, tmp_path, method):
    record = tmp_path / "pids"
    env = _env(envs, 2, recording_env, {"record": str(record)}, mp_start_method=method)
    assert not record.exists()  # constructing builds nothing
    assert env.observation_spec["observation"].shape == (2, 1)  # the workers' report
    workers = [proc.pid for proc in env._workers]
    assert sorted(_pids(record)) == sorted(workers)  # each sub-env built once, in its worker
    assert os.getpid() not in _pids(record)
    assert env.rollout(2).batch_size == (2, 2)


def test_reading_a_spec_starts_the_workers_and_repr_does_not(envs):
    env = _env(envs, 2, CountingEnv, mp_start_method="fork")
    assert repr(env) == "ParallelEnv(num_workers=2, not started)"
    assert env._pool is None and env.is_closed
    assert env.batch_size == (2,)
    assert env._pool.alive and not env.is_closed
    assert repr(env) == "ParallelEnv(num_workers=2, batch_size=(2,), device=None)"


def test_step_before_any_start_starts_the_workers(envs):
    env = _env(envs, 2, CountingEnv, mp_start_method="fork")
    td = TensorDict({"action": torch.ones(2, 1, dtype=torch.int8)}, [2])
    assert env.step(td)["next", "observation"].tolist() == [[1], [1]]


def test_env_creator_metadata_start_no_worker(envs):
    creator = EnvCreator(CountingEnv)
    env = _env(envs, 2, creator, mp_start_method="fork")
    assert env.observation_spec["observation"].shape == (2, 1)
    assert env.batch_size == (2,) and env._pool is None  # known without starting
    assert env.rollout(2, policy=lambda td: td.update(_ones(env)))[
        "next", "observation"
    ].tolist() == [[[1], [2]], [[1], [2]]]


def test_metadata_from_workers_starts_them_at_construction(envs):
    env = _env(envs, 2, CountingEnv, mp_start_method="fork", metadata_from_workers=True)
    assert env._pool is not None and env._pool.alive


def test_workers_whose_specs_differ_by_kwargs_are_stacked_lazily(envs):
    env = _env(envs, 2, SizedObsEnv, [{"size": 1}, {"size": 3}], mp_start_method="fork")
    rollout = env.rollout(2)
    assert env._lazy_stack and env.share_individual_td
    assert rollout[0]["extra"].shape == (2, 1) and rollout[1]["extra"].shape == (2, 3)


def test_dense_buffers_refuse_workers_with_different_specs(envs):
    env = _env(
        envs,
        2,
        SizedObsEnv,
        [{"size": 1}, {"size": 3}],
        share_individual_td=False,
        mp_start_method="fork",
    )
    detail = "key ('full_observation_spec', 'extra'): ('Unbounded', (3,), torch.float32, " + (
        "device(type='cpu')) vs ('Unbounded', (1,), torch.float32, device(type='cpu'))"
    )
    with pytest.raises(ValueError, match=re.escape(SCHEMA_ERROR.format(index=1, detail=detail))):
        env.reset()
    assert env.is_closed and not _left()


# ---------------------------------------------------------------------- failures while starting
@pytest.mark.parametrize("method", ALL)
def test_hanging_constructor_fails_within_start_timeout_leaving_nothing(envs, tmp_path, method):
    record = tmp_path / "pids"
    env = _env(
        envs,
        1,
        recording_env,
        {"record": str(record), "delay": 3600},
        start_timeout=2.0,
        worker_timeout=0.5,
        mp_start_method=method,
    )
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError) as info:
        env.observation_spec  # noqa: B018 - reading it starts the workers
    assert time.monotonic() - start < 2.0 + 5
    err = info.value
    assert (err.index, err.phase, err.seconds) == (0, "start", 2.0)
    assert "ParallelEnv worker 0 (pid" in str(err)
    assert "did not answer within 2 s during start (start_timeout=2)" in str(err)
    assert env.is_closed and env.shared_tensordict_parent is None
    assert not _left()
    assert _gone(_pids(record) + [err.pid])


@pytest.mark.parametrize("method", ALL)
def test_native_crash_in_constructor_is_named_and_main_process_lives(envs, method):
    env = _env(envs, 2, [CountingEnv, crashing_env], mp_start_method=method)
    with pytest.raises(WorkerDiedError) as info:
        env.reset()
    err = info.value  # raised here: this process lived on
    assert (err.index, err.phase, err.signal_name) == (1, "start", "SIGSEGV")
    assert re.search(
        r"ParallelEnv worker 1 \(pid \d+\) died unexpectedly during start \(killed by SIGSEGV\)",
        str(err),
    )
    assert env.is_closed and env.shared_tensordict_parent is None and not _left()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_short_worker_timeout_never_cuts_a_slow_start_and_catches_a_hung_step(
    envs, tmp_path, method
):
    env = _env(
        envs,
        1,
        recording_env,
        {"record": str(tmp_path / "pids"), "delay": 1.0, "step_delay": 3600},
        worker_timeout=0.5,
        mp_start_method=method,
    )
    env.reset()  # 1 s of building (and imports): past worker_timeout, within start_timeout
    start = time.monotonic()
    with pytest.raises(WorkerTimeoutError, match=re.escape("during step (worker_timeout=0.5)")):
        env.step(_ones(env))
    assert time.monotonic() - start < 5
    assert env.is_closed and not _left()


def _faulty_class():
    class FaultyEnv(CountingEnv):
        def _step(self, tensordict):
            raise ValueError("sensor unplugged")  # the line the traceback must show

    return FaultyEnv  # defined in a function: sent by value under spawn and forkserver


@pytest.mark.parametrize("method", ALL)
def test_worker_traceback_names_the_users_file_and_line(envs, method):
    faulty = _faulty_class()
    env = _env(envs, 1, faulty, mp_start_method=method)
    env.reset()
    with pytest.raises(ValueError, match="sensor unplugged") as info:
        env.step(_ones(env))
    line = faulty._step.__code__.co_firstlineno + 1
    assert f'File "{__file__}", line {line}, in _step' in str(info.value)
    assert "<dynamic-code>" not in str(info.value)


UNGUARDED = textwrap.dedent(
    """
    from rlbatched import ParallelEnv
    from rlmocks import CountingEnv

    env = ParallelEnv(1, CountingEnv, mp_start_method={method!r})
    try:
        env.rollout(2)
    except Exception as err:
        print(type(err).__name__, err)
    """
)


@pytest.mark.parametrize("method", PICKLING)
def test_script_without_main_guard_is_told_to_add_it(tmp_path, method):
    script = tmp_path / "train.py"
    script.write_text(UNGUARDED.format(method=method))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("WorkerDiedError ParallelEnv worker 0 (pid ")
    assert f"imported the main module ({script}) again, as {method} workers do" in out.stdout
    assert "the env was closed and reopens on the next reset()." in out.stdout
    assert 'if __name__ == "__main__":' in out.stdout
    assert "bootstrapping phase" not in out.stderr

"""Failure paths that must never give silently wrong data: bad inputs, closed envs, interrupted
steps, lost workers, orphaned workers, start-up hangs and odd exceptions.

Each behaviour runs on SerialEnv where it applies and on ParallelEnv under fork and spawn.
"""

from __future__ import annotations

import _thread
import gc
import multiprocessing
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import threading
import time

import pytest
import torch
from batched_test_envs import (
    BadStartCountingEnv,
    FailingCountingEnv,
    GainEnv,
    ObsEchoEnv,
    OddError,
    SlowCountingEnv,
    StartStateEnv,
)
from tensordict import TensorDict

from rlbatched import ParallelEnv
from rlbatched._batched_base import CLOSED_ERROR, PARTIAL_RESET_CLOSED_ERROR
from rlcore import EnvClosedError
from rlcore.step_inputs import BAD_DTYPE, BAD_SHAPE, MISSING_ACTION
from rlmocks import CountingEnv
from rlworkers import RemoteTraceback, WorkerDiedError, WorkerRaisedError, WorkerTimeoutError

PARALLEL = [m for m in ("fork", "spawn") if m in multiprocessing.get_all_start_methods()]
TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(params=["serial", *PARALLEL])
def kind(request):
    return request.param


@pytest.fixture(params=PARALLEL)
def method(request):
    return request.param


def _cls_name(kind: str) -> str:
    return "SerialEnv" if kind == "serial" else "ParallelEnv"


def _action(env, value=1, dtype=torch.int8, shape=None):
    shape = (*env.batch_size, 1) if shape is None else shape
    return TensorDict({"action": torch.full(shape, value, dtype=dtype)}, batch_size=env.batch_size)


def _dead(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie counts as exited)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


def _wait_dead(pids, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if all(_dead(pid) for pid in pids):
            return True
        time.sleep(0.1)
    return False


def _run_and_read_pids(script: str) -> list[int]:
    """Run ``script``, read the worker pids it prints, and wait for it to die.

    Its stdout is not read to EOF: orphaned workers would hold it open.
    """
    with tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=stderr, text=True
        )
        try:
            line = proc.stdout.readline()
            proc.wait(timeout=300)
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.stdout.close()
        stderr.seek(0)
        pids = [int(pid) for pid in line.split()]
        assert len(pids) == 2, stderr.read()
    return pids


# ---------------------------------------------------------------------- 1-3: inputs
def test_missing_action_raises_before_any_worker_steps(make_kind, kind):
    env = make_kind(kind, 2, CountingEnv)
    env.reset()
    env.step(_action(env))
    with pytest.raises(KeyError) as info:
        env.step(TensorDict({}, batch_size=[2]))
    assert str(info.value).strip("\"'") == MISSING_ACTION.format(
        where=f"{_cls_name(kind)}.step", key="action", shape=(2, 1), dtype=torch.int8
    )
    # nothing reached a worker: the next step is the second one, not the third
    assert env.step(_action(env))["next", "observation"].tolist() == [[2], [2]]


@pytest.mark.parametrize("shape", [(2, 3), (2,), (2, 1, 1)])
def test_wrong_action_shape_names_key_and_shapes(make_kind, kind, shape):
    env = make_kind(kind, 2, CountingEnv)
    env.reset()
    with pytest.raises(ValueError) as info:
        env.step(_action(env, shape=shape))
    assert str(info.value) == BAD_SHAPE.format(
        where=f"{_cls_name(kind)}.step", role="action", key="action", got=shape, expected=(2, 1)
    )
    assert env.step(_action(env))["next", "observation"].tolist() == [[1], [1]]


def test_unrepresentable_dtype_raises_and_representable_one_agrees(make_kind, kind):
    env = make_kind(kind, 2, CountingEnv)
    env.reset()
    with pytest.raises(ValueError) as info:
        env.step(_action(env, 300, torch.int64))
    assert str(info.value) == BAD_DTYPE.format(
        where=f"{_cls_name(kind)}.step",
        role="action",
        key="action",
        got=torch.int64,
        dtype=torch.int8,
        why="min 300, max 300; torch.int8 holds -128 to 127",
    )
    with pytest.raises(ValueError, match="non-integer values"):
        env.step(_action(env, 0.5, torch.float32))
    # values that fit are accepted whatever their dtype, and step the same in both classes
    out = env.step(_action(env, 1, torch.int64))
    assert out["next", "observation"].tolist() == [[1], [1]]


def test_absent_state_is_never_replaced_by_an_earlier_value(make_kind, kind):
    """A state entry the caller leaves out is absent for the sub-env, as in SerialEnv."""
    env = make_kind(kind, 2, GainEnv)
    td = env.reset()
    td["gain"] = torch.full((2, 1), 3.0)
    td["action"] = torch.ones(2, 1)
    assert env.step(td)["next", "observation"].tolist() == [[3.0], [3.0]]
    bare = TensorDict({"observation": torch.zeros(2, 1), "action": torch.ones(2, 1)}, [2])
    with pytest.raises(KeyError, match="gain"):
        env.step(bare)  # the old gain (3.0) must not be used
    # observations too: the sub-env does not see the previous step's observation
    with pytest.raises(KeyError, match="observation"):
        env.step(TensorDict({"gain": torch.ones(2, 1), "action": torch.ones(2, 1)}, [2]))
    with pytest.raises(ValueError, match=re.escape("state 'gain' has shape (2,), expected (2, 1)")):
        env.step(td.set("gain", torch.ones(2)))


def test_inputs_left_out_step_after_step_stay_absent(make_kind, kind):
    """The same entries left out several steps running (flag-only steps in ParallelEnv, the
    left-out keys kept by each worker) stay absent; given again, they are seen again."""
    env = make_kind(kind, 2, ObsEchoEnv)
    env.reset()
    action = torch.ones(2, 1)

    def step(obs=None):
        td = TensorDict({"action": action}, [2])
        if obs is not None:
            td["observation"] = torch.full((2, 1), float(obs))
        return env.step(td)["next", "observation"].flatten().tolist()

    assert step(5) == [6.0, 6.0]
    assert step() == [-1.0, -1.0]  # the 5 still in the shared buffer is not used ...
    assert step() == [-1.0, -1.0]  # ... nor on the next steps
    assert step(7) == [8.0, 8.0]
    assert step(9) == [10.0, 10.0]
    assert step() == [-1.0, -1.0]
    if kind != "serial":  # the asynchronous path keeps each sub-env's own left-out keys
        env.async_step_send(TensorDict({"action": action[:1], "env_index": torch.tensor([0])}, [1]))
        with_obs = TensorDict(
            {
                "action": action[:1],
                "observation": torch.full((1, 1), 2.0),
                "env_index": torch.tensor([1]),
            },
            [1],
        )
        env.async_step_send(with_obs)
        out = env.async_step_recv(min_get=2)
        assert out["next", "observation"].flatten().tolist() == [-1.0, 3.0]
        env.async_step_send(out.exclude("next", "observation"))
        assert env.async_step_recv(min_get=2)["next", "observation"].flatten().tolist() == [
            -1.0,
            -1.0,
        ]


def test_reset_input_left_out_is_absent_for_the_sub_env(make_kind, kind):
    env = make_kind(kind, 2, StartStateEnv)
    out = env.reset(TensorDict({"start": torch.tensor([[3.0], [5.0]])}, [2]))
    assert out["observation"].tolist() == [[3.0], [5.0]]
    with pytest.raises(KeyError, match="start"):
        env.reset(TensorDict({}, [2]))  # not the 3.0 and 5.0 given before


# ---------------------------------------------------------------------- 4: closed envs
def test_step_after_close_raises_until_reset(make_kind, kind):
    env = make_kind(kind, 2, CountingEnv)
    td = env.reset()
    env.step(_action(env))
    env.close()
    env.close()
    message = re.escape(CLOSED_ERROR.format(cls=_cls_name(kind)))
    with pytest.raises(EnvClosedError, match=message):
        env.step(_action(env))
    with pytest.raises(EnvClosedError, match=message):
        env.rollout(3, auto_reset=False, tensordict=td.set("action", _action(env)["action"]))
    partial = TensorDict({"_reset": torch.tensor([[True], [False]])}, [2])
    with pytest.raises(
        EnvClosedError, match=re.escape(PARTIAL_RESET_CLOSED_ERROR.format(cls=_cls_name(kind)))
    ):
        env.reset(partial)
    assert env.is_closed
    assert env.reset()["observation"].tolist() == [[0], [0]]
    assert env.step(_action(env))["next", "observation"].tolist() == [[1], [1]]
    assert isinstance(EnvClosedError("x"), RuntimeError)


def test_a_new_env_still_starts_on_its_first_step(make_kind, kind):
    env = make_kind(kind, 2, CountingEnv)
    assert env.step(_action(env))["next", "observation"].tolist() == [[1], [1]]


# ---------------------------------------------------------------------- 5: interrupted steps
@pytest.fixture
def ctrl_c_raises():
    """SIGINT raises KeyboardInterrupt, however the tests were started: a process started in
    the background of a non-interactive shell ignores SIGINT, and then Python installs no
    handler, so ``_thread.interrupt_main`` does nothing."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_keyboard_interrupt_during_a_step_gives_no_stale_data(ctrl_c_raises, make_kind, method):
    env = make_kind(method, 2, SlowCountingEnv, create_env_kwargs={"delay": 1.0})
    env.reset()
    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            env.step(_action(env))
    finally:
        timer.cancel()
    # the interrupted step ran in the workers (count 1); this one is the second
    assert env.step(_action(env))["next", "observation"].tolist() == [[2], [2]]
    assert env.step(_action(env))["next", "observation"].tolist() == [[3], [3]]


def test_exception_between_sending_and_reading_gives_no_stale_data(make_kind, method, monkeypatch):
    env = make_kind(method, 2, CountingEnv)
    env.reset()
    pool = env._pool
    real_gather = pool.gather

    def interrupted(*args, **kwargs):
        monkeypatch.setattr(pool, "gather", real_gather)
        raise RuntimeError("interrupted")

    monkeypatch.setattr(pool, "gather", interrupted)
    with pytest.raises(RuntimeError, match="interrupted"):
        env.step(_action(env))
    out = env.step(_action(env, 2))  # the step above ran: 1 + 2
    assert out["next", "observation"].tolist() == [[3], [3]]
    env.close()  # closing after an interruption does not hang


# ---------------------------------------------------------------------- 6: lost workers
def test_worker_killed_while_idle_is_named_and_env_reopens(make_kind, method):
    env = make_kind(method, 3, CountingEnv, num_processes=3)  # worker i runs sub-env i
    env.reset()
    pids = [proc.pid for proc in env._workers]
    os.kill(pids[1], signal.SIGKILL)
    assert _wait_dead([pids[1]], 15)
    with pytest.raises(WorkerDiedError) as info:
        env.step(_action(env))
    err = info.value
    assert str(err).startswith(
        f"ParallelEnv worker 1 (pid {pids[1]}) died unexpectedly during step (killed by SIGKILL)"
    )
    assert (err.index, err.pid, err.exitcode) == (1, pids[1], -signal.SIGKILL)
    assert env.is_closed
    assert _wait_dead(pids, 15)  # the others were stopped
    with pytest.raises(EnvClosedError):
        env.step(_action(env))
    assert env.reset()["observation"].tolist() == [[0], [0], [0]]
    assert env.step(_action(env))["next", "observation"].tolist() == [[1], [1], [1]]


# ---------------------------------------------------------------------- 7: orphans
ORPHAN_SCRIPT = textwrap.dedent(
    """
    import os, signal, threading, time
    from rlbatched import ParallelEnv
    from rlmocks import CountingEnv

    def start():
        global env
        env = ParallelEnv(2, CountingEnv, mp_start_method={method!r})
        env.reset()

    if __name__ == "__main__":
        if {in_thread!r}:  # workers started by a thread that is gone: no PR_SET_PDEATHSIG
            thread = threading.Thread(target=start)
            thread.start()
            thread.join()
        else:
            start()
        print(" ".join(str(proc.pid) for proc in env._workers), flush=True)
        if {death!r} == "exit":
            os._exit(0)
        os.kill(os.getpid(), getattr(signal, {death!r}))
        time.sleep(60)
    """
)


@pytest.mark.parametrize(
    ("death", "in_thread"),
    [("exit", False), ("SIGKILL", False), ("SIGTERM", False), ("exit", True)],
    ids=["os._exit", "SIGKILL", "SIGTERM", "os._exit-env-started-in-a-thread"],
)
def test_workers_exit_soon_after_the_main_process_dies(method, death, in_thread):
    script = ORPHAN_SCRIPT.format(method=method, death=death, in_thread=in_thread)
    pids = _run_and_read_pids(script)
    try:
        assert _wait_dead(pids, 15), f"workers {pids} outlived their main process"
    finally:
        for pid in pids:  # never leave an orphan behind, even when the test fails
            if not _dead(pid):
                os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------------- 8: start-up
def test_start_up_hang_honours_start_timeout(make_kind, method):
    env = make_kind(
        method,
        1,
        BadStartCountingEnv,
        create_env_kwargs={"mode": "hang"},
        start_timeout=2.0,
        worker_timeout=60.0,
    )
    start = time.monotonic()
    with pytest.raises(
        WorkerTimeoutError,
        match=re.escape("did not answer within 2 s during start (start_timeout=2)"),
    ) as info:
        env.reset()
    assert time.monotonic() - start < 60
    assert (info.value.phase, info.value.seconds) == ("start", 2.0)
    assert env.is_closed
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("ParallelEnv")]


def test_worker_dying_while_starting_is_named(make_kind, method):
    env = make_kind(
        method, 2, [CountingEnv, BadStartCountingEnv], create_env_kwargs=[{}, {"mode": "exit"}]
    )
    with pytest.raises(WorkerDiedError, match="worker 1 .* during start \\(exit code 4\\)"):
        env.reset()
    assert env.is_closed
    assert not [p for p in multiprocessing.active_children() if p.name.startswith("ParallelEnv")]


def test_close_after_a_worker_was_killed_is_quiet(make_kind, method):
    env = make_kind(method, 2, CountingEnv)
    env.reset()
    pids = [proc.pid for proc in env._workers]
    os.kill(pids[0], signal.SIGKILL)
    env.close()
    env.close()
    assert _wait_dead(pids, 15)
    assert env.reset()["observation"].tolist() == [[0], [0]]


# ---------------------------------------------------------------------- 9: odd exceptions
def test_exception_whose_str_raises_is_passed_on(make_kind, method):
    env = make_kind(
        method, 2, FailingCountingEnv, create_env_kwargs=[{}, {"fail_on": "step", "error": "str"}]
    )
    env.reset()
    with pytest.raises(WorkerRaisedError) as info:
        env.step(_action(env))
    assert str(info.value).startswith(
        "ParallelEnv worker 1 raised OddError during step: <unprintable OddError object>"
    )
    assert isinstance(info.value.__cause__, OddError)
    assert not env.is_closed
    assert env.reset()["observation"].tolist() == [[0], [0]]  # the worker lives on


def test_exception_that_cannot_be_rebuilt_keeps_its_text_as_cause(make_kind, method):
    env = make_kind(
        method,
        2,
        FailingCountingEnv,
        create_env_kwargs=[{}, {"fail_on": "step", "error": "twoargs"}],
    )
    env.reset()
    with pytest.raises(WorkerRaisedError, match="worker 1 raised OddError during step") as info:
        env.step(_action(env))
    cause = info.value.__cause__
    assert isinstance(cause, RemoteTraceback)
    assert (cause.type_name, cause.message) == ("OddError", "step/2")
    assert "_step" in cause.traceback


def test_failed_start_releases_shared_memory_at_once(method):
    """Without waiting for the garbage collector: no fd, no child process left."""
    env = ParallelEnv(1, BadStartCountingEnv, mp_start_method=method)
    with pytest.raises(KeyError):
        env.reset()  # warm-up: lazily created state (resource sharer, ...)
    fds = len(os.listdir("/proc/self/fd"))
    gc.disable()
    try:
        with pytest.raises(KeyError, match="ParallelEnv worker 0 raised KeyError during start"):
            env.reset()
        assert len(os.listdir("/proc/self/fd")) == fds
    finally:
        gc.enable()
    assert env.is_closed

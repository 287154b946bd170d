"""ParallelEnv specifics: start methods, the shared tensordict, threads, gradients."""

from __future__ import annotations

import functools
import gc

import torch
from batched_test_envs import DifferentiableEnv, UnsqueezingCountingEnv
from tensordict import TensorDict

from rlbatched import ParallelEnv, SerialEnv
from rlbatched import _parallel as batched_envs
from rlcore import EnvCreator
from rlmocks import ContinuousActionVecMockEnv, CountingEnv, CountingEnvCountPolicy
from rlmocks.testing import decorate_thread_sub_func


def test_spawn_matches_serial_and_is_default(make_kind):
    """Under the default start method (spawn), an EnvCreator of a lambda rolls out like SerialEnv."""
    assert ParallelEnv(2, CountingEnv)._mp_start_method == "spawn"
    creator = EnvCreator(lambda: CountingEnv(max_steps=3))
    penv = make_kind("spawn", 2, creator)
    senv = make_kind("serial", 2, creator)
    torch.manual_seed(0)
    rp = penv.rollout(8, break_when_any_done=False)
    torch.manual_seed(0)
    rs = senv.rollout(8, break_when_any_done=False)
    torch.testing.assert_close(rp, rs)
    assert penv._workers[0]._start_method == "spawn"


def test_lambda_and_closure_under_fork(make_fork):
    """Lambdas capturing local state work under fork; the process records its start method."""
    horizon = 2
    env = make_fork(2, lambda: CountingEnv(max_steps=horizon))
    policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
    assert env.rollout(10, policy).shape == (2, 3)
    assert env._workers[1]._start_method == "fork"


def test_shared_tensordict_parent_holds_worker_outputs(make_fork):
    """shared_tensordict_parent is one shared-memory tensordict the workers write into."""
    env = make_fork(2, CountingEnv)
    env.reset()
    parent = env.shared_tensordict_parent
    assert parent.batch_size == (2,)
    assert all(t.is_shared() for t in parent.values(True, True))
    out = env.step(TensorDict({"action": torch.ones(2, 1, dtype=torch.int8)}, [2]))
    assert (parent["next", "observation"] == 1).all()
    assert out["next", "observation"].data_ptr() != parent["next", "observation"].data_ptr()


def test_parallel_output_has_no_grad(make_fork):
    """Gradients do not cross process boundaries: outputs never require grad."""
    torch.manual_seed(0)
    policy = torch.nn.Linear(3, 3)

    def act(td):
        return td.set("action", policy(td["observation"]))

    env = make_fork(
        2,
        [
            functools.partial(DifferentiableEnv, seed=0),
            functools.partial(DifferentiableEnv, seed=1),
        ],
    )
    out = env.rollout(4, act)
    assert not out.exclude("action").requires_grad
    assert out["action"].requires_grad


def test_num_threads_and_sub_threads():
    """num_threads sets the main process's threads; workers get num_sub_threads before their loop."""
    saved_fn = batched_envs._run_worker_pipe_shared_mem
    saved_threads = torch.get_num_threads()
    batched_envs._run_worker_pipe_shared_mem = decorate_thread_sub_func(saved_fn, num_threads=3)
    try:
        env = ParallelEnv(
            2, ContinuousActionVecMockEnv, num_sub_threads=3, num_threads=7, mp_start_method="fork"
        )
        env.rollout(3)
        assert torch.get_num_threads() == 7
        env.close()
    finally:
        batched_envs._run_worker_pipe_shared_mem = saved_fn
        torch.set_num_threads(saved_threads)


def test_num_sub_threads_under_spawn():
    """The replaced worker function travels to spawned workers, after their thread count is set."""
    saved_fn = batched_envs._run_worker_pipe_shared_mem
    saved_threads = torch.get_num_threads()
    batched_envs._run_worker_pipe_shared_mem = decorate_thread_sub_func(saved_fn, num_threads=2)
    try:
        env = ParallelEnv(1, CountingEnv, num_sub_threads=2, num_threads=1)
        env.rollout(2)
        env.close()
    finally:
        batched_envs._run_worker_pipe_shared_mem = saved_fn
        torch.set_num_threads(saved_threads)


def test_auto_num_threads_given_up_and_back():
    """Without num_threads, the main process gives one thread per worker and gets it back on close."""
    init = torch.get_num_threads()
    try:
        env3 = ParallelEnv(3, CountingEnv, mp_start_method="fork")
        env3.rollout(2)
        assert torch.get_num_threads() == max(1, init - 3)
        env2 = ParallelEnv(2, CountingEnv, mp_start_method="fork")
        env2.rollout(2)
        assert torch.get_num_threads() == max(1, init - 5)
        env2.close()
        del env2
        gc.collect()
        assert torch.get_num_threads() == max(1, init - 3)
        env3.close()
        del env3
        gc.collect()
        assert torch.get_num_threads() == init
    finally:
        torch.set_num_threads(init)


def test_serial_and_parallel_same_seeded_rollouts(make_fork, make_serial):
    """Identical seeds give identical rollouts and the same returned seed (kwargs per worker)."""
    fns = [functools.partial(CountingEnv, max_steps=m) for m in (3, 5)]
    penv = make_fork(2, fns)
    senv = make_serial(2, fns)
    assert penv.set_seed(3) == senv.set_seed(3)
    torch.manual_seed(0)
    rp = penv.rollout(8, break_when_any_done=False)
    torch.manual_seed(0)
    rs = senv.rollout(8, break_when_any_done=False)
    torch.testing.assert_close(rp, rs)
    assert isinstance(senv, SerialEnv)


def test_spawned_workers_survive_an_inherited_lazy_legacy_none(make_kind, monkeypatch):
    # tensordict's set_lazy_legacy leaves LAZY_LEGACY_OP=None in os.environ (from_modules does);
    # a spawned worker inheriting it failed on its first unsqueeze
    monkeypatch.setenv("LAZY_LEGACY_OP", "None")
    env = make_kind("spawn", 2, UnsqueezingCountingEnv)
    assert env.reset()["observation"].shape == (2, 1)

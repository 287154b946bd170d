"""ParallelEnv(num_processes=...): several sub-envs per process give the same batch as one each."""

from __future__ import annotations

import os
import re

import pytest
import torch
from batched_test_envs import FailingCountingEnv
from tensordict import TensorDict, TensorDictBase

from rlbatched import ParallelEnv
from rlbatched._parallel import split_evenly
from rlmocks import CountingEnv
from rlworkers import WorkerDiedError

METHODS = ["fork", "spawn", "forkserver"]


class SeededCountingEnv(CountingEnv):
    """A CountingEnv with its own random generator: reset starts at a seeded random count and
    each step pays a seeded random reward (the global torch RNG is left alone, as sub-envs
    sharing a process must)."""

    def __init__(self, max_steps: int = 5, **kwargs) -> None:
        super().__init__(max_steps=max_steps, **kwargs)
        self.gen = torch.Generator().manual_seed(0)

    def _set_seed(self, seed: int | None) -> None:
        self.gen.manual_seed(seed)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self.start_val = int(torch.randint(0, 3, (), generator=self.gen))
        return super()._reset(tensordict)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = super()._step(tensordict)
        out.set("reward", torch.rand(out["reward"].shape, generator=self.gen))
        return out


def _factories(n: int) -> tuple[list, list[dict]]:
    # different episode lengths: the sub-envs end (and are partially reset) at different steps
    return [SeededCountingEnv] * n, [{"max_steps": 2 + index % 3} for index in range(n)]


def _rollout(method: str, num_processes: int) -> tuple:
    fns, kwargs = _factories(8)
    env = ParallelEnv(
        8, fns, create_env_kwargs=kwargs, mp_start_method=method, num_processes=num_processes
    )
    try:
        assert env.num_processes == num_processes
        seed = env.set_seed(11)
        generator = torch.Generator().manual_seed(3)

        def policy(td):
            action = torch.randint(0, 2, (8, 1), generator=generator, dtype=torch.int8)
            return td.set("action", action)

        rollout = env.rollout(12, policy, break_when_any_done=False)
        # an explicit partial reset with a "_reset" mask
        mask = torch.tensor([True, False] * 4).unsqueeze(-1)
        reset = env.reset(TensorDict({"_reset": mask}, batch_size=[8]))
        return seed, rollout, reset
    finally:
        env.close()


@pytest.mark.parametrize("method", METHODS)
def test_rollouts_equal_whatever_the_split(method):
    """Layout, seeding, automatic partial resets and _reset masks: the same for 1/2/4/8 processes
    (under fork; spawn and forkserver, whose workers start slower, compare 2 against 1)."""
    splits = (8, 4, 2, 1) if method == "fork" else (2, 1)
    results = {p: _rollout(method, p) for p in splits}
    seed, rollout, reset = results[splits[0]]
    assert rollout["next", "done"].any()  # partial resets did happen
    assert rollout["next", "reward"].unique().numel() > 8  # seeded, random
    for processes, (other_seed, *tds) in results.items():
        assert other_seed == seed
        for got, expected in zip(tds, (rollout, reset)):
            assert got.batch_size == expected.batch_size
            assert list(got.keys(True, True)) == list(expected.keys(True, True))
            for key in expected.keys(True, True):
                assert torch.equal(got[key], expected[key]), (processes, key)


class GlobalRngCountingEnv(CountingEnv):
    """A CountingEnv that seeds and draws from torch's global generator (as many user envs do):
    random start counts at reset, random rewards at each step."""

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self.start_val = int(torch.randint(0, 3, ()))
        return super()._reset(tensordict)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = super()._step(tensordict)
        out.set("reward", torch.rand(out["reward"].shape))
        return out


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_sub_envs_sharing_a_process_keep_their_own_global_generator(method):
    """Sub-envs drawing from torch's global generator give the same data whatever the split."""
    results = []
    for processes in (4, 2, 1):
        env = ParallelEnv(
            4,
            GlobalRngCountingEnv,
            create_env_kwargs=[{"max_steps": 2 + index} for index in range(4)],
            mp_start_method=method,
            num_processes=processes,
        )
        try:
            env.set_seed(5)
            policy = lambda td: td.set("action", torch.ones(4, 1, dtype=torch.int8))  # noqa: E731
            rollout = env.rollout(9, policy, break_when_any_done=False)
            results.append(rollout)
        finally:
            env.close()
    expected, *others = results
    assert expected["next", "reward"].unique().numel() > 4
    for rollout in others:
        for key in expected.keys(True, True):
            assert torch.equal(rollout[key], expected[key]), key


def test_split_is_even_and_contiguous():
    assert split_evenly(8, 2) == [4, 4]
    assert split_evenly(8, 3) == [3, 3, 2]
    assert split_evenly(5, 5) == [1] * 5
    assert split_evenly(3, 1) == [3]


def test_processes_serve_contiguous_sub_envs(make_fork):
    env = make_fork(5, CountingEnv, num_processes=2)
    env.start()
    assert env.num_processes == 2 and len(env._workers) == 2
    pids = env._call_workers("__class__")  # one value per sub-env, whatever the split
    assert len(pids) == 5
    assert env.batch_size == torch.Size([5])


def test_default_is_one_process_per_sub_env_up_to_the_usable_cores(make_fork, monkeypatch):
    from rlbatched import _parallel

    for cores, processes in ((8, 3), (2, 2), (1, 1)):
        monkeypatch.setattr(_parallel, "usable_cpus", lambda cores=cores: cores)
        env = make_fork(3, CountingEnv)
        env.start()
        assert env.num_processes == processes and len(env._workers) == processes


def test_usable_cpus_are_this_process_s_affinity():
    from rlbatched._parallel import usable_cpus

    assert usable_cpus() == len(os.sched_getaffinity(0))


@pytest.mark.parametrize("bad", [0, -1, 9, 2.0, "2", True])
def test_num_processes_is_validated(bad):
    message = (
        "ParallelEnv: num_processes must be a positive int no larger than num_workers (8), "
        f"got {bad!r}."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        ParallelEnv(8, CountingEnv, num_processes=bad)


def test_mp_start_method_is_validated():
    with pytest.raises(ValueError, match="mp_start_method must be one of .* got 'fork-exec'"):
        ParallelEnv(2, CountingEnv, mp_start_method="fork-exec")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_error_of_a_shared_process_names_its_sub_env(make_kind, method):
    """A sub-env that raises is named by its index, not its process's."""
    env = make_kind(
        method,
        4,
        FailingCountingEnv,
        create_env_kwargs=[{}, {}, {}, {"fail_on": "step"}],
        num_processes=2,
    )
    env.reset()
    action = TensorDict({"action": torch.ones(4, 1, dtype=torch.int8)}, batch_size=[4])
    with pytest.raises(ValueError, match=re.escape("ParallelEnv worker 3 raised ValueError")):
        env.step(action)
    assert not env.is_closed
    env.reset()  # still usable


def test_death_of_a_shared_process_names_its_sub_envs(make_fork):
    env = make_fork(4, CountingEnv, num_processes=2)
    env.reset()
    env._workers[1].kill()
    env._workers[1].join()
    action = TensorDict({"action": torch.ones(4, 1, dtype=torch.int8)}, batch_size=[4])
    with pytest.raises(WorkerDiedError, match=re.escape("ParallelEnv workers 2-3 (pid")):
        env.step(action)
    assert env.is_closed
    assert env.reset().batch_size == torch.Size([4])  # reopens on reset

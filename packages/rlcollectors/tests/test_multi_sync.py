"""MultiSyncDataCollector: equality with single collectors, frame counts, weights, seeds, failures, cleanup.

Every collector here starts worker processes, so each test builds as few as it can.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import re
import time

import pytest
import torch
from tensordict.nn import TensorDictModuleBase
from torch import nn

from rlcollectors import MultiSyncDataCollector, SyncDataCollector
from rlmocks import ContinuousActionVecMockEnv, CountingEnv
from rlmodules import Actor
from rlworkers import WorkerDiedError, WorkerTimeoutError

TRAJ_IDS = ("collector", "traj_ids")
pytestmark = pytest.mark.filterwarnings("error")
# workers start in ~0.1 s with fork against seconds with spawn (the default, kept where it matters)
FAST_START = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


class OnesPolicy(TensorDictModuleBase):
    """Always increments CountingEnv (the policy of the seed's TestConcurrentEnvs)."""

    in_keys = []
    out_keys = ["action"]

    def __init__(self, action_spec):
        super().__init__()
        self.action_spec = action_spec

    def forward(self, tensordict):
        return tensordict.set("action", self.action_spec.zero() + 1)


class DyingEnv(CountingEnv):
    """A CountingEnv whose process exits abruptly at its third step.

    It counts its own steps: the count of a CountingEnv depends on the random actions, and
    with 10 frames per worker it stays below 2 in about 1 run in 100.
    """

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.steps = 0

    def _step(self, tensordict):
        self.steps += 1
        if self.steps == 3:
            os._exit(3)
        return super()._step(tensordict)


class HangingEnv(CountingEnv):
    """A CountingEnv whose steps never return in time."""

    def _step(self, tensordict):
        time.sleep(60)
        return super()._step(tensordict)


def _failing_factory():
    raise ValueError("cannot build this env")


def _assert_all_dead(procs):
    assert all(proc._closed or not proc.is_alive() for proc in procs)


@pytest.fixture
def shut_down_later():
    """Registers collectors to shut down at teardown, also when the test fails: a failed
    test's frames keep its collector alive, and its workers would fail the later tests'
    ``active_children()`` checks."""
    collectors = []
    yield collectors.append
    for collector in collectors:
        collector.shutdown()


def test_output_equals_concatenated_single_collectors(shut_down_later):
    make_envs = [lambda i=i: CountingEnv(i) for i in (3, 4)]
    policy = OnesPolicy(make_envs[0]().action_spec)
    collector = MultiSyncDataCollector(make_envs, policy, frames_per_batch=40, total_frames=120)
    shut_down_later(collector)
    singles = [
        SyncDataCollector(fn(), policy, frames_per_batch=20, total_frames=60) for fn in make_envs
    ]
    iters = [iter(single) for single in singles]
    multi = [batch.clone() for batch in collector]
    expected = [torch.cat([next(it) for it in iters]) for _ in range(3)]
    assert len(multi) == 3
    assert collector.frames == 120
    for got, want in zip(multi, expected):
        assert got.batch_size == want.batch_size == (40,)
        assert (got == want).all()
    assert multi[0].names == ["time"]
    procs = list(collector._pool.procs)
    collector.shutdown()
    collector.shutdown()  # idempotent
    for single in singles:
        single.shutdown()
    assert all(proc._closed for proc in procs)
    with pytest.raises(RuntimeError, match=re.escape("MultiSyncDataCollector was shut down")):
        iter(collector)


def test_seeded_collection_equals_single_collectors_seeded_alike_and_weights_reach_workers(
    shut_down_later,
):
    env = ContinuousActionVecMockEnv()
    policy = Actor(
        nn.Linear(env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1])
    )
    collector = MultiSyncDataCollector(
        [ContinuousActionVecMockEnv] * 2, policy, frames_per_batch=20, mp_start_method=FAST_START
    )
    shut_down_later(collector)
    out_seed = collector.set_seed(11)
    batches = iter(collector)
    got = next(batches)

    # seeding re-seeds torch's generator, so seed and collect each single collector in turn
    parts, seed = [], 11
    for _ in range(2):
        single = SyncDataCollector(ContinuousActionVecMockEnv(), policy, frames_per_batch=10)
        seed = single.set_seed(seed)
        parts.append(next(iter(single)))
        single.shutdown()
    assert out_seed == seed
    assert (got == torch.cat(parts)).all()

    with torch.no_grad():
        for param in policy.parameters():
            param.zero_()
    assert (next(batches)["action"] != 0).any()
    collector.update_policy_weights_()
    assert (next(batches)["action"] == 0).all()
    collector.shutdown()


def test_split_trajs_gives_unique_ids_across_workers(shut_down_later):
    make_envs = [functools.partial(CountingEnv, 3)] * 2
    policy = OnesPolicy(make_envs[0]().action_spec)
    collector = MultiSyncDataCollector(
        make_envs,
        policy,
        frames_per_batch=20,
        total_frames=20,
        split_trajs=True,
        mp_start_method=FAST_START,
    )
    shut_down_later(collector)
    batch = next(iter(collector))
    # each worker: trajectories of 4, 4 and 2 frames
    assert batch.shape == (6, 4)
    assert batch["collector", "mask"].sum(-1).tolist() == [4, 4, 2, 4, 4, 2]
    assert batch.get(TRAJ_IDS)[:, 0].tolist() == [0, 1, 2, 3, 4, 5]
    collector.shutdown()


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_that_dies_is_named_in_the_error(method):
    collector = MultiSyncDataCollector(
        [CountingEnv, DyingEnv], frames_per_batch=20, total_frames=20, mp_start_method=method
    )
    procs = list(collector._pool.procs)
    try:
        with pytest.raises(
            WorkerDiedError,
            match=re.escape(
                f"MultiSyncDataCollector worker 1 (pid {procs[1].pid}) died unexpectedly during "
                "collect (exit code 3); the collector was shut down."
            ),
        ) as info:
            next(iter(collector))
    finally:  # a failure here must not leave workers behind for the next tests' checks
        collector.shutdown()
    assert isinstance(info.value, RuntimeError) and info.value.exitcode == 3
    _assert_all_dead(procs)
    with pytest.raises(RuntimeError, match="was shut down"):
        iter(collector)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_that_hangs_past_the_timeout_is_named_and_stopped(method, shut_down_later):
    # only the collect is timed at 1 s: start-up has its own start_timeout (spawn imports torch)
    collector = MultiSyncDataCollector(
        [HangingEnv], frames_per_batch=4, timeout=1.0, mp_start_method=method
    )
    shut_down_later(collector)
    procs = list(collector._pool.procs)
    with pytest.raises(
        WorkerTimeoutError,
        match=re.escape(
            f"MultiSyncDataCollector worker 0 (pid {procs[0].pid}) did not answer within 1 s "
            "during collect (timeout=1); the collector was shut down."
        ),
    ):
        next(iter(collector))
    _assert_all_dead(procs)


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_worker_that_raises_reports_its_type_and_traceback(method):
    with pytest.raises(
        ValueError,
        match=re.escape(
            "MultiSyncDataCollector worker 1 raised ValueError during start: cannot build this env"
        ),
    ) as info:
        MultiSyncDataCollector(
            [CountingEnv, _failing_factory], frames_per_batch=4, mp_start_method=method
        )
    assert "Worker traceback:" in str(info.value) and "_failing_factory" in str(info.value)
    assert isinstance(info.value.__cause__, ValueError)
    assert not [
        p for p in multiprocessing.active_children() if p.name.startswith("MultiSyncDataCollector")
    ]


def test_unpicklable_policy_fails_before_leaving_any_worker():
    import threading

    unpicklable = threading.Lock()

    def policy(td):
        with unpicklable:
            return td

    with pytest.raises(TypeError, match="lock"):
        MultiSyncDataCollector([CountingEnv, CountingEnv], policy, frames_per_batch=4)
    assert not [
        p for p in multiprocessing.active_children() if p.name.startswith("MultiSyncDataCollector")
    ]


def test_env_instances_instead_of_factories_are_rejected():
    with pytest.raises(TypeError, match=re.escape("create_env_fn[0] is an env instance")):
        MultiSyncDataCollector([CountingEnv()], frames_per_batch=4)


def test_frames_per_batch_must_split_evenly_between_workers():
    with pytest.raises(
        ValueError, match=re.escape("frames_per_batch=5 cannot be split evenly between 2 workers")
    ):
        MultiSyncDataCollector([CountingEnv, CountingEnv], frames_per_batch=5)


@pytest.mark.parametrize(
    ("cat_results", "shape"), [(0, (4, 5)), (-1, (2, 10)), ("stack", (2, 2, 5))]
)
def test_batched_worker_envs_are_gathered_along_cat_results(cat_results, shape, shut_down_later):
    collector = MultiSyncDataCollector(
        [CountingEnv, CountingEnv],
        frames_per_batch=20,
        total_frames=20,
        create_env_kwargs=[{"batch_size": [2]}, {"batch_size": [2], "max_steps": 9}],
        cat_results=cat_results,
        mp_start_method=FAST_START,
    )
    shut_down_later(collector)
    batch = next(iter(collector))
    assert batch.shape == shape
    assert batch.names[-1] == "time"
    collector.shutdown()


def test_bad_cat_results_and_env_kwargs_are_rejected_before_starting_workers():
    with pytest.raises(
        ValueError,
        match=re.escape(
            "cat_results must be an int (the dim to concatenate along) or 'stack', got 'cat'."
        ),
    ):
        MultiSyncDataCollector([CountingEnv], frames_per_batch=4, cat_results="cat")
    with pytest.raises(
        TypeError,
        match=re.escape("create_env_kwargs must be a dict or a list of 2 dicts (one per worker)"),
    ):
        MultiSyncDataCollector([CountingEnv] * 2, frames_per_batch=4, create_env_kwargs=[{}])


def test_spawned_workers_survive_an_inherited_lazy_legacy_none(monkeypatch):
    # tensordict's set_lazy_legacy leaves LAZY_LEGACY_OP=None in os.environ (from_modules does)
    monkeypatch.setenv("LAZY_LEGACY_OP", "None")
    make_envs = [lambda i=i: CountingEnv(i) for i in (3, 4)]
    collector = MultiSyncDataCollector(
        make_envs,
        OnesPolicy(make_envs[0]().action_spec),
        frames_per_batch=40,
        total_frames=40,
        mp_start_method="spawn",
    )
    try:
        assert [batch.batch_size for batch in collector] == [(40,)]
    finally:
        collector.shutdown()


def _parallel_counting_env():
    from rlbatched import ParallelEnv

    return ParallelEnv(2, CountingEnv, mp_start_method="fork")


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_worker_may_run_a_parallel_env_of_its_own(method):
    """Collector workers are not daemonic (as torchrl 0.4's): each may start a ParallelEnv."""
    collector = MultiSyncDataCollector(
        [_parallel_counting_env] * 2, frames_per_batch=8, total_frames=16, mp_start_method=method
    )
    try:
        batches = list(collector)
    finally:
        collector.shutdown()
    assert [batch.numel() for batch in batches] == [8, 8]
    assert batches[0].batch_size[:1] == (4,)  # 2 workers x 2 sub-envs, concatenated

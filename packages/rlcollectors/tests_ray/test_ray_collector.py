"""RayCollector on a real local Ray: sync and async batches, provenance, weights, errors, shutdown.

One Ray instance serves the whole module (``local_ray``); every collector here asks for half a
CPU per actor so that two fit on this 2-core machine.
"""

from __future__ import annotations

import functools
import re

import pytest
import torch
from conftest import (
    ACTOR,
    PROVENANCE,
    StepPolicy,
    chunk_ids,
    ray_collector,
    set_step,
    ship_by_value,
)

from rlcollectors import MultiSyncDataCollector, RayCollector, SyncDataCollector
from rlcollectors._ray import ACTOR_RAISED, ACTOR_TIMEOUT
from rlmocks import CountingEnv

ship_by_value(__name__)
pytestmark = [pytest.mark.usefixtures("local_ray"), pytest.mark.timeout(300)]


class RaisingPolicy(StepPolicy):
    """Raises once an observation reaches 3 (never in CountingEnv(max_steps=1))."""

    def forward(self, tensordict):
        if int(tensordict["observation"].max()) >= 3:
            raise ValueError("policy saw observation 3")
        return super().forward(tensordict)


def _failing_env():
    raise ValueError("cannot build this env")


def make_env(max_steps=4):
    return CountingEnv(max_steps=max_steps)


def test_sync_batches_stack_one_chunk_per_actor():
    """sync=True: each batch stacks one chunk per actor, equal to a local collector's batches."""
    collector = ray_collector(
        make_env,
        StepPolicy(),
        sync=True,
        frames_per_batch=20,
        total_frames=60,
    )
    local = iter(SyncDataCollector(make_env(), StepPolicy(), frames_per_batch=10, total_frames=30))
    batches = list(collector)
    assert collector.frames == 60 and [b.batch_size for b in batches] == [torch.Size([2, 10])] * 3
    for k, batch in enumerate(batches):
        expected = next(local)
        assert batch["collector", "actor"].tolist() == [[0] * 10, [1] * 10]
        assert batch["collector", "restart"].eq(0).all()
        assert batch["collector", "chunk"].eq(k).all()
        for row in batch.unbind(0):
            assert (row.exclude(*PROVENANCE) == expected).all()
    collector.shutdown()


def test_async_yields_exact_frames_each_chunk_once():
    """sync=False: chunks of frames_per_batch from either actor, exactly total_frames in all."""
    collector = ray_collector(
        [make_env, functools.partial(make_env, 2)],
        StepPolicy(),
        frames_per_batch=10,
        total_frames=100,
    )
    seen = []
    for batch in collector:
        assert batch.batch_size == (10,)
        ids = chunk_ids(batch)
        assert len(ids) == 1  # a whole chunk from one actor, never a mix or a part
        seen += ids
        actor = ids.pop()[0]
        # the actor's own env: observations count up to its max_steps + 1
        assert int(batch["next", "observation"].max()) == (5 if actor == 0 else 3)
    assert collector.frames == 100 and len(seen) == 10 == len(set(seen))
    assert {actor for actor, _, _ in seen} == {0, 1}
    for actor in (0, 1):  # each actor's chunks come in order, none skipped
        chunks = [chunk for a, _, chunk in seen if a == actor]
        assert chunks == list(range(len(chunks)))
    collector.shutdown()


def test_weight_updates_reach_every_actor_through_one_put(monkeypatch):
    """update_policy_weights_ puts the weights once and every actor plays them from the next batch."""
    import ray

    policy = StepPolicy(1.0)
    collector = ray_collector(
        make_env,
        policy,
        sync=True,
        frames_per_batch=8,
        total_frames=-1,
    )
    batches = iter(collector)
    assert next(batches)["action"].eq(1).all()
    puts = []
    real_put = ray.put
    monkeypatch.setattr(ray, "put", lambda value, **kw: puts.append(value) or real_put(value, **kw))
    set_step(policy, 0.0)
    assert next(batches)["action"].eq(1).all()  # not sent yet
    collector.update_policy_weights_()
    assert len(puts) == 1 and puts[0]["step"] == 0.0
    assert next(batches)["action"].eq(0).all()
    set_step(policy, 1.0)
    collector.update_policy_weights_(worker_rank=2)  # torchrl's 1-based rank: actor 1 only
    assert next(batches)["action"].squeeze(-1)[:, 0].tolist() == [0, 1]
    with pytest.raises(ValueError, match=re.escape("worker_rank must be an int from 1 to 2")):
        collector.update_policy_weights_(worker_rank=0)
    collector.shutdown()


def test_update_after_each_batch_async():
    """Async: the actor whose chunk was yielded gets the weights as they are after that step."""
    policy = StepPolicy(0.0)
    collector = ray_collector(
        make_env,
        policy,
        frames_per_batch=6,
        total_frames=60,
        update_after_each_batch=True,
    )
    played_next = {}  # actor -> the step it must play in its next chunk
    for k, batch in enumerate(collector):
        actor = int(batch["collector", "actor"][0])
        if actor in played_next:
            assert batch["action"].eq(played_next[actor]).all()
        step = k % 2  # alternate 0/1 so that a stale chunk would show
        set_step(policy, step)
        played_next[actor] = step
    assert set(played_next) == {0, 1}
    collector.shutdown()


def test_max_weight_update_interval_forces_updates():
    """With interval 1, an actor gets the weights after its second batch without being asked."""
    policy = StepPolicy(1.0)
    collector = ray_collector(
        make_env,
        policy,
        sync=True,
        frames_per_batch=8,
        total_frames=24,
        max_weight_update_interval=1,
    )
    actions = []
    for batch in collector:
        actions.append(int(batch["action"].max()))
        set_step(policy, 0.0)
    assert actions == [1, 1, 0]
    collector.shutdown()


def test_split_trajs_numbers_trajectories_apart_across_actors():
    """split_trajs: one row per trajectory, each from one actor, all frames kept."""
    collector = ray_collector(
        make_env,
        StepPolicy(),
        sync=True,
        split_trajs=True,
        frames_per_batch=24,
        total_frames=24,
    )
    (batch,) = list(collector)
    mask = batch["collector", "mask"]
    assert int(mask.sum()) == 24
    # per actor: 12 frames = trajectories of 5, 5 and 2 steps
    assert sorted(mask.sum(-1).tolist()) == [2, 2, 5, 5, 5, 5]
    for row, valid in zip(batch.unbind(0), mask.unbind(0)):
        assert row["collector", "actor"][valid].unique().numel() == 1
        obs = row["next", "observation"][valid].squeeze(-1)
        assert obs.tolist() == list(range(1, valid.sum() + 1))
    collector.shutdown()


def test_multi_sync_collector_class_stacks_workers():
    """collector_class=MultiSyncDataCollector: each actor's chunk stacks its workers' batches."""
    collector = ray_collector(
        make_env,
        StepPolicy(),
        collector_class=MultiSyncDataCollector,
        num_workers_per_collector=2,
        num_collectors=1,
        sync=True,
        frames_per_batch=12,
        total_frames=12,
        remote_configs={"num_cpus": 1},
    )
    (batch,) = list(collector)
    assert batch.batch_size == (1, 2, 6)
    assert batch["next", "observation"].squeeze(-1).tolist() == [[[1, 2, 3, 4, 5, 1]] * 2]
    collector.shutdown()


def test_set_seed_chains_through_the_actors():
    """set_seed seeds actor 0, hands the seed it returns to actor 1, and returns actor 1's."""
    collector = ray_collector(make_env, frames_per_batch=8, total_frames=8)
    expected = make_env().set_seed(make_env().set_seed(3))
    assert collector.set_seed(3) == expected
    collector.shutdown()


def test_policy_raising_in_an_actor_names_it():
    """A policy that raises in actor 1 stops the collection with an error naming actor 1."""
    collector = ray_collector(
        [functools.partial(make_env, 1), functools.partial(make_env, 10)],
        RaisingPolicy(),
        sync=True,
        frames_per_batch=20,
        total_frames=200,
    )
    prefix = ACTOR_RAISED.split("{pid}")[0].format(idx=1, restart=0)
    with pytest.raises(RuntimeError, match=re.escape(prefix)) as info:
        list(collector)
    assert "policy saw observation 3" in str(info.value)
    assert collector._restarts == [0, 0]  # not retried
    with pytest.raises(RuntimeError, match="was shut down"):
        iter(collector)


def test_env_failing_to_build_names_the_actor():
    """An env factory that raises fails the construction, naming the actor."""
    with pytest.raises(RuntimeError, match=re.escape("RayCollector actor 1 (restart 0")) as info:
        ray_collector([make_env, _failing_env], frames_per_batch=8, total_frames=8)
    assert "cannot build this env" in str(info.value)


def test_unschedulable_actors_time_out_naming_them():
    """Actors asking for resources no node has raise after `timeout` instead of waiting forever."""
    prefix = ACTOR_TIMEOUT.split("{timeout}")[0].format(idxs=[0, 1])
    with pytest.raises(RuntimeError, match=re.escape(prefix)):
        ray_collector(
            make_env,
            frames_per_batch=8,
            total_frames=8,
            timeout=2,
            remote_configs={"num_cpus": 0.5, "resources": {"no_such_resource": 1}},
        )


def test_shutdown_ends_the_actors_and_keeps_the_caller_s_ray():
    """shutdown kills every actor, forbids iterating, and leaves a Ray it did not start running."""
    import ray

    collector = ray_collector(make_env, frames_per_batch=8, total_frames=8)
    actors = collector.remote_collectors()
    collector.shutdown()
    collector.shutdown()  # idempotent
    for actor in actors:
        with pytest.raises(ray.exceptions.RayActorError):
            ray.get(actor.info.remote(), timeout=60)
    with pytest.raises(RuntimeError, match="RayCollector was shut down"):
        iter(collector)
    assert ray.is_initialized()


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"sync": True, "frames_per_batch": 9}, ValueError, "equal share"),
        ({"frames_per_batch": 0}, ValueError, "positive int"),
        ({"create_env_fn": make_env()}, TypeError, "actors build their own envs"),
        ({"create_env_fn": [make_env] * 3}, ValueError, "create_env_fn has 3 entries"),
        ({"remote_configs": [ACTOR] * 3}, ValueError, "remote_configs has 3 entries"),
        ({"collector_kwargs": {"total_frames": 5}}, ValueError, "sets 'total_frames'"),
        (
            {"collector_kwargs": {"max_frames_per_traj": 5}, "max_frames_per_traj": 3},
            ValueError,
            "sets 'max_frames_per_traj'",
        ),
        ({"collector_class": "async"}, ValueError, "collector_class must be"),
        ({"num_workers_per_collector": 2}, ValueError, "needs collector_class=MultiSync"),
        (
            {"remote_configs": {"num_cpus": 0.5, "max_task_retries": 2}},
            ValueError,
            "needs 0",
        ),
        ({"remote_configs": {"max_restarts": -2}}, ValueError, "int >= -1"),
        (
            {
                "collector_class": MultiSyncDataCollector,
                "split_trajs": True,
                "collector_kwargs": {"cat_results": 0},
            },
            ValueError,
            "needs its cat_results='stack'",
        ),
    ],
)
def test_bad_arguments_raise_before_any_actor_starts(kwargs, error, match):
    """Each inconsistent argument is reported by name, before any actor starts."""
    args = {"create_env_fn": make_env, "num_collectors": 2, "frames_per_batch": 8}
    args.update(kwargs)
    env_fn = args.pop("create_env_fn")
    with pytest.raises(error, match=re.escape(match)):
        RayCollector(env_fn, **args)


def test_ray_init_config_with_ray_running_warns():
    """A ray_init_config given while Ray runs is not silently dropped: it warns."""
    with pytest.warns(UserWarning, match="Ray is already initialized"):
        collector = RayCollector(
            make_env,
            frames_per_batch=8,
            total_frames=8,
            ray_init_config={"num_cpus": 1},
            remote_configs=ACTOR,
        )
    collector.shutdown()

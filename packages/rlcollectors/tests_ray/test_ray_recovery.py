"""RayCollector survives lost actors: SIGKILL mid-chunk or while idle, ray.kill, spent budgets.

Each test kills a real actor process of a real local Ray (one instance for the module) and
checks what the collection yields: exactly ``total_frames``, whole chunks, none twice, and the
replacement's chunks tagged with its restart number and played with the current weights.
"""

from __future__ import annotations

import os
import re
import signal
import time
import warnings

import pytest
import torch
from conftest import ACTOR, StepPolicy, chunk_ids, ray_collector, set_step, ship_by_value
from torch import nn

from rlcollectors._ray import ACTOR_LOST, ACTOR_RAISED
from rlmocks import CountingEnv

ship_by_value(__name__)
pytestmark = [pytest.mark.usefixtures("local_ray"), pytest.mark.timeout(300)]

RECOVERY_BOUND_S = 60.0  # generous for a loaded 2-core machine (docs/pages/distributed.md)


class SlowCountingEnv(CountingEnv):
    """A CountingEnv taking 5 ms a step, so that a kill lands in the middle of a chunk."""

    def _step(self, tensordict):
        time.sleep(0.005)
        return super()._step(tensordict)


class SlowRestartEnv(SlowCountingEnv):
    """A SlowCountingEnv that takes 5 s to build in an actor Ray restarted.

    The actor's restore call waits for that build, so it is still pending when the lost
    chunk call has been seen, however quickly Ray restarts the process.
    """

    def __init__(self, **kwargs):
        import ray

        with warnings.catch_warnings():  # Ray 2.60 reads its own deprecated actor_id here
            warnings.simplefilter("ignore", DeprecationWarning)
            if ray.get_runtime_context().was_current_actor_reconstructed:
                time.sleep(5.0)
        super().__init__(**kwargs)


def _pid(collector, idx):
    import ray

    return ray.get(collector.remote_collectors()[idx].info.remote(), timeout=60)["pid"]


def _chunk_id(batch):
    """The batch's (actor, restart, chunk), checking that every frame carries the same."""
    ids = chunk_ids(batch)
    assert len(ids) == 1, f"a batch mixes chunks {ids}"
    return ids.pop()


def test_sigkill_mid_chunk_recovers_with_exact_frames():
    """SIGKILL of a collecting actor: exact total, whole chunks once each, the new actor's chunks."""
    policy = StepPolicy(1.0)
    collector = ray_collector(
        SlowCountingEnv,
        policy,
        frames_per_batch=40,  # 0.2 s a chunk
        total_frames=2000,
    )
    victim = _pid(collector, 0)
    seen, frames, killed_at, recovered_after = [], 0, None, None
    for batch in collector:
        assert batch.numel() == 40
        frames += batch.numel()
        actor, restart, chunk = _chunk_id(batch)
        seen.append((actor, restart, chunk))
        if killed_at is None and actor == 1 and len(seen) >= 6:
            # actor 0 is busy with its next chunk: the kill lands mid-chunk
            set_step(policy, 0.0)
            collector.update_policy_weights_()
            os.kill(victim, signal.SIGKILL)
            killed_at = time.monotonic()
        if actor == 0 and restart == 1:
            recovered_after = recovered_after or time.monotonic() - killed_at
            assert batch["action"].eq(0).all()  # the weights sent before the kill, not the first
    assert frames == collector.frames == 2000
    assert len(seen) == len(set(seen)) == 50
    assert collector._restarts == [1, 0]
    assert recovered_after is not None and recovered_after < RECOVERY_BOUND_S
    assert _pid(collector, 0) != victim
    collector.shutdown()


def test_weights_sent_while_an_actor_restarts_reach_it():
    """Weights put while Ray restarts an actor (its restore pending) reach it before a chunk."""
    policy = StepPolicy(1.0)
    collector = ray_collector(
        SlowRestartEnv,
        policy,
        frames_per_batch=40,
        total_frames=-1,
    )
    batches = iter(collector)
    for _ in range(4):
        next(batches)
    os.kill(_pid(collector, 0), signal.SIGKILL)
    deadline = time.monotonic() + RECOVERY_BOUND_S
    while collector._restarts[0] == 0:  # actor 1's chunks come in while actor 0 is down
        assert time.monotonic() < deadline
        next(batches)
    assert (0, "restoring its state after a restart") in collector._pending.values()
    set_step(policy, 0.0)
    collector.update_policy_weights_()
    while True:
        batch = next(batches)
        assert time.monotonic() < deadline
        if _chunk_id(batch)[:2] == (0, 1):
            break
    assert batch["action"].eq(0).all()
    collector.shutdown()


def test_actor_restarted_while_idle_gets_the_current_weights():
    """An actor Ray restarted between batches plays the current weights, not its first ones."""
    import ray

    policy = StepPolicy(1.0)
    collector = ray_collector(
        CountingEnv,
        policy,
        sync=True,
        frames_per_batch=20,
        total_frames=-1,
    )
    batches = iter(collector)
    assert next(batches)["action"].eq(1).all()
    set_step(policy, 0.0)
    collector.update_policy_weights_()
    assert next(batches)["action"].eq(0).all()
    victim = _pid(collector, 0)
    os.kill(victim, signal.SIGKILL)
    deadline = time.monotonic() + RECOVERY_BOUND_S
    while True:  # wait until Ray has restarted the actor (with its first arguments)
        try:
            if _pid(collector, 0) != victim:
                break
        except ray.exceptions.RayActorError:
            assert time.monotonic() < deadline, "Ray did not restart the actor"
            time.sleep(0.2)
    batch = next(batches)
    assert batch["collector", "restart"][:, 0].tolist() == [1, 0]
    assert batch["action"].eq(0).all()
    collector.shutdown()


def test_actor_killed_for_good_is_replaced():
    """ray.kill (no restart by Ray): the collector creates a new actor with the current weights."""
    import ray

    policy = StepPolicy(1.0)
    collector = ray_collector(
        CountingEnv,
        policy,
        sync=True,
        frames_per_batch=20,
        total_frames=60,
    )
    batches = iter(collector)
    next(batches)
    first = collector.remote_collectors()[1]
    set_step(policy, 0.0)
    collector.update_policy_weights_()
    ray.kill(first, no_restart=True)
    batch = next(batches)
    assert batch["collector", "restart"][:, 0].tolist() == [0, 1]
    assert batch["collector", "chunk"][:, 0].tolist() == [1, 0]  # the new actor's first chunk
    assert batch["action"].eq(0).all()
    assert collector.remote_collectors()[1] != first
    next(batches)
    with pytest.raises(StopIteration):
        next(batches)
    assert collector.frames == 60
    collector.shutdown()


def test_actor_lost_beyond_its_budget_raises_naming_it():
    """With max_restarts=0, the first loss ends the collection with an error naming the actor."""
    collector = ray_collector(
        CountingEnv,
        sync=True,
        frames_per_batch=20,
        total_frames=-1,
        remote_configs={**ACTOR, "max_restarts": 0},
    )
    batches = iter(collector)
    next(batches)
    os.kill(_pid(collector, 1), signal.SIGKILL)
    prefix = ACTOR_LOST.split("{cause}")[0].format(idx=1, times=1, budget=0)
    with pytest.raises(RuntimeError, match=re.escape(prefix)):
        next(batches)
    with pytest.raises(RuntimeError, match="was shut down"):
        iter(collector)


def test_weights_an_actor_cannot_load_name_it():
    """A weight update that raises inside the actor surfaces at its next chunk, naming it."""
    policy = StepPolicy(1.0)
    collector = ray_collector(
        CountingEnv,
        policy,
        num_collectors=1,
        sync=True,
        frames_per_batch=10,
        total_frames=-1,
    )
    batches = iter(collector)
    next(batches)
    policy.step = nn.Parameter(torch.zeros(3))  # a shape the actor's copy cannot take
    collector.update_policy_weights_()
    prefix = ACTOR_RAISED.split("{pid}")[0].format(idx=0, restart=0)
    with pytest.raises(RuntimeError, match=re.escape(prefix)) as info:
        next(batches)
    assert "updating its policy weights" in str(info.value)

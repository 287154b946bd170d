"""The Ray actor behind ``RayCollector``: one of our collectors, one actor call per chunk.

This module never imports Ray at import time: ``RayCollector`` wraps ``CollectorActor`` with
``ray.remote`` once Ray is there, and the actor asks Ray about itself only inside its methods.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from .errors import ActorRestartedError

# Where each chunk says who produced it: one int64 per frame, so the entries survive
# stacking, concatenation, split_trajectories and replay buffers.
ACTOR = ("collector", "actor")
RESTART = ("collector", "restart")
CHUNK = ("collector", "chunk")

_NOT_RESTORED = (
    "RayCollector actor {idx} was restarted by Ray and has not received the current policy "
    "weights yet; RayCollector restores it before asking for data."
)


class CollectorActor:
    """Runs one collector in a Ray actor and answers ``next`` with one chunk of frames.

    ``index`` is the actor's place in the ``RayCollector``, ``restart`` how many times the
    collector has replaced or restored that place; both are written into every chunk
    (``("collector", "actor")``, ``("collector", "restart")``) with the chunk's number since the
    actor's start (``("collector", "chunk")``).
    """

    def __init__(
        self,
        collector_class: type,
        create_env_fn: Callable[..., Any] | list[Callable[..., Any]],
        policy: Any,
        collector_kwargs: dict[str, Any],
        index: int,
        restart: int,
    ) -> None:
        import ray

        self._index = index
        self._restart = restart
        with warnings.catch_warnings():
            # Ray 2.60 reads its own deprecated RuntimeContext.actor_id in this property
            warnings.simplefilter("ignore", DeprecationWarning)
            reconstructed = ray.get_runtime_context().was_current_actor_reconstructed
        # When Ray restarts an actor it runs __init__ again with the first arguments: the
        # policy holds the initial weights and the restart number is stale until restore().
        self._restored = not reconstructed
        self._collector = collector_class(
            create_env_fn, policy, total_frames=-1, **collector_kwargs
        )
        self._batches = iter(self._collector)
        self._chunk = 0

    def info(self) -> dict[str, Any]:
        """Where the actor runs: its index, restart number, process id and Ray node id."""
        import ray

        return {
            "actor": self._index,
            "restart": self._restart,
            "pid": os.getpid(),
            "node_id": ray.get_runtime_context().get_node_id(),
        }

    def restore(self, restart: int, weights: TensorDictBase | None) -> None:
        """After a restart by Ray: takes the collector's restart number and current weights."""
        if weights is not None:
            self._collector.update_policy_weights_(weights)
        self._restart = restart
        self._restored = True

    def next(self) -> TensorDictBase:
        """Collects one chunk and tags every frame with the actor, its restart and the chunk."""
        if not self._restored:
            raise ActorRestartedError(_NOT_RESTORED.format(idx=self._index))
        batch = next(
            self._batches
        ).copy()  # shallow: the tags must not enter the collector's buffer
        shape, device = batch.batch_size, batch.device
        for key, value in ((ACTOR, self._index), (RESTART, self._restart), (CHUNK, self._chunk)):
            batch.set(key, torch.full(shape, value, dtype=torch.int64, device=device))
        self._chunk += 1
        return batch

    def update_policy_weights_(self, weights: TensorDictBase) -> None:
        """Copies ``weights`` into the collector's policy."""
        self._collector.update_policy_weights_(weights)

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds the collector's envs; returns the seed that follows."""
        return self._collector.set_seed(seed, static_seed=static_seed)

    def shutdown(self) -> None:
        """Shuts the collector down (its envs, its worker processes), then ends the actor."""
        import ray

        self._collector.shutdown()
        ray.actor.exit_actor()  # an intentional exit: Ray does not restart the actor

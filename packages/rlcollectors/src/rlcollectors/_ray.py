"""RayCollector: our collectors on Ray actors, one call per chunk, surviving the loss of an actor."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

import rlcore
from rlcore import EnvBase

from . import _ray_args as args
from ._base import CollectorBase
from ._multi_sync import MultiSyncDataCollector
from ._ray_actor import CollectorActor
from ._split import TRAJ_IDS, split_trajectories
from ._sync import Policy, SyncDataCollector
from .errors import ActorRestartedError

MISSING_RAY = rlcore.missing_extra_message("RayCollector", "ray", "rlcollectors", "ray")
ACTOR_RAISED = (
    "RayCollector actor {idx} (restart {restart}, pid {pid}) raised while {doing}:\n{cause}"
)
ACTOR_LOST = (
    "RayCollector actor {idx} was lost {times} times, more than its max_restarts={budget} "
    "allows; last cause:\n{cause}"
)
ACTOR_TIMEOUT = (
    "RayCollector actors {idxs} did not answer within {timeout}s while {doing}; are the "
    "resources they ask for ({resources}) available in the cluster ({available})?"
)
_BAD_RANK = "worker_rank must be an int from 1 to {n} (or None for every actor), got {value!r}."
_RAY_RUNNING = "Ray is already initialized; ray_init_config={config!r} is ignored."

_SHUTDOWN_S = 10.0
_CHUNK_CALL = "collecting a chunk"
_RESTORE_CALL = "restoring its state after a restart"


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as err:
        raise ImportError(MISSING_RAY) from err
    return ray


def _unique_traj_ids(batch: TensorDictBase) -> TensorDictBase:
    """Numbers trajectories apart across rows (every dim but time), where ids restart per actor.

    A trajectory never spans two rows: each row is one env of one actor's collector.
    """
    ids = batch.get(TRAJ_IDS)
    if ids.dim() < 2:
        return batch
    width = int(ids.max()) + 1
    rows = torch.arange(ids.shape[:-1].numel(), device=ids.device).view(*ids.shape[:-1], 1)
    return batch.set(TRAJ_IDS, ids + rows * width)


class RayCollector(CollectorBase):
    """Runs our collectors on Ray actors and yields their chunks, recovering lost actors.

    Each of the ``num_collectors`` actors runs a ``SyncDataCollector`` (or a
    ``MultiSyncDataCollector`` of ``num_workers_per_collector`` worker processes) and answers one
    call per chunk, never one per step. With ``sync=True`` every actor collects
    ``frames_per_batch // num_collectors`` frames per batch and the chunks are stacked along a
    new leading dim of size ``num_collectors``, as torchrl does; with ``sync=False`` (default)
    every actor collects ``frames_per_batch`` frames and the first chunk ready (``ray.wait``) is
    yielded. Iteration stops once ``total_frames`` frames were yielded (``-1``: never); with a
    multiple of ``frames_per_batch`` that is exactly ``total_frames``.

    Policy weights go through Ray's object store once per update (one ``ray.put``, the
    reference passed to every actor). Every frame carries who produced it, as int64 entries:
    ``("collector", "actor")`` (the actor's index, 0-based), ``("collector", "restart")`` (0 for
    the first actor in that place, ``k`` once the collector restored or replaced it ``k`` times)
    and ``("collector", "chunk")`` (the chunk's number since that actor process started), beside
    ``("collector", "traj_ids")`` (per actor).

    **Lost actors.** An actor whose process dies (killed, out of memory, its node lost) is
    replaced: Ray restarts it (actors are created with ``max_restarts`` from ``remote_configs``,
    default 3, and ``max_task_retries=0``) or, once Ray has given up on it, the collector
    creates a new one. Either way the collector re-sends the current weights before asking the
    actor for data, and asks it again for the chunk it lost: no chunk is delivered twice or in
    part. An actor lost more than ``max_restarts`` times, a policy or env that raises inside an
    actor, and actors that do not answer within ``timeout`` seconds raise a RuntimeError naming
    the actor (no retry). A restarted actor's env is not re-seeded.

    If Ray is not initialized, the collector calls ``ray.init(**ray_init_config)`` (a local
    instance, or ``{"address": ...}`` for an existing cluster) and ``shutdown()`` stops that
    instance; a Ray you initialized yourself is left running. Envs, policy and collectors are
    sent to the actors with cloudpickle: on a cluster, every node needs ``rlcollectors``.

    Args:
        create_env_fn: an env factory, or one per collector.
        policy: as for ``SyncDataCollector`` (``None``: random actions); each actor gets a copy.
        frames_per_batch: frames per yielded batch (all actors together when ``sync``).
        total_frames: frames to collect in all, ``-1`` for no limit.
        device: passed to each actor's collector (one value, or one per collector).
        storing_device: passed to each actor's collector (one value, or one per collector).
        env_device: passed to each actor's collector (one value, or one per collector).
        policy_device: passed to each actor's collector (one value, or one per collector).
        max_frames_per_traj: passed to each actor's collector (``None`` or negative: no limit).
        reset_at_each_iter: passed to each actor's collector.
        split_trajs: yield batches split by trajectory (see ``split_trajectories``).
        collector_class: ``SyncDataCollector`` (or ``"single"``), ``MultiSyncDataCollector``
            (or ``"sync"``; its chunks default to ``cat_results="stack"``), or a subclass.
        collector_kwargs: more keyword arguments for each actor's collector (a dict, or one
            per collector).
        num_workers_per_collector: worker processes of each ``MultiSyncDataCollector``.
        sync: gather one chunk from every actor per batch (``True``) or yield the first ready.
        ray_init_config: keyword arguments for ``ray.init`` when Ray is not initialized.
        remote_configs: options for ``ray.remote`` of each actor (a dict, or one per
            collector), default ``{"num_cpus": 1, "max_restarts": 3}``; ``max_restarts``
            (3 when not given, ``-1``: unlimited) bounds how often one actor may be lost.
        num_collectors: number of actors (default: the length of ``create_env_fn``, else 1).
        update_after_each_batch: send the policy's weights before every batch (``sync``) or to
            the actor whose chunk was just yielded (async).
        max_weight_update_interval: update an actor's weights when it has produced more than
            this many batches since its last update (``-1``: never forced).
        timeout: seconds to wait for an actor's answer before raising.

    Examples:
        >>> import functools
        >>> from rlcollectors import RayCollector
        >>> from rlmocks import CountingEnv
        >>> collector = RayCollector(
        ...     functools.partial(CountingEnv, max_steps=4),
        ...     num_collectors=2,
        ...     sync=True,
        ...     frames_per_batch=20,
        ...     total_frames=40,
        ...     ray_init_config={"num_cpus": 2, "include_dashboard": False},
        ...     remote_configs={"num_cpus": 0.5},
        ... )
        >>> for batch in collector:
        ...     print(batch.shape, batch["collector", "actor"][:, 0].tolist())
        torch.Size([2, 10]) [0, 1]
        torch.Size([2, 10]) [0, 1]
        >>> collector.shutdown()  # also stops the Ray instance it started
    """

    def __init__(
        self,
        create_env_fn: Callable[..., EnvBase] | Sequence[Callable[..., EnvBase]],
        policy: Policy | None = None,
        *,
        frames_per_batch: int,
        total_frames: int = -1,
        device: torch.device | str | Sequence[torch.device | str | None] | None = None,
        storing_device: torch.device | str | Sequence[torch.device | str | None] | None = None,
        env_device: torch.device | str | Sequence[torch.device | str | None] | None = None,
        policy_device: torch.device | str | Sequence[torch.device | str | None] | None = None,
        max_frames_per_traj: int | None = None,
        reset_at_each_iter: bool = False,
        split_trajs: bool = False,
        collector_class: type | str = SyncDataCollector,
        collector_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        num_workers_per_collector: int = 1,
        sync: bool = False,
        ray_init_config: dict[str, Any] | None = None,
        remote_configs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        num_collectors: int | None = None,
        update_after_each_batch: bool = False,
        max_weight_update_interval: int = -1,
        timeout: float = 300.0,
    ) -> None:
        self._closed = True  # until the actors exist, so shutdown() from a failed init is a no-op
        self._actors: list[Any] = []
        self._owns_ray = False
        ray = _import_ray()
        env_fns = args.env_fns(create_env_fn, num_collectors)
        n = len(env_fns)
        self.num_collectors = n
        self.collector_class = args.collector_class(collector_class, num_workers_per_collector)
        self.frames_per_batch = frames_per_batch
        chunk = args.chunk_frames(frames_per_batch, n, sync, num_workers_per_collector)
        if max_frames_per_traj is not None and max_frames_per_traj < 0:
            max_frames_per_traj = None  # torchrl's "no limit"
        ours = {
            "max_frames_per_traj": [max_frames_per_traj] * n,
            "reset_at_each_iter": [reset_at_each_iter or None] * n,
            "device": args.per_collector(device, n, "device"),
            "storing_device": args.per_collector(storing_device, n, "storing_device"),
            "env_device": args.per_collector(env_device, n, "env_device"),
            "policy_device": args.per_collector(policy_device, n, "policy_device"),
        }
        self._collector_kwargs = args.actor_kwargs(
            self.collector_class, collector_kwargs, n, chunk, split_trajs, ours
        )
        self._remote_configs = args.remote_options(remote_configs, n)
        self._env_fns = [
            [fn] * num_workers_per_collector
            if issubclass(self.collector_class, MultiSyncDataCollector)
            else fn
            for fn in env_fns
        ]
        self.total_frames = total_frames
        self.sync = sync
        self.split_trajs = split_trajs
        self.update_after_each_batch = update_after_each_batch
        self.max_weight_update_interval = max_weight_update_interval
        self.timeout = timeout
        self.policy = policy
        self._frames = 0

        self._ray = ray
        self._remote_actor = ray.remote(CollectorActor)
        self._restarts = [0] * n
        self._since_update = [0] * n
        self._controls: list[list[Any]] = [[] for _ in range(n)]  # weight updates per actor
        self._pending: dict[Any, tuple[int, str]] = {}  # reference -> (actor, call)
        self._weights_version = 0  # weights put so far
        self._restored_version: dict[int, int] = {}  # actor -> version its pending restore sends
        self._info: list[dict[str, Any]] = [{} for _ in range(n)]
        if ray.is_initialized():
            if ray_init_config is not None:
                warnings.warn(_RAY_RUNNING.format(config=ray_init_config), stacklevel=2)
        else:
            ray.init(**(ray_init_config or {}))
            self._owns_ray = True
        self._closed = False
        try:
            self._weights_ref = (
                ray.put(TensorDict.from_module(policy).data)
                if isinstance(policy, nn.Module)
                else None
            )
            for idx in range(n):
                self._actors.append(self._spawn(idx))
            self._await_ready(range(n))
        except BaseException:
            self.shutdown()  # actors already created must not outlive a failed construction
            raise

    # ------------------------------------------------------------------ actors

    def _spawn(self, idx: int) -> Any:
        """A new actor in place ``idx``, with Ray restarts up to what is left of its budget.

        The policy goes by value: Ray restarts an actor from its constructor arguments, which
        must outlive the weight references this collector drops at each update.
        """
        options = dict(self._remote_configs[idx])
        budget = options.pop("max_restarts")
        remaining = -1 if budget == -1 else budget - self._restarts[idx]
        return self._remote_actor.options(
            **options, max_restarts=remaining, max_task_retries=0
        ).remote(
            self.collector_class,
            self._env_fns[idx],
            self.policy,
            self._collector_kwargs[idx],
            idx,
            self._restarts[idx],
        )

    def _await_ready(self, indices: Any) -> None:
        ray = self._ray
        refs = {self._actors[idx].info.remote(): idx for idx in indices}
        ready, waiting = ray.wait(list(refs), num_returns=len(refs), timeout=self.timeout)
        if waiting:
            self._fail_timeout(sorted(refs[ref] for ref in waiting), "starting")
        for ref in ready:
            idx = refs[ref]
            try:
                self._info[idx] = ray.get(ref)
            except ray.exceptions.RayError as err:
                self._fail(ACTOR_RAISED, idx, "starting its collector", err)

    def remote_collectors(self) -> list[Any]:
        """The Ray actor handles, one per collector, replacements included.

        Each answers ``info.remote()`` with its index, restart number, process id and node id.
        """
        return list(self._actors)

    def _request(self, idx: int) -> None:
        self._pending[self._actors[idx].next.remote()] = (idx, _CHUNK_CALL)

    def _restore(self, idx: int) -> None:
        # Ray fails calls sent while an actor restarts; retried, this one waits for the restart
        # (and fails if the actor is dead for good). Chunk calls are never retried: one must
        # not run on a restarted actor before its restore.
        restore = self._actors[idx].restore.options(max_task_retries=-1)
        self._pending[restore.remote(self._restarts[idx], self._weights_ref)] = (idx, _RESTORE_CALL)
        self._restored_version[idx] = self._weights_version

    def _restored(self, idx: int) -> None:
        """Actor ``idx`` is back: it gets weights put since its restore was sent, then a chunk call.

        An update sent meanwhile may have failed (the actor was restarting) or run before the
        retried restore overwrote it; sent now, it runs before the chunk call (same caller).
        """
        if self._restored_version.pop(idx) != self._weights_version:
            self._send_weights(idx)
        self._request(idx)

    def _next_chunk(self, doing: str) -> tuple[int, TensorDictBase | None]:
        """Waits for the first call done: ``(actor, chunk)``, or ``(actor, None)`` for the rest.

        The rest: a restore call done (the actor is then asked for its chunk), or an actor lost
        (it is then restored, or replaced first).
        """
        ray = self._ray
        ready, _ = ray.wait(list(self._pending), num_returns=1, timeout=self.timeout)
        if not ready:
            self._fail_timeout(sorted({idx for idx, _ in self._pending.values()}), doing)
        ref = ready[0]
        idx, call = self._pending.pop(ref)
        try:
            value = ray.get(ref)
        except ray.exceptions.RayTaskError as err:
            if call == _CHUNK_CALL and isinstance(err, ActorRestartedError):
                self._lost(idx, err)  # Ray restarted it while it was idle
                return idx, None
            self._check_controls(idx)
            self._fail(ACTOR_RAISED, idx, doing if call == _CHUNK_CALL else call, err)
        except ray.exceptions.ActorDiedError as err:
            if err.actor_init_failed:
                self._fail(ACTOR_RAISED, idx, "starting its collector", err)
            self._lost(idx, err)
            return idx, None
        except ray.exceptions.RayActorError as err:
            self._lost(idx, err)
            return idx, None
        if call == _RESTORE_CALL:
            self._restored(idx)
            return idx, None
        self._check_controls(idx)
        return idx, value

    def _lost(self, idx: int, err: Exception) -> None:
        """Actor ``idx`` lost its process: restore it once Ray restarted it, or replace it."""
        self._restarts[idx] += 1
        budget = self._remote_configs[idx]["max_restarts"]
        if budget != -1 and self._restarts[idx] > budget:
            self.shutdown()
            message = ACTOR_LOST.format(
                idx=idx, times=self._restarts[idx], budget=budget, cause=err
            )
            raise RuntimeError(message) from err
        if isinstance(err, self._ray.exceptions.ActorDiedError):
            # Ray has given up on this actor (its restarts spent, ray.kill, ...): a new one
            self._ray.kill(self._actors[idx], no_restart=True)
            self._actors[idx] = self._spawn(idx)
        self._since_update[idx] = 0
        self._restore(idx)

    def _check_controls(self, idx: int) -> None:
        """Raises if a weight update of actor ``idx`` raised (a lost actor is no error here)."""
        ray = self._ray
        done, self._controls[idx] = (
            ray.wait(self._controls[idx], num_returns=len(self._controls[idx]), timeout=0)
            if self._controls[idx]
            else ([], [])
        )
        for ref in done:
            try:
                ray.get(ref)
            except ray.exceptions.RayTaskError as err:
                self._fail(ACTOR_RAISED, idx, "updating its policy weights", err)
            except ray.exceptions.RayActorError:
                pass  # the actor was lost: its chunk call tells, and _lost restores the weights

    def _fail(self, template: str, idx: int, doing: str, err: Exception) -> NoReturn:
        info = self._info[idx]
        pid = getattr(err, "pid", None) or info.get("pid")
        self.shutdown()
        message = template.format(
            idx=idx, restart=self._restarts[idx], pid=pid, doing=doing, cause=err
        )
        raise RuntimeError(message) from err

    def _fail_timeout(self, indices: list[int], doing: str) -> NoReturn:
        resources = [self._remote_configs[idx] for idx in indices]
        available = self._ray.available_resources()
        self.shutdown()
        raise RuntimeError(
            ACTOR_TIMEOUT.format(
                idxs=indices,
                timeout=self.timeout,
                doing=doing,
                resources=resources,
                available=available,
            )
        )

    # ------------------------------------------------------------------ iteration

    def _wants_more(self) -> bool:
        return self.total_frames < 0 or self._frames < self.total_frames

    def _iterate(self) -> Iterator[TensorDictBase]:
        return self._iterate_sync() if self.sync else self._iterate_async()

    def _iterate_sync(self) -> Iterator[TensorDictBase]:
        n = self.num_collectors
        while self._wants_more():
            self._check_open()
            if self.update_after_each_batch:
                self.update_policy_weights_()
            self._pending.clear()
            for idx in range(n):
                self._request(idx)
            chunks: list[TensorDictBase | None] = [None] * n
            while self._pending:
                idx, chunk = self._next_chunk("collecting a chunk")
                if chunk is not None:
                    chunks[idx] = chunk
            batch = torch.stack(chunks, 0)
            self._frames += batch.numel()
            for idx in range(n):
                self._since_update[idx] += 1
            yield split_trajectories(_unique_traj_ids(batch)) if self.split_trajs else batch
            self._force_updates()

    def _iterate_async(self) -> Iterator[TensorDictBase]:
        while self._wants_more():
            self._check_open()
            busy = {idx for idx, _ in self._pending.values()}
            for idx in range(self.num_collectors):
                if idx not in busy:
                    self._request(idx)
            idx, chunk = self._next_chunk("collecting a chunk")
            if chunk is None:
                continue
            self._frames += chunk.numel()
            self._since_update[idx] += 1
            yield split_trajectories(_unique_traj_ids(chunk)) if self.split_trajs else chunk
            if self.update_after_each_batch:
                self.update_policy_weights_(idx + 1)
            self._force_updates()

    def _force_updates(self) -> None:
        interval = self.max_weight_update_interval
        if interval < 0 or self._weights_ref is None:
            return
        for idx in range(self.num_collectors):
            if self._since_update[idx] > interval:
                self.update_policy_weights_(idx + 1)

    # ------------------------------------------------------------------ commands

    def update_policy_weights_(self, worker_rank: int | None = None) -> None:
        """Sends the policy's current weights to every actor, or to actor ``worker_rank`` (1-based).

        The weights are put in Ray's object store once; each actor receives the reference and
        loads them before its next chunk. A no-op for a policy that is not an ``nn.Module``.
        """
        self._check_open()
        n = self.num_collectors
        if worker_rank is not None and (
            not isinstance(worker_rank, int) or not 1 <= worker_rank <= n
        ):
            raise ValueError(_BAD_RANK.format(n=n, value=worker_rank))
        if not isinstance(self.policy, nn.Module):
            return
        self._weights_ref = self._ray.put(TensorDict.from_module(self.policy).data)
        self._weights_version += 1
        for idx in range(n) if worker_rank is None else [worker_rank - 1]:
            self._send_weights(idx)

    def _send_weights(self, idx: int) -> None:
        update = self._actors[idx].update_policy_weights_.remote(self._weights_ref)
        self._controls[idx].append(update)
        self._since_update[idx] = 0

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds the actors' envs in turn (each gets the seed the previous returned); returns the last."""
        self._check_open()
        ray = self._ray
        for idx, actor in enumerate(self._actors):
            try:
                seed = ray.get(actor.set_seed.remote(seed, static_seed), timeout=self.timeout)
            except ray.exceptions.RayError as err:
                self._fail(ACTOR_RAISED, idx, "seeding its env", err)
        return seed

    def shutdown(self) -> None:
        """Shuts every actor's collector down, ends the actors and stops a Ray this collector started."""
        if self._closed:
            return
        self._closed = True
        ray = self._ray
        self._pending.clear()
        # actors that never started (no resources for them) would not answer
        closing = [
            actor.shutdown.remote() for idx, actor in enumerate(self._actors) if self._info[idx]
        ]
        if closing:
            ray.wait(closing, num_returns=len(closing), timeout=_SHUTDOWN_S)
        for actor in self._actors:
            ray.kill(actor, no_restart=True)
        self._actors = []
        if self._owns_ray:
            ray.shutdown()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_collectors={self.num_collectors}, sync={self.sync}, "
            f"frames_per_batch={self.frames_per_batch}, total_frames={self.total_frames}, "
            f"frames={self._frames}, restarts={self._restarts})"
        )

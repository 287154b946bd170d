"""MultiSyncDataCollector: one SyncDataCollector per worker process, batches gathered in order."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401 - registers the tensor reductions that share memory
from tensordict import TensorDict, TensorDictBase
from torch import nn

from rlcore import CloudpickleBox, EnvBase, WorkerPool, serve

from ._base import CollectorBase
from ._split import TRAJ_IDS, split_trajectories
from ._sync import Policy, SyncDataCollector

_NO_ENV_FNS = "create_env_fn must be a non-empty list of env factories (callables), got {value!r}."
_ENV_NOT_FACTORY = (
    "create_env_fn[{idx}] is an env instance; worker processes build their own envs, "
    "so pass a callable returning it (e.g. `lambda: MyEnv()`)."
)
_FRAMES_NOT_SPLIT = (
    "frames_per_batch={frames} cannot be split evenly between {n} workers; pass a multiple of {n}."
)
_BAD_CAT = "cat_results must be an int (the dim to concatenate along) or 'stack', got {value!r}."
_BAD_KWARGS = (
    "create_env_kwargs must be a dict or a list of {n} dicts (one per worker), got {value!r}."
)
LABEL = "MultiSyncDataCollector worker"
AFTER_LOSS = "; the collector was shut down."


def _run_collector_worker(conn, env_fn, policy, weights, kwargs) -> None:
    """Worker function: a ``SyncDataCollector`` answering ``next``, ``seed`` and ``update``.

    A batch buffer travels to the main process once (after ``share_memory_()``), and again
    whenever the main process says it has none (its reply was dropped by an interrupted
    exchange); later batches are written in place into it and only acknowledged.
    """

    def setup() -> dict[str, Callable[[Any], Any]]:
        collector = SyncDataCollector(env_fn.obj, policy.obj, return_same_td=True, **kwargs)
        batches = iter(collector)
        sent = None

        def next_batch(has_buffer: bool) -> TensorDictBase | None:
            nonlocal sent
            batch = next(batches)
            on_cuda = batch.device is not None and batch.device.type == "cuda"
            if on_cuda:
                torch.cuda.synchronize(batch.device)  # the main process reads on another stream
            if batch is sent and has_buffer:
                return None
            sent = batch
            # CPU storage moves to shared memory in place, CUDA tensors travel as IPC handles
            return batch if on_cuda else batch.share_memory_()

        return {
            "next": next_batch,
            "seed": lambda args: collector.set_seed(*args),
            "update": lambda _: collector.update_policy_weights_(weights),
            "close": lambda _: collector.shutdown(),
        }

    serve(conn, setup, dumps=ForkingPickler.dumps)


class MultiSyncDataCollector(CollectorBase):
    """Runs one ``SyncDataCollector`` per worker process and yields their batches together.

    At each iteration every worker collects ``frames_per_batch // n_workers`` frames;
    the batches are concatenated in worker order along ``cat_results`` (dim 0 by
    default), so with the same envs, policy and seeds the output equals
    ``torch.cat`` of single collectors' batches. Trajectory ids are per worker
    (offset to be unique only when ``split_trajs``).

    A worker that raises makes the main process raise its exception (same type when it can
    be rebuilt, else ``rlcore.WorkerRaisedError``), one that dies ``rlcore.WorkerDiedError``
    and one silent for ``timeout`` seconds ``rlcore.WorkerTimeoutError``, each naming the
    worker; the collector is then shut down. ``shutdown`` stops and joins every worker; a
    collector dropped without it is shut down when garbage-collected.

    Args:
        create_env_fn: one env factory per worker (lambdas are fine: they are
            sent with cloudpickle).
        policy: as for ``SyncDataCollector``; each worker gets a copy.
        frames_per_batch: frames per yielded batch, all workers together.
        total_frames: frames to collect in all, ``-1`` for no limit.
        device: passed to each worker's collector.
        storing_device: passed to each worker's collector.
        env_device: passed to each worker's collector.
        policy_device: passed to each worker's collector.
        max_frames_per_traj: passed to each worker's collector.
        reset_at_each_iter: passed to each worker's collector.
        create_env_kwargs: a dict for every factory, or one dict per worker.
        split_trajs: yield batches split by trajectory (see ``split_trajectories``).
        cat_results: the dim to concatenate the workers' batches along, or
            ``"stack"`` for a new leading worker dim.
        mp_start_method: ``"spawn"`` (default), ``"fork"`` or ``"forkserver"``.
        timeout: seconds to wait for a worker's answer (start-up included) before raising.

    Examples:
        >>> from rlcollectors import MultiSyncDataCollector
        >>> from rlmocks import CountingEnv
        >>> collector = MultiSyncDataCollector(
        ...     [CountingEnv, CountingEnv], frames_per_batch=20, total_frames=40
        ... )
        >>> [batch.shape for batch in collector]
        [torch.Size([20]), torch.Size([20])]
        >>> collector.shutdown()
    """

    def __init__(
        self,
        create_env_fn: Sequence[Callable[..., EnvBase]],
        policy: Policy | None = None,
        *,
        frames_per_batch: int,
        total_frames: int = -1,
        device: torch.device | str | None = None,
        storing_device: torch.device | str | None = None,
        env_device: torch.device | str | None = None,
        policy_device: torch.device | str | None = None,
        create_env_kwargs: dict[str, Any] | Sequence[dict[str, Any]] | None = None,
        max_frames_per_traj: int | None = None,
        reset_at_each_iter: bool = False,
        split_trajs: bool = False,
        cat_results: int | str = 0,
        mp_start_method: str = "spawn",
        timeout: float = 300.0,
    ) -> None:
        self._closed = True  # until workers exist, so shutdown() from a failed init is a no-op
        self._pool: WorkerPool | None = None
        if (
            isinstance(create_env_fn, EnvBase | str)
            or not isinstance(create_env_fn, Sequence)
            or not create_env_fn
        ):
            raise TypeError(_NO_ENV_FNS.format(value=create_env_fn))
        for idx, fn in enumerate(create_env_fn):
            if isinstance(fn, EnvBase):
                raise TypeError(_ENV_NOT_FACTORY.format(idx=idx))
        n = len(create_env_fn)
        if not isinstance(frames_per_batch, int) or frames_per_batch <= 0 or frames_per_batch % n:
            raise ValueError(_FRAMES_NOT_SPLIT.format(frames=frames_per_batch, n=n))
        if not (cat_results == "stack" or isinstance(cat_results, int)):
            raise ValueError(_BAD_CAT.format(value=cat_results))
        env_kwargs = self._per_worker_kwargs(create_env_kwargs, n)

        self.num_workers = n
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.split_trajs = split_trajs
        self.cat_results = cat_results
        self.timeout = timeout
        self._frames = 0
        self._buffers: list[TensorDictBase | None] = [None] * n
        self.policy = policy
        self._weights = self._shared_weights(policy)

        shipped_policy = CloudpickleBox(policy)
        worker_kwargs = {
            "frames_per_batch": frames_per_batch // n,
            "total_frames": -1,
            "device": device,
            "storing_device": storing_device,
            "env_device": env_device,
            "policy_device": policy_device,
            "max_frames_per_traj": max_frames_per_traj,
            "reset_at_each_iter": reset_at_each_iter,
        }
        workers = [
            (
                _run_collector_worker,
                (
                    CloudpickleBox(fn),
                    shipped_policy,
                    self._weights,
                    dict(worker_kwargs, create_env_kwargs=env_kwargs[idx]),
                ),
            )
            for idx, fn in enumerate(create_env_fn)
        ]
        # a failed start stops the workers already started (the pool does on its own)
        self._pool = WorkerPool(
            workers,
            start_method=mp_start_method,
            label=LABEL,
            timeout=timeout,
            timeout_arg="timeout",
            after_loss=AFTER_LOSS,
        )
        self._closed = False
        try:
            self._pool.gather("start")
        except BaseException:
            self.shutdown()
            raise

    @staticmethod
    def _per_worker_kwargs(kwargs: Any, n: int) -> list[dict[str, Any]]:
        if kwargs is None:
            return [{} for _ in range(n)]
        if isinstance(kwargs, dict):
            return [dict(kwargs) for _ in range(n)]
        if (
            isinstance(kwargs, Sequence)
            and len(kwargs) == n
            and all(isinstance(k, dict) for k in kwargs)
        ):
            return list(kwargs)
        raise TypeError(_BAD_KWARGS.format(n=n, value=kwargs))

    @staticmethod
    def _shared_weights(policy: Policy | None) -> TensorDictBase | None:
        if not isinstance(policy, nn.Module):
            return None
        weights = TensorDict.from_module(policy).data.clone()
        return (
            weights.share_memory_()
            if weights.device is None or weights.device.type == "cpu"
            else weights
        )

    def _iterate(self) -> Iterator[TensorDictBase]:
        while self.total_frames < 0 or self._frames < self.total_frames:
            self._check_open()
            has_buffer = {idx: buffer is not None for idx, buffer in enumerate(self._buffers)}
            batches = self._request("collect", "next", payloads=has_buffer)
            for idx, batch in enumerate(batches):
                if batch is not None:
                    self._buffers[idx] = batch
            out = self._gather()
            self._frames += out.numel()
            yield out

    def _gather(self) -> TensorDictBase:
        buffers = self._buffers
        if self.cat_results == "stack":
            out = torch.stack(buffers, 0)
            dim = 1
        else:
            out = torch.cat(buffers, self.cat_results)
            dim = self.cat_results
        if not self.split_trajs:
            return out
        ids, offset = [], 0
        for buffer in buffers:
            worker_ids = buffer.get(TRAJ_IDS) + offset
            offset = int(worker_ids.max()) + 1
            ids.append(worker_ids)
        out.set(
            TRAJ_IDS, torch.stack(ids, 0) if self.cat_results == "stack" else torch.cat(ids, dim)
        )
        return split_trajectories(out)

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds the workers' envs in turn (each gets the seed the previous returned); returns the last."""
        self._check_open()
        for idx in range(self.num_workers):
            (seed,) = self._request("seed", "seed", (seed, static_seed), indices=[idx])
        return seed

    def update_policy_weights_(
        self, policy_weights: TensorDictBase | nn.Module | None = None
    ) -> None:
        """Copies the policy's current weights (or the ones given) into every worker's policy."""
        self._check_open()
        if self._weights is None:
            return
        if policy_weights is None:
            policy_weights = self.policy
        if isinstance(policy_weights, nn.Module):
            policy_weights = TensorDict.from_module(policy_weights)
        self._weights.update_(policy_weights.data)
        self._request("update policy weights", "update")

    def _request(self, phase: str, command: str, payload: Any = None, **kwargs) -> list:
        """One exchange with the workers.

        Any failure shuts the collector down (a worker's collector cannot resume after
        raising); an interruption (Ctrl-C) does not: the next exchange drops its replies.
        """
        try:
            return self._pool.request(phase, command, payload, **kwargs)
        except Exception:
            self.shutdown()
            raise

    def shutdown(self) -> None:
        """Stops and joins every worker; iterating afterwards raises a RuntimeError."""
        self._closed = True
        self._buffers = [None] * len(getattr(self, "_buffers", ()))
        if self._pool is not None:
            self._pool.shutdown()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames}, frames={self._frames})"
        )

"""MultiSyncDataCollector: one SyncDataCollector per worker process, batches gathered in order."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401 - registers the tensor reductions that share memory
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import InteractionType
from torch import nn

from rlcore import EnvBase
from rlworkers import CloudpickleBox, WorkerPool, serve

from ._base import CollectorBase
from ._options import (
    DEFAULT_EXPLORATION_TYPE,
    PostProc,
    apply_postproc,
    check_init_random_frames,
    check_postproc,
    check_reset_when_done,
    exploration_from_args,
)
from ._split import TRAJ_IDS, split_trajectories
from ._sync import Policy, SyncDataCollector, warn_total_frames_remainder

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
_BAD_RESET_IDX = (
    "reset_idx must be None or a sequence of {n} bools (one per worker), got {value!r}."
)
_MISSING_WORKER_STATE = (
    "state_dict has no {key!r} entry (it holds {keys}); pass a MultiSyncDataCollector.state_dict() "
    "from a collector with {n} workers."
)
LABEL = "MultiSyncDataCollector worker"
DEFAULT_START_TIMEOUT_S = 300.0
AFTER_LOSS = "; the collector was shut down."


def _cpu_copy(state: Any) -> Any:
    """``state`` with every tensor copied to the CPU: the main process must not alias live tensors."""
    if isinstance(state, torch.Tensor):
        return state.detach().to("cpu", copy=True)
    if isinstance(state, Mapping):
        out = OrderedDict((key, _cpu_copy(value)) for key, value in state.items())
        metadata = getattr(state, "_metadata", None)  # nn.Module.state_dict's version info
        if metadata is not None:
            out._metadata = metadata
        return out
    return state


def _run_collector_worker(conn, env_fn, policy, weights, kwargs) -> None:
    """Worker function: a ``SyncDataCollector`` answering ``next``, ``seed``, ``update``, ``reset``,
    ``state_dict`` and ``load_state_dict``.

    A batch buffer travels to the main process once (after ``share_memory_()``), and again
    whenever the main process says it has none (its reply was dropped by an interrupted
    exchange); later batches are written in place into it and only acknowledged.
    """

    def setup() -> dict[str, Callable[[Any], Any]]:
        collector = SyncDataCollector(env_fn.obj, policy.obj, return_same_td=True, **kwargs)
        batches = iter(collector)
        sent = None

        def next_batch(args: tuple[bool, bool]) -> TensorDictBase | None:
            nonlocal sent
            has_buffer, random = args
            # the main process counts the frames of all workers against init_random_frames
            collector.init_random_frames = float("inf") if random else 0
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
            "reset": lambda _: collector.reset(),
            "state_dict": lambda _: _cpu_copy(collector.state_dict()),
            "load_state_dict": lambda state: collector.load_state_dict(state),
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

    The main process runs none of the envs' code: each worker builds its env and its
    ``SyncDataCollector``. A worker that raises makes the main process raise its exception
    (same type when it can be rebuilt, else ``rlworkers.WorkerRaisedError``), one that dies
    ``rlworkers.WorkerDiedError`` (with its signal, for a native crash) and one silent for
    ``timeout`` seconds (``start_timeout`` while starting) ``rlworkers.WorkerTimeoutError``,
    each naming the worker and the phase; the collector is then shut down. ``shutdown`` stops
    and joins every worker; a collector dropped without it is shut down when garbage-collected.

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
        init_random_frames: every worker takes random actions (from its env's
            action spec) while fewer than this many frames were yielded, all workers
            together; whole batches, so it is rounded up to a multiple of
            ``frames_per_batch``. ``None`` or negative: no random frames.
        reset_at_each_iter: passed to each worker's collector.
        postproc: a callable applied in this process to each gathered batch
            (after ``split_trajs``) before it is yielded; returns a tensordict.
        create_env_kwargs: a dict for every factory, or one dict per worker.
        split_trajs: yield batches split by trajectory (see ``split_trajectories``).
        exploration_type: passed to each worker's collector (see ``SyncDataCollector``).
        exploration_mode: deprecated alias of ``exploration_type`` (a string); warns.
        reset_when_done: must stay ``True`` (see ``SyncDataCollector``).
        set_truncated: passed to each worker's collector: the last step of every
            worker's share of the batch is marked truncated (see ``SyncDataCollector``).
        cat_results: the dim to concatenate the workers' batches along, or
            ``"stack"`` for a new leading worker dim.
        mp_start_method: ``"spawn"`` (default), ``"fork"`` or ``"forkserver"``.
        timeout: seconds to wait for a worker's batch or answer before raising (default
            300 s); start-up never counts against it.
        start_timeout: seconds the workers have to start (import, build their env, policy and
            collector) before ``WorkerTimeoutError`` names the one still silent, phase
            ``"start"`` (default 300 s: a spawned worker imports torch).

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
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: PostProc | None = None,
        split_trajs: bool = False,
        exploration_type: InteractionType = DEFAULT_EXPLORATION_TYPE,
        exploration_mode: str | None = None,
        reset_when_done: bool = True,
        cat_results: int | str = 0,
        set_truncated: bool = False,
        mp_start_method: str = "spawn",
        timeout: float = 300.0,
        start_timeout: float = DEFAULT_START_TIMEOUT_S,
    ) -> None:
        self._closed = True  # until workers exist, so shutdown() from a failed init is a no-op
        self._pool: WorkerPool | None = None
        check_reset_when_done(reset_when_done)
        check_postproc(postproc)
        init_random_frames = check_init_random_frames(init_random_frames)
        exploration_type = exploration_from_args(exploration_type, exploration_mode)
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
        warn_total_frames_remainder(total_frames, frames_per_batch)
        env_kwargs = self._per_worker_kwargs(create_env_kwargs, n)

        self.num_workers = n
        self.frames_per_batch = frames_per_batch
        self.total_frames = total_frames
        self.split_trajs = split_trajs
        self.cat_results = cat_results
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.init_random_frames = init_random_frames
        self.postproc = postproc
        self.exploration_type = exploration_type
        self.reset_when_done = reset_when_done
        self.set_truncated = set_truncated
        self._frames = 0
        self._iter = -1
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
            "exploration_type": exploration_type,
            "set_truncated": set_truncated,
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
            start_timeout=start_timeout,
            start_timeout_arg="start_timeout",
            after_loss=AFTER_LOSS,
            preload=("rlcollectors",),  # a fork server's workers start with torch imported
            daemon=False,  # a worker may run a ParallelEnv (torchrl 0.4's workers may too)
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
            random = self._frames < self.init_random_frames
            args = {idx: (buffer is not None, random) for idx, buffer in enumerate(self._buffers)}
            batches = self._request("collect", "next", payloads=args)
            for idx, batch in enumerate(batches):
                if batch is not None:
                    self._buffers[idx] = batch
            out = self._gather()
            self._frames += self.frames_per_batch
            self._iter += 1
            if self.postproc is not None:
                out = apply_postproc(self.postproc, out)
            yield out

    @property
    def frames_per_batch_worker(self) -> int:
        """Frames each worker collects per batch: ``frames_per_batch // num_workers``."""
        return self.frames_per_batch // self.num_workers

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

    def reset(self, reset_idx: Sequence[bool] | None = None) -> None:
        """Resets the envs of the workers flagged in ``reset_idx`` (default: all of them).

        Args:
            reset_idx: one bool per worker, ``True`` for the workers whose envs are reset;
                their next batch starts from the new state, with new trajectories.
        """
        self._check_open()
        if reset_idx is None:
            reset_idx = [True] * self.num_workers
        if (
            isinstance(reset_idx, str)
            or not isinstance(reset_idx, Sequence | torch.Tensor)
            or len(reset_idx) != self.num_workers
        ):
            raise ValueError(_BAD_RESET_IDX.format(n=self.num_workers, value=reset_idx))
        indices = [idx for idx, flag in enumerate(reset_idx) if bool(flag)]
        if indices:
            self._request("reset", "reset", indices=indices)

    def state_dict(self) -> OrderedDict:
        """The workers' ``SyncDataCollector.state_dict()`` (as ``"worker0"``, ``"worker1"``...,
        with every tensor copied to the CPU), plus ``"frames"`` and ``"iter"``, as in torchrl 0.4.
        """
        self._check_open()
        states = self._request("state_dict", "state_dict")
        state = OrderedDict((f"worker{idx}", worker) for idx, worker in enumerate(states))
        state["frames"] = self._frames
        state["iter"] = self._iter
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Loads a ``state_dict()`` into the workers' collectors and restores the counts.

        A worker that fails to load it (e.g. a policy of another shape) raises in this process
        and the collector is shut down, as after any worker failure.
        """
        self._check_open()
        keys = [f"worker{idx}" for idx in range(self.num_workers)] + ["frames", "iter"]
        for key in keys:
            if key not in state_dict:
                raise KeyError(
                    _MISSING_WORKER_STATE.format(key=key, keys=list(state_dict), n=self.num_workers)
                )
        payloads = {idx: state_dict[f"worker{idx}"] for idx in range(self.num_workers)}
        self._request("load_state_dict", "load_state_dict", payloads=payloads)
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])

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

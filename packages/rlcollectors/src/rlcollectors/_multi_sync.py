"""MultiSyncDataCollector: one SyncDataCollector per worker process, batches gathered in order."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import torch
import torch.multiprocessing as mp  # registers the tensor reductions that share memory over pipes
from tensordict import TensorDict, TensorDictBase
from torch import nn

from rlcore import CloudpickleBox, EnvBase, clean_worker_environ

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
_WORKER_DIED = (
    "MultiSyncDataCollector worker {idx} (pid {pid}) died with exit code {code} while {doing}."
)
_WORKER_FAILED = "MultiSyncDataCollector worker {idx} raised while {doing}:\n{tb}"
_WORKER_TIMEOUT = "MultiSyncDataCollector worker {idx} (pid {pid}) did not answer within {timeout}s while {doing}."
_UNKNOWN_COMMAND = "collector worker got unknown command {cmd!r}; expected one of {known}."
_COMMANDS = ("next", "seed", "update", "close")
_POLL_S = 1.0
_JOIN_S = 10.0


def _run_collector_worker(pipe, env_fn, policy, weights, kwargs) -> None:
    """Worker loop: answers each command from the main process with one small message.

    A batch buffer travels through the pipe once, after ``share_memory_()``; later batches
    are written in place into it and only acknowledged.
    """
    collector = None
    try:
        collector = SyncDataCollector(env_fn.obj, policy.obj, return_same_td=True, **kwargs)
        batches = iter(collector)
        sent = None
        pipe.send(("ready", None))
        while True:
            cmd, data = pipe.recv()
            if cmd == "next":
                batch = next(batches)
                on_cuda = batch.device is not None and batch.device.type == "cuda"
                if on_cuda:
                    torch.cuda.synchronize(batch.device)  # the main process reads on another stream
                if batch is sent:
                    pipe.send(("batch", None))
                else:
                    # a new buffer: CPU storage moves to shared memory in place, CUDA tensors
                    # travel as IPC handles; later batches overwrite it and are only acknowledged
                    pipe.send(("batch", batch if on_cuda else batch.share_memory_()))
                    sent = batch
            elif cmd == "seed":
                pipe.send(("seed", collector.set_seed(*data)))
            elif cmd == "update":
                collector.update_policy_weights_(weights)
                pipe.send(("updated", None))
            elif cmd == "close":
                break
            else:
                raise ValueError(_UNKNOWN_COMMAND.format(cmd=cmd, known=_COMMANDS))
    except (EOFError, BrokenPipeError, KeyboardInterrupt):
        pass  # the main process went away
    except BaseException:
        try:
            pipe.send(("error", traceback.format_exc()))
        except (BrokenPipeError, OSError):
            pass
    finally:
        if collector is not None:
            collector.shutdown()
        pipe.close()


class MultiSyncDataCollector(CollectorBase):
    """Runs one ``SyncDataCollector`` per worker process and yields their batches together.

    At each iteration every worker collects ``frames_per_batch // n_workers`` frames;
    the batches are concatenated in worker order along ``cat_results`` (dim 0 by
    default), so with the same envs, policy and seeds the output equals
    ``torch.cat`` of single collectors' batches. Trajectory ids are per worker
    (offset to be unique only when ``split_trajs``).

    A worker that raises or dies makes the main process raise a RuntimeError
    naming it; ``shutdown`` stops and joins every worker.

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
        timeout: seconds to wait for a worker's answer before raising.

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
        self._procs: list[Any] = []
        self._pipes: list[Any] = []
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

        clean_worker_environ()
        ctx = mp.get_context(mp_start_method)
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
        try:
            for idx, fn in enumerate(create_env_fn):
                parent, child = ctx.Pipe()
                proc = ctx.Process(
                    target=_run_collector_worker,
                    args=(
                        child,
                        CloudpickleBox(fn),
                        shipped_policy,
                        self._weights,
                        dict(worker_kwargs, create_env_kwargs=env_kwargs[idx]),
                    ),
                    daemon=True,
                    name=f"MultiSyncDataCollector-worker-{idx}",
                )
                try:
                    proc.start()
                except BaseException:
                    parent.close()
                    raise
                finally:
                    child.close()
                self._procs.append(proc)
                self._pipes.append(parent)
                self._closed = False
        except BaseException:
            self.shutdown()  # workers already started must not outlive a failed construction
            raise
        for idx in range(n):
            self._receive(idx, "starting its collector")

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
            for idx in range(self.num_workers):
                self._send(idx, ("next", None), "collecting a batch")
            for idx in range(self.num_workers):
                batch = self._receive(idx, "collecting a batch")
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
            self._send(idx, ("seed", (seed, static_seed)), "seeding its env")
            seed = self._receive(idx, "seeding its env")
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
        for idx in range(self.num_workers):
            self._send(idx, ("update", None), "updating its policy weights")
        for idx in range(self.num_workers):
            self._receive(idx, "updating its policy weights")

    def _send(self, idx: int, message: tuple[str, Any], doing: str) -> None:
        try:
            self._pipes[idx].send(message)
        except (BrokenPipeError, ConnectionResetError, OSError):
            self._fail_dead(idx, doing)

    def _fail_dead(self, idx: int, doing: str) -> NoReturn:
        proc = self._procs[idx]
        proc.join(_JOIN_S)
        self._fail(_WORKER_DIED.format(idx=idx, pid=proc.pid, code=proc.exitcode, doing=doing))

    def _receive(self, idx: int, doing: str) -> Any:
        pipe, proc = self._pipes[idx], self._procs[idx]
        deadline = time.monotonic() + self.timeout
        try:
            while not pipe.poll(_POLL_S):
                if not proc.is_alive():
                    raise EOFError
                if time.monotonic() > deadline:
                    proc.terminate()  # a hung worker would not answer the close message either
                    self._fail(
                        _WORKER_TIMEOUT.format(
                            idx=idx, pid=proc.pid, timeout=self.timeout, doing=doing
                        )
                    )
            msg, data = pipe.recv()
        except (EOFError, ConnectionResetError):
            self._fail_dead(idx, doing)
        if msg == "error":
            self._fail(_WORKER_FAILED.format(idx=idx, doing=doing, tb=data))
        return data

    def _fail(self, message: str) -> NoReturn:
        self.shutdown()
        raise RuntimeError(message)

    def shutdown(self) -> None:
        """Stops and joins every worker; iterating afterwards raises a RuntimeError."""
        if self._closed:
            return
        self._closed = True
        self._buffers = [None] * len(self._procs)
        for pipe, proc in zip(self._pipes, self._procs):
            if proc.is_alive():
                try:
                    pipe.send(("close", None))
                except (BrokenPipeError, OSError):
                    pass
        for proc in self._procs:
            proc.join(_JOIN_S)
            if proc.is_alive():
                proc.terminate()
                proc.join(_JOIN_S)
        for pipe in self._pipes:
            pipe.close()

    def __del__(self) -> None:
        if getattr(self, "_closed", True) is False:
            self.shutdown()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames}, frames={self._frames})"
        )

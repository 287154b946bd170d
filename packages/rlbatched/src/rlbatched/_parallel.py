"""ParallelEnv: one process per sub-env, data exchanged through one shared tensordict."""

from __future__ import annotations

import functools
import multiprocessing as mp
import os
import pickle
import select
import signal
import sys
import traceback
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import cloudpickle
import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rlcore import CloudpickleBox, EnvBase, clean_worker_environ

from ._batched_base import BatchedEnvBase, step_function
from ._serial import SerialEnv
from ._shared import SharedLayout
from ._td_fast import clone, copy_into, get_many, leaves, shallow_copy
from ._workers import (
    CAN_SPIN,
    ERROR,
    OK,
    STEP,
    VALUE,
    WORKER_SPIN_S,
    WorkerPool,
    _ThreadBudget,
    wait_briefly,
)

DEFAULT_START_METHOD = "spawn"
UNKNOWN_COMMAND_ERROR = (
    "Unknown ParallelEnv worker command {command!r}; expected one of "
    "'step', 'reset', 'seed', 'getattr', 'call', 'close'."
)
START_TIMEOUT_S = 300.0  # floor on the time given to a new worker to import and build its env


def _closes_on_worker_loss(method: Callable) -> Callable:
    """Mark the env closed when a call ended with the worker pool shut down (dead/hung worker)."""

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        try:
            return method(self, *args, **kwargs)
        except BaseException:
            if self._pool is not None and not self._pool.alive:
                self.close()
            raise

    return wrapper


_SERIAL_KWARGS = ("create_env_kwargs", "share_individual_td", "shared_memory", "device")


class ParallelEnv(BatchedEnvBase):
    """Runs ``num_workers`` envs in worker processes and batches their data.

    Each worker owns a slice of one shared-memory tensordict
    (``shared_tensordict_parent``): a step writes the actions into it, wakes the
    workers with one byte each and waits for one byte back. What ``step``,
    ``reset`` and ``rollout`` return is a copy owned by the caller.

    Args:
        num_workers: number of sub-envs (and processes).
        create_env_fn: a callable building the env, or one callable per worker.
        create_env_kwargs: keyword arguments for ``create_env_fn``, one dict or one per worker.
        share_individual_td: one shared tensordict per worker, stacked lazily
            (default: only when the workers' specs differ).
        shared_memory: kept for API compatibility; data always go through shared memory.
        device: device of the batched env's outputs (default: the sub-envs' device).
        serial_for_single: with one worker, build a ``SerialEnv`` instead.
        mp_start_method: ``"spawn"`` (default), ``"fork"`` or ``"forkserver"``.
        num_threads: torch threads of the main process once started (default: the
            current count minus one per worker, given back on close).
        num_sub_threads: torch threads of each worker.
        worker_timeout: seconds to wait for a worker's answer before declaring it hung
            (at start-up, at least ``START_TIMEOUT_S`` = 300 s, for imports and env building).

    Examples:
        >>> from rlbatched import ParallelEnv
        >>> from rlmocks import ContinuousActionVecMockEnv
        >>> env = ParallelEnv(2, ContinuousActionVecMockEnv)
        >>> env.rollout(3).batch_size
        torch.Size([2, 3])
        >>> env.close()
    """

    def __new__(cls, *args, serial_for_single: bool = False, **kwargs):
        num_workers = args[0] if args else kwargs.get("num_workers")
        if serial_for_single and num_workers == 1:
            serial_kwargs = {k: v for k, v in kwargs.items() if k in _SERIAL_KWARGS}
            create_env_fn = args[1] if len(args) > 1 else kwargs["create_env_fn"]
            return SerialEnv(1, create_env_fn, **serial_kwargs)
        return super().__new__(cls)

    def __init__(
        self,
        num_workers: int,
        create_env_fn: Callable[..., EnvBase] | Sequence[Callable[..., EnvBase]],
        create_env_kwargs: dict | Sequence[dict] | None = None,
        share_individual_td: bool | None = None,
        shared_memory: bool = True,
        device: torch.device | str | int | None = None,
        serial_for_single: bool = False,
        mp_start_method: str | None = None,
        num_threads: int | None = None,
        num_sub_threads: int = 1,
        worker_timeout: float = 60.0,
    ):
        super().__init__(
            num_workers,
            create_env_fn,
            create_env_kwargs,
            share_individual_td=share_individual_td,
            shared_memory=shared_memory,
            device=device,
            serial_for_single=serial_for_single,
        )
        self._mp_start_method = mp_start_method or DEFAULT_START_METHOD
        self.num_threads = num_threads
        self.num_sub_threads = num_sub_threads
        self.worker_timeout = worker_timeout
        self._pool: WorkerPool | None = None
        self._workers: list = []
        self._finalizer: weakref.finalize | None = None
        self._drop_views()
        self.is_closed = True

    # ------------------------------------------------------------------ lifecycle
    def _started(self) -> bool:
        return self._pool is not None and self._pool.alive

    def _start_workers(self) -> None:
        layout = SharedLayout(self._buffer_template())
        buffer = layout.allocate()
        parent = layout.views(buffer)
        clean_worker_environ()
        ctx = mp.get_context(self._mp_start_method)
        pickling = self._mp_start_method != "fork"
        # looked up now, so that a replacement installed on the module is honoured
        run_fn = sys.modules[__name__]._run_worker_pipe_shared_mem
        procs, conns = [], []
        try:
            for index in range(self.num_workers):
                fn, kwargs = self.create_env_fn[index], self.create_env_kwargs[index]
                parent_conn, child_conn = ctx.Pipe()
                proc = ctx.Process(
                    target=_worker_entry,
                    args=(
                        run_fn,
                        self.num_sub_threads,
                        child_conn,
                        index,
                        CloudpickleBox(fn) if pickling else fn,
                        CloudpickleBox(kwargs) if pickling else kwargs,
                        buffer,
                        layout,
                    ),
                    name=f"ParallelEnv-worker-{index}",
                    daemon=True,
                )
                proc.start()
                child_conn.close()
                procs.append(proc)
                conns.append(parent_conn)
        except BaseException:
            WorkerPool(procs, conns, self.worker_timeout, 0).shutdown()
            raise
        if self.num_threads is None:
            _ThreadBudget.take(self.num_workers)
            taken = self.num_workers
        else:
            torch.set_num_threads(self.num_threads)
            taken = 0
        pool = WorkerPool(procs, conns, self.worker_timeout, taken)
        self._finalizer = weakref.finalize(self, pool.shutdown)
        self._pool = pool
        self._workers = procs
        self.shared_tensordict_parent = parent
        self._sync_cuda = buffer.device.type == "cuda"
        self._bind_views(parent)
        self.is_closed = False
        try:
            # imports and env construction in a fresh process can be slow on a loaded machine
            pool.gather("start", timeout=max(self.worker_timeout, START_TIMEOUT_S))
        except BaseException:
            self.close()
            raise

    def _buffer_template(self) -> TensorDictBase:
        if self._lazy_stack:
            return LazyStackedTensorDict(*(_zero_td(meta, ()) for meta in self._metas), stack_dim=0)
        return _zero_td(self._metas[0], (self.num_workers,))

    def _bind_views(self, parent: TensorDictBase) -> None:
        """Cache the views of the shared tensordict that each call reads or writes."""
        self._next_view = parent.get("next")
        if self._lazy_stack:
            workers = range(self.num_workers)
            self._reset_view = LazyStackedTensorDict(
                *(parent[i].select(*self._reset_output_keys(i), strict=False) for i in workers),
                stack_dim=0,
            )
            self._in_view = LazyStackedTensorDict(
                *(parent[i].select(*self._input_keys(i), strict=False) for i in workers),
                stack_dim=0,
            )
        else:
            self._reset_view = parent.select(*self._reset_output_keys(0), strict=False)
            self._in_view = parent.select(*self._input_keys(0), strict=False)
        self._in_leaves = _split(leaves(self._in_view))

    def close(self) -> None:
        """Stop the workers and release shared memory; a later ``reset`` starts them again."""
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._pool = None
        self._drop_views()
        self.is_closed = True

    def _drop_views(self) -> None:
        """Forget every view of the shared buffer, so that its memory is released."""
        self.shared_tensordict_parent: TensorDictBase | None = None
        self._next_view = self._reset_view = self._in_view = self._in_leaves = None

    @_closes_on_worker_loss
    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed worker i with the seed returned by worker i-1; return the last one."""
        self.start()
        for index in range(self.num_workers):
            self._pool.send(index, "seed", (seed, static_seed))
            (seed,) = self._pool.gather("set_seed", [index])
        return seed

    # ------------------------------------------------------------------ data path
    @_closes_on_worker_loss
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_batch(tensordict)
        self.start()
        with torch.no_grad():
            self._write_inputs(tensordict)
            self._pool.broadcast(STEP)
            self._pool.gather("step")
            return self._read(self._next_view)

    def _step_proc_data(self, next_td: TensorDictBase) -> TensorDictBase:
        # the workers already post-processed their env's output (done completion, reward
        # shapes) and the shared buffer holds every spec key: only type checks remain
        if self._run_type_checks:
            return super()._step_proc_data(next_td)
        return next_td

    @_closes_on_worker_loss
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        self.start()
        masks = self._reset_masks(tensordict)
        needs = self._workers_to_reset(masks)
        with torch.no_grad():
            if tensordict is not None:
                self._write_inputs(tensordict, self._reset_view)
            indices = [i for i, need in enumerate(needs) if need]
            for index in indices:
                worker_masks = None
                if masks is not None:
                    worker_masks = {k: m[index].cpu().numpy() for k, m in masks.items()}
                self._pool.send(index, "reset", (worker_masks, kwargs, tensordict is not None))
            self._pool.gather("reset", indices)
            return self._read(self._reset_view)

    def _write_inputs(self, tensordict: TensorDictBase, view: TensorDictBase | None = None) -> None:
        if view is None and self._in_leaves is not None:
            keys, dsts = self._in_leaves
            copy_into(dsts, get_many(tensordict, keys))
        else:
            view = self._in_view if view is None else view
            if isinstance(view, LazyStackedTensorDict):
                pairs = zip(view.tensordicts, tensordict.unbind(0))
            else:
                pairs = [(view, tensordict)]
            for dst, src in pairs:
                src_keys = set(src.keys(True, True))
                keys = [key for key in dst.keys(True, True) if key in src_keys]
                if keys:
                    dst.update_(src.select(*keys))
        if self._sync_cuda:
            torch.cuda.synchronize(self.shared_tensordict_parent.device)

    def _read(self, view: TensorDictBase) -> TensorDictBase:
        if self.device is not None and view.device != self.device:
            return view.to(self.device)
        return clone(view)

    # ------------------------------------------------------------------ forwarding
    @_closes_on_worker_loss
    def _forward_attr(self, name: str) -> Any:
        for index in range(self.num_workers):
            self._pool.send(index, "getattr", name)
        kinds = self._pool.gather(f"getattr({name!r})")
        if all(kind == "callable" for kind, _ in kinds):
            return functools.partial(self._call_workers, name)
        return [value for _, value in kinds]

    @_closes_on_worker_loss
    def _call_workers(self, name: str, *args, **kwargs) -> list:
        """Call the sub-envs' method ``name`` in every worker; one result per worker."""
        for index in range(self.num_workers):
            self._pool.send(index, "call", (name, args, kwargs))
        return self._pool.gather(f"{name}()")


def _zero_td(meta, batch: tuple) -> TensorDictBase:
    """Zeros for every key a worker reads or writes: root inputs and outputs, and ``next``."""
    out, inp = meta.output_spec, meta.input_spec
    root = out["full_observation_spec"].zero(batch)
    for spec in (out["full_done_spec"], inp["full_state_spec"], inp["full_action_spec"]):
        root.update(spec.zero(batch))
    nxt = out["full_observation_spec"].zero(batch)
    nxt.update(out["full_reward_spec"].zero(batch))
    nxt.update(out["full_done_spec"].zero(batch))
    root.set("next", nxt)
    return root


# ---------------------------------------------------------------------- worker side
def _worker_entry(run_fn: Callable, num_threads: int, *args) -> None:
    """Process target: set the thread count first, run the worker loop, then exit at once.

    The env was closed by the loop; skipping interpreter teardown (seconds with torch
    imported) lets ``close()`` join the worker in milliseconds.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the main process's to handle
    torch.set_num_threads(num_threads)
    run_fn(*args)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _error_payload(err: BaseException) -> bytes:
    try:
        original = cloudpickle.dumps(err)
    except Exception:
        original = None
    return ERROR + pickle.dumps((type(err).__name__, str(err), traceback.format_exc(), original))


class _WorkerEnv:
    """A sub-env bound to its slice of the shared tensordict (lives in the worker)."""

    def __init__(self, env: EnvBase, shared: TensorDictBase):
        self.env = env
        self.step_fn = step_function(env)
        self.root = shared.exclude("next")
        self.next = shared.get("next")
        self.next_leaves = _split(leaves(self.next))
        reset_keys = set(env.full_observation_spec.keys(True, True))
        reset_keys |= set(env.full_done_spec.keys(True, True))
        reset_keys |= set(env.full_state_spec.keys(True, True))
        self.reset_view = self.root.select(*reset_keys, strict=False)
        self.reset_leaves = _split(leaves(self.reset_view))
        self.sync_cuda = self.root.device is not None and self.root.device.type == "cuda"

    def step(self) -> None:
        _write(self.next, self.next_leaves, self.step_fn(shallow_copy(self.root)))
        if self.sync_cuda:
            torch.cuda.synchronize(self.root.device)

    def reset(self, masks: dict | None, kwargs: dict, has_input: bool) -> None:
        """Reset the env; it is given its shared slice (where the main process wrote the
        caller's entries) when the caller passed a tensordict, as ``SerialEnv`` passes it."""
        td = None
        if masks is not None or has_input:
            td = self.root.clone()
        if masks is not None:
            for key, mask in masks.items():
                td.set(key, torch.from_numpy(mask).to(self.root.device))
        out = self.env.reset(td, **kwargs)
        _write(self.reset_view, self.reset_leaves, out)
        if self.sync_cuda:
            torch.cuda.synchronize(self.root.device)


def _split(pairs: list | None) -> tuple[list, list] | None:
    """``[(key, tensor)]`` -> ``([keys], [tensors])``."""
    if pairs is None:
        return None
    return [key for key, _ in pairs], [tensor for _, tensor in pairs]


def _write(view: TensorDictBase, leaves: list | None, src: TensorDictBase) -> None:
    if leaves is None:
        view.update_(src.select(*view.keys(True, True), strict=False))
        return
    keys, dsts = leaves
    copy_into(dsts, get_many(src, keys))


def _run_worker_pipe_shared_mem(
    conn,
    index: int,
    env_fn: Callable[..., EnvBase] | CloudpickleBox,
    env_kwargs: dict | CloudpickleBox,
    buffer: torch.Tensor,
    layout: SharedLayout,
) -> None:
    """Worker loop: build the env on its shared slice, then serve commands until "close"."""
    torch.set_grad_enabled(False)
    try:
        if isinstance(env_fn, CloudpickleBox):
            env_fn, env_kwargs = env_fn.obj, env_kwargs.obj
        worker = _WorkerEnv(env_fn(**env_kwargs), layout.views(buffer)[index])
    except Exception as err:
        conn.send_bytes(_error_payload(err))
        return
    conn.send_bytes(OK)
    poller = None
    if CAN_SPIN:
        poller = select.poll()
        poller.register(conn.fileno(), select.POLLIN)
    while True:
        if poller is not None:
            wait_briefly(poller, 1, WORKER_SPIN_S)
        try:
            message = conn.recv_bytes()
        except (EOFError, OSError):
            break  # the main process is gone
        try:
            if message == STEP:
                worker.step()
                conn.send_bytes(OK)
                continue
            command, payload = pickle.loads(message)
            if command == "close":
                worker.env.close()
                break
            conn.send_bytes(_handle(worker, command, payload))
        except Exception as err:
            conn.send_bytes(_error_payload(err))


def _handle(worker: _WorkerEnv, command: str, payload: Any) -> bytes:
    env = worker.env
    if command == "reset":
        worker.reset(*payload)
        return OK
    if command == "seed":
        seed, static_seed = payload
        return VALUE + pickle.dumps(env.set_seed(seed, static_seed=static_seed))
    if command == "getattr":
        value = getattr(env, payload)
        if callable(value):
            return VALUE + pickle.dumps(("callable", None))
        return VALUE + pickle.dumps(("value", value))
    if command == "call":
        name, args, kwargs = payload
        return VALUE + pickle.dumps(getattr(env, name)(*args, **kwargs))
    raise ValueError(UNKNOWN_COMMAND_ERROR.format(command=command))

"""ParallelEnv: one process per sub-env, data exchanged through one shared tensordict."""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rlcore import CloudpickleBox, EnvBase, WorkerPool, serve

from ._batched_base import BatchedEnvBase, _parts, step_function
from ._inputs import ACTION, DONE, OBSERVATION, STATE, check_flat
from ._serial import SerialEnv
from ._shared import SharedLayout
from ._td_fast import clone, copy_into, get_many, leaves, shallow_copy
from ._threads import ThreadBudget

DEFAULT_START_METHOD = "spawn"
DEFAULT_WORKER_TIMEOUT_S = 60.0  # a step, reset or call, when worker_timeout is not set
DEFAULT_START_TIMEOUT_S = 300.0  # start-up (imports, env building), when worker_timeout is not set
STEP = b"s"  # the one-byte per-step command
LABEL = "ParallelEnv worker"
AFTER_LOSS = "; the env was closed and reopens on the next reset()."
NO_SLOT = (
    "ParallelEnv: {role} {key!r} is in the env's specs but not in the shared buffer, laid out "
    "from the sub-envs' specs when the workers started; edit the sub-envs' specs (in their "
    "constructor or factory) rather than the ParallelEnv's."
)
STEP_ROLES = (ACTION, STATE, OBSERVATION)
RESET_ROLES = (ACTION, STATE, OBSERVATION, DONE)


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

    Inputs are checked as in ``SerialEnv`` before anything reaches a worker (every action
    leaf present, exact shapes, values that fit the spec's dtype). A worker that raises,
    dies or hangs gives an exception naming it (``rlcore.WorkerDiedError``,
    ``rlcore.WorkerTimeoutError``, or the worker's own exception type); a lost worker closes
    the env. A closed env raises ``rlcore.EnvClosedError`` when stepped, until ``reset()``.

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
        worker_timeout: seconds to wait for a worker's answer (start-up included) before
            raising ``WorkerTimeoutError``. Default: 60 s for a step, reset or call and 300 s
            for start-up (a spawned worker imports torch and builds its env).

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
        worker_timeout: float | None = None,
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
        boxed = self._mp_start_method != "fork"
        # looked up now, so that a replacement installed on the module is honoured
        run_fn = sys.modules[__name__]._run_worker_pipe_shared_mem
        workers = [
            (
                _worker_entry,
                (
                    run_fn,
                    self.num_sub_threads,
                    index,
                    CloudpickleBox(fn) if boxed else fn,
                    CloudpickleBox(kwargs) if boxed else kwargs,
                    buffer,
                    layout,
                ),
            )
            for index, (fn, kwargs) in enumerate(zip(self.create_env_fn, self.create_env_kwargs))
        ]
        if self.num_threads is None:
            ThreadBudget.take(self.num_workers)  # the pool gives them back when it stops
            give_back = functools.partial(ThreadBudget.give_back, self.num_workers)
        else:
            torch.set_num_threads(self.num_threads)
            give_back = None
        timeout = self.worker_timeout
        try:
            pool = WorkerPool(
                workers,
                start_method=self._mp_start_method,
                label=LABEL,
                timeout=DEFAULT_WORKER_TIMEOUT_S if timeout is None else timeout,
                timeout_arg="worker_timeout",
                after_loss=AFTER_LOSS,
                on_shutdown=give_back,
            )
            self._finalizer = weakref.finalize(self, pool.shutdown)
            self._pool = pool
            self._workers = pool.procs
            parent = layout.views(buffer)
            self.shared_tensordict_parent = parent
            self._sync_cuda = buffer.device.type == "cuda"
            self._bind_views(parent)
            pool.gather("start", timeout=DEFAULT_START_TIMEOUT_S if timeout is None else timeout)
        except BaseException:
            # release the shared buffer now: this frame stays alive in the traceback
            workers = buffer = parent = layout = None
            self._shutdown()
            raise
        self.is_closed = False

    def _buffer_template(self) -> TensorDictBase:
        if self._lazy_stack:
            return LazyStackedTensorDict(*(_zero_td(meta, ()) for meta in self._metas), stack_dim=0)
        return _zero_td(self._metas[0], (self.num_workers,))

    def _bind_views(self, parent: TensorDictBase) -> None:
        """Cache the views of the shared tensordict that each call reads or writes."""
        self._next_view = parent.get("next")
        workers = range(self.num_workers)
        if self._lazy_stack:
            self._reset_view = LazyStackedTensorDict(
                *(parent[i].select(*self._reset_output_keys(i), strict=False) for i in workers),
                stack_dim=0,
            )
        else:
            self._reset_view = parent.select(*self._reset_output_keys(0), strict=False)
        self._plans = {}
        for phase in ("step", "reset"):
            self._plan(phase)

    def _plan(self, phase: str) -> tuple:
        """The input rules of ``phase`` and where each input leaf goes in the shared buffer.

        Built at start, and again after the specs change (``empty_cache`` drops them).
        """
        root = self.shared_tensordict_parent.exclude("next")
        rules = self._input_rules(STEP_ROLES if phase == "step" else RESET_ROLES)
        if rules[0] == "flat":
            _, keys, flat = rules
            dsts = get_many(root, keys)
            for rule, dst in zip(flat, dsts):
                if dst is None:  # a key added to this env's specs, not to its sub-envs'
                    raise KeyError(NO_SLOT.format(role=rule.role, key=rule.key))
            plan = ("flat", keys, flat, dsts)
        else:
            plan = ("tree", rules[1], [root[i] for i in range(self.num_workers)])
        self._plans[phase] = plan
        return plan

    def empty_cache(self) -> None:
        """Forget what is derived from the specs, the input plans included."""
        super().empty_cache()
        self.__dict__["_plans"] = {}

    def close(self) -> None:
        """Stop the workers and release shared memory; ``reset`` starts them again.

        Until that ``reset``, ``step`` raises ``EnvClosedError``. Closing twice is harmless.
        """
        if not self.is_closed:
            self._must_reset = True
        self._shutdown()

    def _shutdown(self) -> None:
        if self._finalizer is not None:
            self._finalizer()
            self._finalizer = None
        self._pool = None
        self._workers = []
        self._drop_views()
        self.is_closed = True

    def _drop_views(self) -> None:
        """Forget every view of the shared buffer, so that its memory is released."""
        self.shared_tensordict_parent: TensorDictBase | None = None
        self._next_view = self._reset_view = None
        self._plans: dict = {}

    @_closes_on_worker_loss
    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed worker i with the seed returned by worker i-1; return the last one."""
        self.start()
        for index in range(self.num_workers):
            (seed,) = self._pool.request("set_seed", "seed", (seed, static_seed), indices=[index])
        return seed

    # ------------------------------------------------------------------ data path
    @_closes_on_worker_loss
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._check_batch(tensordict)
        self._open_for_step()
        pool = self._pool
        with torch.no_grad():
            pool.sync()  # an interrupted exchange is finished before the inputs are overwritten
            skipped = self._write_inputs(tensordict, "step")
            if skipped is None:
                pool.broadcast(STEP, "step")
            else:
                for index, keys in enumerate(skipped):
                    pool.send(index, "step", keys or None)
            pool.gather("step")
            return self._read(self._next_view)

    def _step_proc_data(self, next_td: TensorDictBase) -> TensorDictBase:
        # the workers already post-processed their env's output (done completion, reward
        # shapes) and the shared buffer holds every spec key: only type checks remain
        if self._run_type_checks:
            return super()._step_proc_data(next_td)
        return next_td

    @_closes_on_worker_loss
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        masks = self._reset_masks(tensordict)
        self._open_for_reset(masks)
        pool = self._pool
        needs = self._workers_to_reset(masks)
        with torch.no_grad():
            pool.sync()
            skipped = None
            if tensordict is not None:
                skipped = self._write_inputs(tensordict, "reset")
                skipped = skipped or [[] for _ in range(self.num_workers)]
            payloads = {}
            for index, need in enumerate(needs):
                if need:
                    worker_masks = None
                    if masks is not None:
                        worker_masks = {k: m[index].cpu().numpy() for k, m in masks.items()}
                    keys = skipped[index] if skipped is not None else None
                    payloads[index] = (worker_masks, kwargs, keys)
            pool.request("reset", "reset", payloads=payloads)
            self._must_reset = False
            return self._read(self._reset_view)

    def _write_inputs(self, tensordict: TensorDictBase, phase: str) -> list | None:
        """Check the input and copy its leaves into the shared buffer.

        Returns None when every input leaf was written, else, per worker, the keys that were
        not (absent, or observations that do not fit): the workers leave those out.
        """
        plan = self._plans.get(phase) or self._plan(phase)
        where = f"ParallelEnv.{phase}"
        require = phase == "step"
        if plan[0] == "flat":
            _, keys, rules, dsts = plan
            values = get_many(tensordict, keys)
            skipped = check_flat(rules, values, where, require)
            if skipped is not None:
                for index in skipped:
                    values[index] = None
                    if phase == "reset":  # a sub-env not reset returns zeros, as in SerialEnv
                        dsts[index].zero_()
            copy_into(dsts, values)
            if self._sync_cuda:
                torch.cuda.synchronize(self.shared_tensordict_parent.device)
            if skipped is None:
                return None
            return [[keys[index] for index in skipped]] * self.num_workers
        _, trees, dsts = plan
        per_worker = []
        for tree, src, dst in zip(trees, _parts(tensordict), dsts):
            skipped = tree.check(src, where, require)
            keep = [key for key in dst.keys(True, True) if key not in skipped]
            if keep:
                dst.update_(src.select(*keep, strict=False))
            if phase == "reset":
                for key in skipped:
                    if key in dst.keys(True, True):
                        dst.get(key).zero_()
            per_worker.append(skipped)
        if self._sync_cuda:
            torch.cuda.synchronize(self.shared_tensordict_parent.device)
        return per_worker if any(per_worker) else None

    def _read(self, view: TensorDictBase) -> TensorDictBase:
        if self.device is not None and view.device != self.device:
            return view.to(self.device)
        return clone(view)

    # ------------------------------------------------------------------ forwarding
    @_closes_on_worker_loss
    def _forward_attr(self, name: str) -> Any:
        kinds = self._pool.request(f"getattr({name!r})", "getattr", name)
        if all(kind == "callable" for kind, _ in kinds):
            return functools.partial(self._call_workers, name)
        return [value for _, value in kinds]

    @_closes_on_worker_loss
    def _call_workers(self, name: str, *args, **kwargs) -> list:
        """Call the sub-envs' method ``name`` in every worker; one result per worker."""
        return self._pool.request(f"{name}()", "call", (name, args, kwargs))


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
def _worker_entry(conn, run_fn: Callable, num_threads: int, *args) -> None:
    """Worker target: set the thread count first, then run the worker loop ``run_fn``."""
    torch.set_num_threads(num_threads)
    run_fn(conn, *args)


class _WorkerEnv:
    """A sub-env bound to its slice of the shared tensordict (lives in the worker)."""

    def __init__(self, env: EnvBase, shared: TensorDictBase):
        self.env = env
        self.step_fn = step_function(env)
        self.root = shared.exclude("next")
        self.next = shared.get("next")
        self.next_leaves = _split(leaves(self.next))
        inputs = {*env.full_action_spec.keys(True, True), *env.full_state_spec.keys(True, True)}
        inputs |= set(env.full_observation_spec.keys(True, True))
        self.step_view = self.root.select(*inputs, strict=False)
        reset_keys = set(env.full_observation_spec.keys(True, True))
        reset_keys |= set(env.full_done_spec.keys(True, True))
        reset_keys |= set(env.full_state_spec.keys(True, True))
        self.reset_view = self.root.select(*reset_keys, strict=False)
        self.reset_leaves = _split(leaves(self.reset_view))
        self.sync_cuda = self.root.device is not None and self.root.device.type == "cuda"

    def handlers(self) -> dict[str, Callable[[Any], Any]]:
        """The commands this worker answers (see ``rlcore.serve``)."""
        return {
            "step": self.step,
            "reset": self.reset,
            "seed": self.seed,
            "getattr": self.getattr,
            "call": self.call,
            "close": self.close,
        }

    def step(self, skipped: list | None) -> None:
        """Step on the shared inputs (less the ``skipped`` keys the caller did not give)."""
        td = shallow_copy(self.step_view)
        if skipped:
            td = td.exclude(*skipped)
        _write(self.next, self.next_leaves, self.step_fn(td))
        if self.sync_cuda:
            torch.cuda.synchronize(self.root.device)

    def reset(self, payload: tuple) -> None:
        """Reset the env; it is given its shared slice (where the main process wrote the
        caller's entries, less the ``skipped`` ones) when the caller passed a tensordict, as
        ``SerialEnv`` passes it."""
        masks, kwargs, skipped = payload
        td = None
        if masks is not None or skipped is not None:
            td = (self.root.exclude(*skipped) if skipped else self.root).clone()
        if masks is not None:
            for key, mask in masks.items():
                td.set(key, torch.from_numpy(mask).to(self.root.device))
        out = self.env.reset(td, **kwargs)
        _write(self.reset_view, self.reset_leaves, out)
        if self.sync_cuda:
            torch.cuda.synchronize(self.root.device)

    def seed(self, payload: tuple) -> int | None:
        seed, static_seed = payload
        return self.env.set_seed(seed, static_seed=static_seed)

    def getattr(self, name: str) -> tuple[str, Any]:
        value = getattr(self.env, name)
        return ("callable", None) if callable(value) else ("value", value)

    def call(self, payload: tuple) -> Any:
        name, args, kwargs = payload
        return getattr(self.env, name)(*args, **kwargs)

    def close(self, _: Any = None) -> None:
        self.env.close()


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

    def setup() -> dict[str, Callable[[Any], Any]]:
        fn, kwargs = env_fn, env_kwargs
        if isinstance(fn, CloudpickleBox):
            fn, kwargs = fn.obj, kwargs.obj
        return _WorkerEnv(fn(**kwargs), layout.views(buffer)[index]).handlers()

    serve(conn, setup, hot={STEP: "step"})

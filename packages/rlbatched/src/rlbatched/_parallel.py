"""ParallelEnv: sub-envs in worker processes (one each by default), data in one shared tensordict."""

from __future__ import annotations

import functools
import os
import pickle
import sys
import weakref
from collections.abc import Callable, Sequence
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401 - registers the reductions that share tensor memory
from tensordict import LazyStackedTensorDict, TensorDictBase

from rlcore import EnvBase, placeholder_next
from rlcore.step_inputs import ACTION, DONE, OBSERVATION, STATE, check_flat, get_many
from rlworkers import CloudpickleBox, WorkerPool

from ._batched_base import BatchedEnvBase, _parts, move, step_rows
from ._lazy_specs import LazySpecsMixin
from ._metadata import EnvMetaData, creator_metadata, metas_from_reports, reporting_workers
from ._parallel_async import AsyncStepsMixin, closes_on_worker_loss
from ._parallel_direct import DirectStepsMixin
from ._serial import SerialEnv
from ._shared import SharedLayout
from ._tensordict_ops import clone, copy_into
from ._threads import ThreadBudget
from ._worker_env import (
    DIRECT,
    _run_worker_pipe_shared_mem,  # noqa: F401 - replaceable here (tests)
    _worker_entry,
)

DEFAULT_START_METHOD = "spawn"
START_METHODS = ("spawn", "fork", "forkserver")
DEFAULT_WORKER_TIMEOUT_S = 60.0  # a step, reset or call, when worker_timeout is not set
# start-up (a spawned worker imports torch and builds its env: tens of seconds on a loaded
# machine), when start_timeout is not set
DEFAULT_START_TIMEOUT_S = 300.0
LABEL = "ParallelEnv worker"
AFTER_LOSS = "; the env was closed and reopens on the next reset()."
NO_SLOT = (
    "ParallelEnv: {role} {key!r} is in the env's specs but not in the shared buffer, laid out "
    "from the sub-envs' specs when the workers started; edit the sub-envs' specs (in their "
    "constructor or factory) rather than the ParallelEnv's."
)
BAD_PROCESSES = (
    "ParallelEnv: num_processes must be a positive int no larger than num_workers "
    "({num_workers}), got {got!r}."
)
BAD_START_METHOD = "ParallelEnv: mp_start_method must be one of {known} or None, got {got!r}."
STEP_ROLES = (ACTION, STATE, OBSERVATION)
RESET_ROLES = (ACTION, STATE, OBSERVATION, DONE)


_SERIAL_KWARGS = (
    "create_env_kwargs",
    "share_individual_td",
    "shared_memory",
    "device",
    "pin_memory",
    "memmap",
    "policy_proof",
    "allow_step_when_done",
    "non_blocking",
    "use_buffers",
)


class ParallelEnv(AsyncStepsMixin, DirectStepsMixin, LazySpecsMixin, BatchedEnvBase):
    """Runs ``num_workers`` envs in worker processes and batches their data.

    Each sub-env owns a slice of one shared-memory tensordict
    (``shared_tensordict_parent``): a step writes the actions into it, then sets each
    sub-env's command flag in shared memory and posts one semaphore per process; each sub-env
    sets its ready flag when done (``rlworkers.WorkerPool``: pipes carry only start-up, errors
    and rare commands). Waiting processes spin for a fraction of a millisecond (2 ms in
    ``async_step_recv``), yielding the core to any other runnable process, then block, so
    idle workers use no CPU. What
    ``step``, ``reset`` and ``rollout`` return is a copy owned by the caller.
    ``async_step_send`` / ``async_step_recv`` step sub-envs without waiting for all of them
    (``async_reset_send`` / ``async_reset_recv`` reset them). A ``"_step"`` mask in a step's
    input steps the flagged sub-envs only; the others give ``rlcore.placeholder_next`` (their
    input's observations and done flags, a zero reward), as in ``SerialEnv``.

    Without buffers (``use_buffers=False``, the default when a sub-env has dynamic specs), no
    shared memory is laid out: each step sends every worker its row of the input through its
    pipe and stacks the tensordicts they return (densely where they stack, else lazily), as
    for sub-envs whose data change shape between steps.

    The main process never runs a sub-env's code: each worker builds its sub-env and reports
    its specs, batch size and device when it starts (only one worker per distinct factory and
    keyword arguments does; different ones give lazily stacked specs where they differ), or an
    ``rlcore.EnvCreator`` factory supplies them, as in torchrl. The workers start lazily: on
    the first ``reset``, ``step``, ``rollout`` or ``set_seed``, or on the first read of
    anything that depends on the specs (``observation_spec``, ``batch_size``, ``device``, ...).

    Inputs are checked as in ``SerialEnv`` before anything reaches a worker (every action
    leaf present, exact shapes, values that fit the spec's dtype). A worker that raises,
    dies or hangs gives an exception naming it (``rlworkers.WorkerDiedError``,
    ``rlworkers.WorkerTimeoutError``, or the worker's own exception type); a lost worker closes
    the env. A closed env raises ``rlcore.EnvClosedError`` when stepped, until ``reset()``.

    Args:
        num_workers: number of sub-envs.
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
        worker_timeout: seconds to wait for a worker's answer to a step, reset, ``set_seed``
            or forwarded call before raising ``WorkerTimeoutError`` (default 60 s); start-up
            never counts against it.
        start_timeout: seconds the workers have to start (import, build their sub-envs, report
            their specs, bind to the shared buffer) before ``WorkerTimeoutError`` names the one
            still silent, phase ``"start"`` (default 300 s: a spawned worker imports torch and
            builds its env, tens of seconds on a loaded machine).
        num_processes: number of worker processes (default: one per sub-env, up to the number
            of CPU cores this process may run on, ``usable_cpus()``: more processes than cores
            only take turns, and each turn costs a context switch). Each process runs a
            contiguous block of sub-envs one after the other (``num_workers`` split as evenly
            as possible, the first processes taking one more); batch layout, seeding, partial
            resets and results are the same whatever the split.
        pin_memory: torchrl 0.4's argument (deprecated there); ``True`` raises ``ValueError``.
        memmap: torchrl 0.4's argument; ``True`` raises ``ValueError`` (the buffers are always
            in shared memory).
        allow_step_when_done: torchrl 0.4's argument (deprecated there); ``True`` raises
            ``ValueError``.
        policy_proof: torchrl 0.4's argument, ignored as there (with a warning).
        non_blocking: device moves of inputs and outputs use ``non_blocking=True``; a move
            off a GPU is still waited for before the data is returned.
        metadata_from_workers: torchrl's argument. The metadata always come from the workers
            here; ``True`` also starts them at construction, as torchrl then does.
        use_buffers: whether the data go through the shared buffers (default: unless a sub-env
            has dynamic specs, as in torchrl; see ``use_buffers``). ``True`` with dynamic specs
            lays the buffers out from the sub-envs' current spec shapes (the seed era's
            behaviour: each sub-env's data must keep them), where torchrl warns and goes
            without.

    Examples:
        >>> from rlbatched import ParallelEnv
        >>> from rlmocks import ContinuousActionVecMockEnv
        >>> env = ParallelEnv(2, ContinuousActionVecMockEnv)
        >>> env.rollout(3).batch_size
        torch.Size([2, 3])
        >>> env.close()
    """

    # the input is checked while it is written into the shared buffer (_write_inputs), with the
    # same rules EnvBase.step applies (rlcore.step_inputs), observations included
    _checks_step_inputs = False

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
        num_processes: int | None = None,
        *,
        pin_memory: bool = False,
        memmap: bool = False,
        policy_proof: Callable | None = None,
        allow_step_when_done: bool = False,
        non_blocking: bool = False,
        start_timeout: float | None = None,
        metadata_from_workers: bool = False,
        use_buffers: bool | None = None,
    ):
        super().__init__(
            num_workers,
            create_env_fn,
            create_env_kwargs,
            share_individual_td=share_individual_td,
            shared_memory=shared_memory,
            device=device,
            serial_for_single=serial_for_single,
            pin_memory=pin_memory,
            memmap=memmap,
            policy_proof=policy_proof,
            allow_step_when_done=allow_step_when_done,
            non_blocking=non_blocking,
            use_buffers=use_buffers,
        )
        if num_processes is None:
            num_processes = min(num_workers, usable_cpus())
        if (
            not isinstance(num_processes, int)
            or isinstance(num_processes, bool)
            or not 1 <= num_processes <= num_workers
        ):
            raise ValueError(BAD_PROCESSES.format(num_workers=num_workers, got=num_processes))
        if mp_start_method is not None and mp_start_method not in START_METHODS:
            raise ValueError(BAD_START_METHOD.format(known=START_METHODS, got=mp_start_method))
        self._mp_start_method = mp_start_method or DEFAULT_START_METHOD
        self.num_threads = num_threads
        self.num_sub_threads = num_sub_threads
        self.worker_timeout = worker_timeout
        self.start_timeout = DEFAULT_START_TIMEOUT_S if start_timeout is None else start_timeout
        self.num_processes = num_processes
        self._pool: WorkerPool | None = None
        self._workers: list = []
        self._finalizer: weakref.finalize | None = None
        # sub-env -> (its send, its row in it, "step" or "reset")
        self._async: dict[int, tuple[TensorDictBase, int, str]] = {}
        self._drop_views()
        self.is_closed = True
        if metadata_from_workers:
            self.start()

    # ------------------------------------------------------------------ lifecycle
    def _initial_metadata(
        self, fns: list[Callable], kwargs: list[dict]
    ) -> list[EnvMetaData] | None:
        """An ``EnvCreator``'s metadata; else None: the workers report them when they start."""
        return creator_metadata(fns, kwargs)

    def _start_metadata(self) -> None:
        self.start()

    def _started(self) -> bool:
        return self._pool is not None and self._pool.alive

    def _start_workers(self) -> None:
        """Start the workers; learn the metadata from them if not known yet; then lay out the
        shared buffer and bind every sub-env to its slice (all of it phase "start")."""
        known = self.__dict__["_metas"] is not None
        fns, kwargs = self.create_env_fn, self.create_env_kwargs
        report = [False] * self.num_workers if known else reporting_workers(fns, kwargs)
        boxed = self._mp_start_method != "fork"
        # looked up now, so that a replacement installed on the module is honoured
        run_fn = sys.modules[__name__]._run_worker_pipe_shared_mem
        counts = split_evenly(self.num_workers, self.num_processes)
        workers = []
        first = 0
        for count in counts:
            indices = list(range(first, first + count))
            first += count
            own_fns = [fns[i] for i in indices]
            own_kwargs = [kwargs[i] for i in indices]
            args = (
                run_fn,
                self.num_sub_threads,
                indices,
                CloudpickleBox(own_fns) if boxed else own_fns,
                CloudpickleBox(own_kwargs) if boxed else own_kwargs,
                [report[i] for i in indices],
            )
            workers.append((_worker_entry, args))
        processes = len(counts)
        if self.num_threads is None:
            ThreadBudget.take(processes)  # the pool gives them back when it stops
            give_back = functools.partial(ThreadBudget.give_back, processes)
        else:
            torch.set_num_threads(self.num_threads)
            give_back = None
        timeout = self.worker_timeout
        buffer = parent = layout = None
        try:
            pool = WorkerPool(
                workers,
                start_method=self._mp_start_method,
                label=LABEL,
                timeout=DEFAULT_WORKER_TIMEOUT_S if timeout is None else timeout,
                timeout_arg="worker_timeout",
                start_timeout=self.start_timeout,
                start_timeout_arg="start_timeout",
                after_loss=AFTER_LOSS,
                on_shutdown=give_back,
                slots=counts,
                preload=("rlbatched",),
            )
            self._finalizer = weakref.finalize(self, pool.shutdown)
            self._pool = pool
            self._worker_skips: list[list | None] = [None] * self.num_workers
            self._workers = pool.procs
            replies = pool.gather("start")
            if not known:
                self._set_metadata(metas_from_reports(fns, kwargs, replies))
            self._sync_cuda = False
            if self._use_buffers:
                layout = SharedLayout(self._buffer_template())
                buffer = layout.allocate()
                parent = layout.views(buffer)
                pool.request("start", "bind", payloads=_bind_payloads(buffer, layout, counts))
                self.shared_tensordict_parent = parent
                self._sync_cuda = buffer.device.type == "cuda"
                self._bind_views(parent)
            else:
                pool.request("start", "bind", DIRECT)
        except BaseException:
            # release the shared buffer now: this frame stays alive in the traceback
            workers = args = buffer = parent = layout = None
            self._shutdown()
            raise
        self.is_closed = False

    def _buffer_template(self) -> TensorDictBase:
        if self._lazy_stack:
            return LazyStackedTensorDict(*(meta.zeros(()) for meta in self._metas), stack_dim=0)
        return self._metas[0].zeros((self.num_workers,))

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
        self._async = {}
        self._drop_views()
        self.is_closed = True

    def _drop_views(self) -> None:
        """Forget every view of the shared buffer, so that its memory is released."""
        self.shared_tensordict_parent: TensorDictBase | None = None
        self._next_view = self._reset_view = None
        self._plans: dict = {}

    @closes_on_worker_loss
    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed worker i with the seed returned by worker i-1; return the last one."""
        self._refuse_if_async("set_seed")
        self.start()
        for index in range(self.num_workers):
            (seed,) = self._pool.request("set_seed", "seed", (seed, static_seed), indices=[index])
        return seed

    # ------------------------------------------------------------------ data path
    # a "_step" mask steps the flagged sub-envs only (rlcore._partial_steps), as in SerialEnv
    _supports_partial_steps = True

    @closes_on_worker_loss
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._refuse_if_async("step")
        self._check_batch(tensordict)
        self._open_for_step()
        rows = None
        mask = tensordict.get("_step", None)
        if mask is not None:
            tensordict = tensordict.exclude("_step")
            rows = step_rows(mask, self.num_workers)
        if not self._use_buffers:
            return self._step_direct(tensordict, rows)
        pool = self._pool
        with torch.no_grad():
            pool.sync()  # an interrupted exchange is finished before the inputs are overwritten
            skipped = self._write_inputs(tensordict, "step")
            self._send_steps(range(self.num_workers) if rows is None else rows, skipped, "step")
            pool.gather("step", rows)
            out = self._read(self._next_view)
            if rows is not None:
                out = self._placeholders_into(out, tensordict, rows)
            return out

    def _placeholders_into(
        self, out: TensorDictBase, tensordict: TensorDictBase, rows: list[int]
    ) -> TensorDictBase:
        """``out`` with the rows not in ``rows`` (sub-envs that did not step) replaced by
        ``rlcore.placeholder_next`` of their input."""
        idle = [index for index in range(self.num_workers) if index not in rows]
        placeholder = placeholder_next(self, tensordict)
        if isinstance(out, LazyStackedTensorDict):
            parts = list(out.tensordicts)
            for index in idle:
                parts[index] = placeholder[index]
            return LazyStackedTensorDict(*parts, stack_dim=out.stack_dim)
        at = torch.tensor(idle, dtype=torch.int64)
        out[at] = placeholder[at].to(out.device) if out.device is not None else placeholder[at]
        return out

    def _step_proc_data(self, next_td: TensorDictBase) -> TensorDictBase:
        # the workers already post-processed their env's output (done completion, reward
        # shapes) and the shared buffer holds every spec key: only type checks remain
        if self._run_type_checks:
            return super()._step_proc_data(next_td)
        return next_td

    @closes_on_worker_loss
    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        self._refuse_if_async("reset")
        masks = self._reset_masks(tensordict)
        self._open_for_reset(masks)
        pool = self._pool
        needs = self._workers_to_reset(masks)
        if not self._use_buffers:
            out = self._reset_direct(tensordict, needs, kwargs)
            self._must_reset = False
            return out
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

    def _write_inputs(
        self, tensordict: TensorDictBase, phase: str, where: str | None = None
    ) -> list | None:
        """Check the input and copy its leaves into the shared buffer.

        Returns None when every input leaf was written, else, per worker, the keys that were
        not (absent, or observations that do not fit): the workers leave those out.
        """
        plan = self._plans.get(phase) or self._plan(phase)
        where = f"ParallelEnv.{where or phase}"
        require = phase == "step" and self._action_required
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
            return move(view, self.device, self.non_blocking)
        return clone(view)

    # ------------------------------------------------------------------ forwarding
    @closes_on_worker_loss
    def _forward_attr(self, name: str) -> Any:
        self._refuse_if_async(f"{name}")
        kinds = self._pool.request(f"getattr({name!r})", "getattr", name)
        if all(kind == "callable" for kind, _ in kinds):
            return functools.partial(self._call_workers, name)
        return [value for _, value in kinds]

    @closes_on_worker_loss
    def _call_workers(self, name: str, *args, **kwargs) -> list:
        """Call the sub-envs' method ``name`` in every worker; one result per worker."""
        self._refuse_if_async(f"{name}()")
        return self._pool.request(f"{name}()", "call", (name, args, kwargs))


def _bind_payloads(buffer: torch.Tensor, layout: SharedLayout, counts: list[int]) -> dict:
    """The ``"bind"`` payload of every sub-env: the shared buffer and its layout for the first
    sub-env of each process, None for the others (their process has them then).

    The buffer is pickled once per process: its handle (a file descriptor, or a CUDA IPC
    handle) is handed over once per pickle.
    """
    layout_bytes = pickle.dumps(layout)
    payloads: dict[int, tuple | None] = {}
    first = 0
    for count in counts:
        payloads[first] = (bytes(ForkingPickler.dumps(buffer)), layout_bytes)
        for index in range(first + 1, first + count):
            payloads[index] = None
        first += count
    return payloads


def usable_cpus() -> int:
    """The number of CPU cores this process may run on (its affinity mask where the OS has
    one, else the machine's count): ``ParallelEnv``'s default cap on ``num_processes``.

    Examples:
        >>> usable_cpus() >= 1
        True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity masks (macOS, Windows)
        return max(1, os.cpu_count() or 1)


def split_evenly(num_workers: int, num_processes: int) -> list[int]:
    """How many sub-envs each process runs: as even as possible, the first ones take more.

    Examples:
        >>> split_evenly(8, 3)
        [3, 3, 2]
    """
    size, extra = divmod(num_workers, num_processes)
    return [size + (process < extra) for process in range(num_processes)]

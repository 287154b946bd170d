"""AsyncEnvPool: sub-envs stepped and reset asynchronously, in threads or in worker processes.

Current torchrl's ``AsyncEnvPool`` API on our batched envs: ``backend="multiprocessing"`` is a
``ParallelEnv`` and its asynchronous steps and resets (``rlbatched._parallel_async``: shared
buffers, one-byte wake-ups); ``backend="threading"`` is a ``SerialEnv`` whose sub-envs step and
reset in a thread each (``_ThreadedSubEnvs``), which pays where they release the GIL (native
simulators). Sends name their sub-envs by ``"env_index"``; receives return the first ones ready,
ordered by it. Synchronous ``step``, ``reset`` and ``rollout`` treat the pool as a batched env.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rlcore import EnvBase
from rlspecs import Unbounded

from ._async_rows import (
    ASYNC_BUSY,
    ASYNC_PENDING,
    ENV_INDEX,
    RESET_KIND,
    STEP_KIND,
    async_rows,
    index_entry,
    recv_plan,
    sent_rows,
)
from ._batched_base import BatchedEnvBase, move
from ._parallel import ParallelEnv
from ._serial import SerialEnv
from ._serial_steppers import note_sub_env

__all__ = ["AsyncEnvPool"]

BACKENDS = ("threading", "multiprocessing")
STACKS = ("dense", "maybe_dense", "lazy")
BAD_BACKEND = "AsyncEnvPool: backend must be one of {known}, got {got!r}."
BAD_STACK = "AsyncEnvPool: stack must be one of {known}, got {got!r}."
PROCESS_ONLY = "AsyncEnvPool: {name} applies to backend='multiprocessing' only, got {name}={got!r}."
NO_ENVS = "AsyncEnvPool: env_makers must name at least one env (or factory), got none."
NOT_DENSE = (
    "AsyncEnvPool(stack='dense'): sub-env {index}'s specs do not stack with sub-env 0's "
    "(keys, shapes or dtypes differ); use stack='lazy' or stack='maybe_dense'."
)


class _Given:
    """A factory returning an env built already (``env_makers`` may hold envs, as in torchrl)."""

    def __init__(self, env: EnvBase) -> None:
        self.env = env

    def __call__(self) -> EnvBase:
        return self.env


class AsyncEnvPool(EnvBase):
    """A pool of envs stepped and reset asynchronously, or together as a batched env.

    ``async_step_send`` / ``async_reset_send`` start steps or resets of some sub-envs, named by
    ``env_index`` (an int or a list) or by the input's int64 ``"env_index"`` entry (every
    sub-env when neither is given); ``async_step_recv`` / ``async_reset_recv`` wait until
    ``min_get`` of them are done (``self.min_get`` by default) and return every one that is
    (at most ``max_get``), ordered by their ``"env_index"`` entry, or exactly the sub-envs
    their ``env_index`` names. A step's result is the row sent with the step's outputs under
    ``"next"``; a reset's is what the sub-env's reset returns. A sub-env with a step or reset in
    flight cannot be sent another one, and ``step``, ``reset`` and ``set_seed`` wait for nothing
    in flight (``RuntimeError`` naming the sub-envs).

    ``step``, ``reset`` and ``rollout`` run every sub-env as a ``SerialEnv`` or ``ParallelEnv``
    would (partial steps and resets included); their outputs, like the receives', carry
    ``"env_index"`` (int64, one index per row, repeated along the sub-envs' batch dims; a
    ``NonTensorStack`` in torchrl), which the pool's state spec declares.

    Args:
        env_makers: a factory, an env, or a list of them (one per sub-env).
        backend: ``"threading"`` (default: a thread per sub-env, in this process; the data
            stay here) or ``"multiprocessing"`` (a ``ParallelEnv``: a worker process per
            sub-env, data in shared memory).
        stack: how the sub-envs' data are stacked: ``"dense"`` (default; sub-envs whose specs
            do not stack are refused with ``ValueError``), ``"lazy"`` (always a lazy stack) or
            ``"maybe_dense"`` (dense where the data stack).
        create_env_kwargs: keyword arguments of the factories: one dict, or one per sub-env.
        device: device of the pool's outputs (default: the sub-envs').
        mp_start_method: ``ParallelEnv``'s, with ``backend="multiprocessing"`` only.
        worker_timeout: ``ParallelEnv``'s, with ``backend="multiprocessing"`` only.

    Not offered (current torchrl's): ``async_step_and_maybe_reset_*``, a ``timeout`` on the
    receives, ``exchange``, ``worker_affinity`` and ``envs_per_worker``.

    Examples:
        >>> import torch
        >>> from rlbatched import AsyncEnvPool
        >>> from rlmocks import CountingEnv
        >>> env = AsyncEnvPool([CountingEnv] * 3, backend="threading")
        >>> td = env.reset()
        >>> td["env_index"].tolist()
        [0, 1, 2]
        >>> td["action"] = torch.ones(3, 1, dtype=torch.int8)
        >>> env.async_step_send(td[1:])  # sub-envs 1 and 2, named by the rows' env_index
        >>> out = env.async_step_recv(min_get=2)
        >>> out["env_index"].tolist(), out["next", "observation"].flatten().tolist()
        ([1, 2], [1, 1])
        >>> env.rollout(2).batch_size
        torch.Size([3, 2])
        >>> env.close()
    """

    # a "_step" mask steps the flagged sub-envs only, as in the batched env underneath
    _supports_partial_steps = True

    def __init__(
        self,
        env_makers: Callable[..., EnvBase] | EnvBase | Sequence[Callable[..., EnvBase] | EnvBase],
        *,
        backend: str = "threading",
        stack: str = "dense",
        create_env_kwargs: dict | Sequence[dict] | None = None,
        device: torch.device | str | int | None = None,
        mp_start_method: str | None = None,
        worker_timeout: float | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise NotImplementedError(BAD_BACKEND.format(known=BACKENDS, got=backend))
        if stack not in STACKS:
            raise NotImplementedError(BAD_STACK.format(known=STACKS, got=stack))
        makers = list(env_makers) if isinstance(env_makers, Sequence) else [env_makers]
        if not makers:
            raise ValueError(NO_ENVS)
        factories = [_Given(m) if isinstance(m, EnvBase) else m for m in makers]
        share = True if stack == "lazy" else None
        if backend == "threading":
            for name, got in (
                ("mp_start_method", mp_start_method),
                ("worker_timeout", worker_timeout),
            ):
                if got is not None:
                    raise ValueError(PROCESS_ONLY.format(name=name, got=got))
            batched: BatchedEnvBase = SerialEnv(
                len(factories), factories, create_env_kwargs, share, device=device
            )
        else:
            batched = ParallelEnv(
                len(factories),
                factories,
                create_env_kwargs,
                share,
                device=device,
                mp_start_method=mp_start_method,
                worker_timeout=worker_timeout,
            )
        try:
            batched.start()  # as in torchrl, the sub-envs start with the pool
            if stack == "dense":
                _check_dense(batched)
            super().__init__(device=batched.device, batch_size=batched.batch_size)
        except BaseException:
            batched.close()
            raise
        self._batched = batched
        self.backend = backend
        self.stack = stack
        self.env_makers = makers
        self.num_envs = len(makers)
        self.create_env_kwargs = batched.create_env_kwargs
        self.min_get = 1
        self._threads = _ThreadedSubEnvs(batched) if backend == "threading" else None
        self._copy_specs()

    def _copy_specs(self) -> None:
        batched = self._batched
        self.full_observation_spec = batched.full_observation_spec.clone()
        self.full_reward_spec = batched.full_reward_spec.clone()
        self.full_done_spec = batched.full_done_spec.clone()
        self.full_action_spec = batched.full_action_spec.clone()
        state = batched.full_state_spec.clone()
        state.set(
            ENV_INDEX, Unbounded(shape=self.batch_size, dtype=torch.int64, device=self.device)
        )
        self.full_state_spec = state

    @property
    def env_batch_sizes(self) -> list[torch.Size]:
        """The batch size of every sub-env."""
        return [meta.batch_size for meta in self._batched._metas]

    # ------------------------------------------------------------------ asynchronous
    def async_step_send(
        self, tensordict: TensorDictBase, env_index: int | Sequence[int] | None = None
    ) -> None:
        """Start a step of the sub-envs named by ``env_index`` or by ``"env_index"`` (every
        sub-env when neither names any) on their rows of ``tensordict``; see the class
        docstring."""
        self._send(STEP_KIND, tensordict, env_index)

    def async_step_recv(
        self,
        min_get: int | None = None,
        env_index: int | Sequence[int] | None = None,
        *,
        max_get: int | None = None,
    ) -> TensorDictBase:
        """The steps of at least ``min_get`` sub-envs (or of those ``env_index`` names), each
        row the tensordict sent with the step's outputs under ``"next"``."""
        return self._recv(STEP_KIND, min_get, env_index, max_get)

    def async_reset_send(
        self,
        tensordict: TensorDictBase | None = None,
        env_index: int | Sequence[int] | None = None,
    ) -> None:
        """Start a reset of the sub-envs named as in ``async_step_send``; ``tensordict``, when
        given, holds their reset inputs."""
        self._send(RESET_KIND, tensordict, env_index)

    def async_reset_recv(
        self,
        min_get: int | None = None,
        env_index: int | Sequence[int] | None = None,
        *,
        max_get: int | None = None,
    ) -> TensorDictBase:
        """The resets of at least ``min_get`` sub-envs (or of those ``env_index`` names): their
        observations, done flags and state."""
        return self._recv(RESET_KIND, min_get, env_index, max_get)

    def _in_flight(self) -> dict[int, str]:
        """Sub-env -> ``"step"`` or ``"reset"``, for those with one in flight."""
        if self._threads is not None:
            return {index: sent[2] for index, sent in self._threads.in_flight.items()}
        return {index: sent[2] for index, sent in self._batched._async.items()}

    def _send(self, kind: str, tensordict: TensorDictBase | None, env_index: Any) -> None:
        where = f"AsyncEnvPool.async_{kind}_send"
        tensordict, rows = async_rows(tensordict, env_index, self.batch_size, where)
        in_flight = self._in_flight()
        for index in rows:
            if index in in_flight:
                raise RuntimeError(
                    ASYNC_BUSY.format(where=where, index=index, kind=in_flight[index])
                )
        if self._threads is not None:
            self._threads.send(kind, tensordict, rows)
        elif kind == STEP_KIND:
            self._batched.async_step_send(tensordict, env_index=rows)
        else:
            self._batched.async_reset_send(tensordict, env_index=rows)

    def _recv(
        self, kind: str, min_get: int | None, env_index: Any, max_get: int | None
    ) -> TensorDictBase:
        where = f"AsyncEnvPool.async_{kind}_recv"
        in_flight = sorted(index for index, sent in self._in_flight().items() if sent == kind)
        min_get = self.min_get if min_get is None else min_get
        wanted, min_get, max_get = recv_plan(in_flight, kind, min_get, env_index, max_get, where)
        named = wanted if env_index is not None else None
        if self._threads is not None:
            out = self._threads.recv(kind, wanted, min_get, max_get)
        elif kind == STEP_KIND:
            out = self._batched.async_step_recv(min_get, named, max_get=max_get)
        else:
            out = self._batched.async_reset_recv(min_get, named, max_get=max_get)
        return self._restack(out)

    def _refuse_if_busy(self, where: str) -> None:
        in_flight = self._in_flight()
        if in_flight:
            raise RuntimeError(
                ASYNC_PENDING.format(where=f"AsyncEnvPool.{where}", indices=sorted(in_flight))
            )

    def _restack(self, td: TensorDictBase) -> TensorDictBase:
        """``td`` stacked as ``stack`` says (dense, lazy, or as it comes)."""
        lazy = isinstance(td, LazyStackedTensorDict) and td.stack_dim == 0
        if self.stack == "lazy" and not lazy:
            return LazyStackedTensorDict(*td.unbind(0), stack_dim=0)
        if self.stack == "dense" and isinstance(td, LazyStackedTensorDict):
            return td.contiguous()
        return td

    # ------------------------------------------------------------------ synchronous
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._refuse_if_busy("step")
        tensordict = tensordict.exclude(ENV_INDEX)
        if self._threads is not None and "_step" not in tensordict.keys():
            every = list(range(self.num_envs))
            self._threads.send(STEP_KIND, tensordict, every)
            try:
                return self._restack(self._threads.wait(every, self.num_envs)[2])
            finally:
                self._threads.drop()  # after an error, the other sub-envs' steps
        # a partial step (threading: one sub-env after the other) or a ParallelEnv's step
        return self._restack(self._batched._step(tensordict))

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        self._refuse_if_busy("reset")
        if tensordict is not None:
            tensordict = tensordict.exclude(ENV_INDEX)
        out = self._batched._reset(tensordict, **kwargs)
        self.__dict__["is_closed"] = False  # a closed pool reopens on reset, as its batched env
        out.set(ENV_INDEX, index_entry(list(range(self.num_envs)), self.batch_size, out.device))
        return self._restack(out)

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed sub-env i with the seed returned by sub-env i-1; return the last one."""
        self._refuse_if_busy("set_seed")
        return self._batched.set_seed(seed, static_seed=static_seed)

    def _set_seed(self, seed: int | None) -> None:
        self.set_seed(seed)

    def close(self) -> None:
        """Close the sub-envs (a step or reset in flight is waited for and dropped); ``reset``
        starts them again."""
        if self._threads is not None:
            self._threads.shutdown()
        self._batched.close()
        super().close()

    def __repr__(self) -> str:
        return (
            f"AsyncEnvPool(num_envs={self.num_envs}, backend={self.backend!r}, "
            f"stack={self.stack!r}, batch_size={tuple(self.batch_size)})"
        )


def _check_dense(batched: BatchedEnvBase) -> None:
    """Refuse sub-envs whose data cannot be stacked densely (``stack="dense"``)."""
    metas = batched._metas
    reference = metas[0].schema()
    for index, meta in enumerate(metas[1:], 1):
        if meta is not metas[0] and meta.schema() != reference:
            raise ValueError(NOT_DENSE.format(index=index))


class _ThreadedSubEnvs:
    """The sub-envs of a ``SerialEnv`` stepped and reset in threads (``backend="threading"``).

    A step runs the sub-env's step on a copy of its row sent (so later edits by the caller are
    not seen) and returns that row with the outputs under ``"next"``; a reset returns what the
    sub-env's reset returns for it (observations, done flags and state). An error names its
    sub-env (a note) and takes it out of flight; the others stay.
    """

    def __init__(self, serial: SerialEnv) -> None:
        self.serial = serial
        self.executor: ThreadPoolExecutor | None = None
        # sub-env -> (the row sent, its position, "step" or "reset", its future)
        self.in_flight: dict[int, tuple[TensorDictBase | None, int, str, Future]] = {}

    def send(self, kind: str, tensordict: TensorDictBase | None, rows: list[int]) -> None:
        serial = self.serial
        if kind == STEP_KIND:
            serial._open_for_step()
        else:  # a closed env reopens on a reset of every sub-env only
            flags = torch.tensor([index in rows for index in range(serial.num_workers)])
            serial._open_for_reset(None if len(rows) == serial.num_workers else {"_reset": flags})
        if self.executor is None:
            self.executor = ThreadPoolExecutor(serial.num_workers, "AsyncEnvPool")
        parts = [None] * len(rows) if tensordict is None else tensordict.unbind(0)
        for position, (index, part) in enumerate(zip(rows, parts)):
            env = serial._envs[index]
            if part is not None:
                part = part.clone()
                if env.device is not None and part.device != env.device:
                    part = move(part, env.device, serial.non_blocking)
            if kind == STEP_KIND:
                future = self.executor.submit(_step_next, env, part.exclude("next"))
            else:
                keys = serial._reset_output_keys(index)
                future = self.executor.submit(_reset_selected, env, part, keys)
            self.in_flight[index] = (tensordict, position, kind, future)
        if kind == RESET_KIND and len(rows) == serial.num_workers:
            serial._must_reset = False

    def recv(
        self, kind: str, wanted: list[int], min_get: int, max_get: int | None = None
    ) -> TensorDictBase:
        """Wait until ``min_get`` of ``wanted`` are done; return those done (at most
        ``max_get``, the lowest indices first) as ``ParallelEnv``'s receives do."""
        ready, sent, results = self.wait(wanted, min_get, max_get)
        if kind == STEP_KIND:
            out = sent_rows(sent, ready)
            preset = out.get("next", None)
            if preset is not None:
                results.update(preset.exclude(*results.keys(True, True)))
            out.set("next", results)
        else:
            out = results
        out.set(ENV_INDEX, index_entry(ready, self.serial.batch_size, out.device))
        return out

    def wait(
        self, wanted: list[int], min_get: int, max_get: int | None = None
    ) -> tuple[list[int], list[tuple], TensorDictBase]:
        """``(sub-envs done, what was sent them, their results stacked)``; see ``recv``."""
        futures = {self.in_flight[index][3]: index for index in wanted}
        done = {future for future in futures if future.done()}
        while len(done) < min_get:
            finished, _ = wait(set(futures) - done, return_when=FIRST_COMPLETED)
            done |= finished
        ready = sorted(futures[future] for future in done)
        failed = [index for index in ready if self.in_flight[index][3].exception() is not None]
        if failed:
            errors = []
            for index in failed:
                _, _, kind, future = self.in_flight.pop(index)
                error = future.exception()
                note_sub_env(error, index, kind, owner="AsyncEnvPool")
                errors.append(error)
            raise errors[0]
        if max_get is not None:
            ready = ready[:max_get]
        sent = [self.in_flight.pop(index) for index in ready]
        serial = self.serial
        results = serial._stack([serial._to_out_device(entry[3].result()) for entry in sent])
        return ready, sent, results

    def drop(self) -> None:
        """Wait for what is in flight and drop it."""
        for *_, future in self.in_flight.values():
            wait([future])
        self.in_flight = {}

    def shutdown(self) -> None:
        """Wait for the threads' work and stop them; nothing stays in flight."""
        if self.executor is not None:
            self.executor.shutdown(wait=True)
            self.executor = None
        self.in_flight = {}


def _step_next(env: EnvBase, td: TensorDictBase) -> TensorDictBase:
    """A sub-env's step (its own input checks included), its outputs only."""
    return env.step(td).get("next")


def _reset_selected(env: EnvBase, td: TensorDictBase | None, keys: list) -> TensorDictBase:
    """A sub-env's reset: its observations, done flags and state."""
    return env.reset(td).select(*keys, strict=False)

"""ParallelEnv's asynchronous steps: ``async_step_send`` and ``async_step_recv`` (a mixin).

Some sub-envs step while the caller goes on; ``async_step_recv`` returns those that are ready.
The inputs are checked and written as ``step`` writes them (``_write_inputs``, or
``_write_rows`` for the rows named by ``"env_index"``), the same one-byte flag wakes a worker,
and a worker that fails is reported as by ``step``. Also here: ``closes_on_worker_loss``, the
guard of every ParallelEnv call that talks to the workers.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rlcore.step_inputs import check_flat, get_many

from ._batched_base import move
from ._tensordict_ops import cat, take_rows
from ._worker_env import STEP

__all__ = ["AsyncStepsMixin", "closes_on_worker_loss"]

ENV_INDEX = "env_index"
ASYNC_BUSY = (
    "ParallelEnv.async_step_send: sub-env {index} still has a step in flight; receive it with "
    "async_step_recv() before sending it another action."
)
ASYNC_NOTHING = (
    "ParallelEnv.async_step_recv: no step in flight; send actions with async_step_send() first."
)
ASYNC_MIN_GET = (
    "ParallelEnv.async_step_recv: min_get must be an int between 1 and the number of sub-envs "
    "in flight ({in_flight}), got {got!r}."
)
ASYNC_PENDING = (
    "ParallelEnv.{where}: sub-envs {indices} have asynchronous steps in flight "
    "(async_step_send); receive them with async_step_recv() first."
)
BAD_ENV_INDEX = (
    "ParallelEnv.async_step_send: {key!r} must be a 1-d int64 tensor of distinct sub-env "
    "indices in [0, {num_workers}) with one entry per row of the tensordict (batch {batch}), "
    "got {got}."
)


def closes_on_worker_loss(method: Callable) -> Callable:
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


class AsyncStepsMixin:
    """``ParallelEnv``'s asynchronous stepping (see the module docstring)."""

    def _refuse_if_async(self, where: str) -> None:
        if self._async:
            raise RuntimeError(ASYNC_PENDING.format(where=where, indices=sorted(self._async)))

    @closes_on_worker_loss
    def async_step_send(self, tensordict: TensorDictBase) -> None:
        """Start a step of some sub-envs without waiting for it; ``async_step_recv`` reads it.

        ``tensordict`` holds the actions of every sub-env (batch ``[num_workers]``), or of the
        rows named by its int64 ``"env_index"`` entry (shape ``[k]``, batch ``[k]``). Inputs are
        checked as by ``step``. A sub-env whose last step was not received yet is refused
        (``RuntimeError`` naming it); ``step``, ``reset`` and ``set_seed`` are refused while
        any step is in flight.

        Examples:
            >>> import torch
            >>> from rlbatched import ParallelEnv
            >>> from rlmocks import CountingEnv
            >>> env = ParallelEnv(4, CountingEnv, num_processes=2, mp_start_method="fork")
            >>> td = env.reset()
            >>> td["action"] = torch.ones(4, 1, dtype=torch.int8)
            >>> env.async_step_send(td)
            >>> out = env.async_step_recv(min_get=4)
            >>> out["env_index"].tolist(), out["next", "observation"].flatten().tolist()
            ([0, 1, 2, 3], [1, 1, 1, 1])
            >>> env.async_step_send(out[:2].exclude("next"))  # sub-envs 0 and 1 step again
            >>> env.async_step_recv(min_get=2)["env_index"].tolist()
            [0, 1]
            >>> env.close()
        """
        env_index = tensordict.get(ENV_INDEX, None)
        if env_index is None:
            self._check_batch(tensordict)
            rows = list(range(self.num_workers))
            tensordict = tensordict.copy()  # later edits of the caller's tensordict are not seen
        else:
            rows = self._check_env_index(env_index, tensordict)
            tensordict = tensordict.exclude(ENV_INDEX)
        for index in rows:
            if index in self._async:
                raise RuntimeError(ASYNC_BUSY.format(index=index))
        self._open_for_step()
        pool = self._pool
        with torch.no_grad():
            pool.sync(rows)  # an interrupted exchange is finished before the inputs are overwritten
            if env_index is None:
                skipped = self._write_inputs(tensordict, "step", "async_step_send")
            else:
                skipped = self._write_rows(tensordict, rows)
            self._send_steps(rows, skipped, "async_step_send")
        for position, index in enumerate(rows):
            self._async[index] = (tensordict, position)

    def _send_steps(self, rows: Iterable[int], skipped: list | None, phase: str) -> None:
        """Start a step of the sub-envs ``rows``, each leaving out its ``skipped`` input keys.

        A sub-env keeps the keys it was last told to leave out: only a change goes through
        its pipe (command ``"step"``, with the new keys); the others get the one-byte flag
        command, so a caller that always omits the same entries (e.g. steps with the action
        alone) stays on the flag path.
        """
        pool, known = self._pool, self._worker_skips
        flagged = []
        for index in rows:
            keys = (skipped[index] or None) if skipped is not None else None
            if keys == known[index]:
                flagged.append(index)
            else:
                known[index] = keys
                pool.send(index, "step", keys, phase)
        if len(flagged) == self.num_workers:
            pool.broadcast(STEP, phase)  # every process woken, no per-slot bookkeeping
        elif flagged:
            pool.broadcast(STEP, phase, flagged)

    def _check_env_index(self, env_index: Any, tensordict: TensorDictBase) -> list[int]:
        batch = tuple(tensordict.batch_size)
        got = f"{type(env_index).__name__}"
        if isinstance(env_index, torch.Tensor):
            got = f"shape {tuple(env_index.shape)}, dtype {env_index.dtype}"
            if (
                env_index.dtype == torch.int64
                and env_index.dim() == 1
                and batch[:1] == tuple(env_index.shape)
            ):
                rows = env_index.tolist()
                if len(set(rows)) == len(rows) and all(0 <= i < self.num_workers for i in rows):
                    return rows
                got = f"{rows}"
        raise ValueError(
            BAD_ENV_INDEX.format(key=ENV_INDEX, num_workers=self.num_workers, batch=batch, got=got)
        )

    def _write_rows(self, tensordict: TensorDictBase, rows: list[int]) -> list | None:
        """``_write_inputs`` for the sub-envs ``rows`` (the rows of ``tensordict``, in order)."""
        plan = self._plans.get("step") or self._plan("step")
        where = "ParallelEnv.async_step_send"
        if plan[0] == "flat":
            _, keys, rules, dsts = plan
            values = get_many(tensordict, keys)
            row_rules = self._plans.get(("rows", len(rows)))
            if row_rules is None:
                row_rules = self._plans[("rows", len(rows))] = _rules_for_rows(rules, len(rows))
            skipped = check_flat(row_rules, values, where, True)
            for index in skipped or ():
                values[index] = None
            at = _rows_index(tuple(rows))
            for dst, value in zip(dsts, values):
                if value is not None:
                    # index_copy_ is dst[at] = value without advanced indexing's overhead
                    dst.index_copy_(0, at.to(dst.device), value.to(dst.device, dst.dtype))
            if self._sync_cuda:
                torch.cuda.synchronize(self.shared_tensordict_parent.device)
            if skipped is None:
                return None
            return [[keys[index] for index in skipped]] * self.num_workers
        _, trees, dsts = plan
        per_worker: list = [[] for _ in range(self.num_workers)]
        for position, index in enumerate(rows):
            src, dst = tensordict[position], dsts[index]
            skipped = trees[index].check(src, where, True)
            keep = [key for key in dst.keys(True, True) if key not in skipped]
            if keep:
                dst.update_(src.select(*keep, strict=False))
            per_worker[index] = skipped
        if self._sync_cuda:
            torch.cuda.synchronize(self.shared_tensordict_parent.device)
        return per_worker if any(per_worker) else None

    @closes_on_worker_loss
    def async_step_recv(self, min_get: int = 1) -> TensorDictBase:
        """Wait until ``min_get`` sub-envs sent to have stepped; return every one that has.

        The result has batch ``[k]`` (``k >= min_get``), one row per sub-env, in ascending
        order of its int64 ``"env_index"`` entry: what ``step`` returns for those rows (the
        tensordict sent, less ``"env_index"``, with the step's outputs under ``"next"``); rows
        of sends with different entries come as a lazy stack, each row with its own.
        The other sub-envs stay in flight. Sub-envs that share a process
        (``num_processes < num_workers``) are stepped one after the other, in index order,
        so they tend to become ready together, a process's block at a time. A sub-env that
        raised is no longer in flight; its error is raised. ``RuntimeError`` when nothing is
        in flight.

        Examples:
            >>> import torch
            >>> from rlbatched import ParallelEnv
            >>> from rlmocks import CountingEnv
            >>> env = ParallelEnv(2, CountingEnv, mp_start_method="fork")
            >>> td = env.reset()
            >>> td["action"] = torch.ones(2, 1, dtype=torch.int8)
            >>> env.async_step_send(td)
            >>> out = env.async_step_recv(min_get=2)
            >>> out.batch_size, out["env_index"].tolist()
            (torch.Size([2]), [0, 1])
            >>> env.close()
        """
        if not self._async:
            raise RuntimeError(ASYNC_NOTHING)
        in_flight = sorted(self._async)
        if (
            not isinstance(min_get, int)
            or isinstance(min_get, bool)
            or not 1 <= min_get <= len(in_flight)
        ):
            raise ValueError(ASYNC_MIN_GET.format(in_flight=len(in_flight), got=min_get))
        pool = self._pool
        try:
            ready = sorted(pool.gather_ready("async_step_recv", in_flight, min_get))
        except BaseException:
            if pool.alive:  # failed sub-envs were read: they are no longer in flight
                pending = set(pool.pending)
                for index in in_flight:
                    if index not in pending:
                        del self._async[index]
            raise
        groups: dict[int, tuple[TensorDictBase, list, list]] = {}
        for index in ready:
            sent, position = self._async.pop(index)
            group = groups.setdefault(id(sent), (sent, [], []))
            group[1].append(position)
            group[2].append(index)
        order = [index for _, _, indices in groups.values() for index in indices]
        parts = []
        for sent, positions, _ in groups.values():
            whole = positions == list(range(sent.shape[0]))
            parts.append(sent.copy() if whole else take_rows(sent, _rows_index(tuple(positions))))
        out = parts[0] if len(parts) == 1 else cat(parts)
        if out is None:  # sends with different entries: each row keeps its own (a lazy stack)
            out = LazyStackedTensorDict.lazy_stack(
                [row for part in parts for row in part.unbind(0)]
            )
        if order != ready:
            out = take_rows(out, _rows_index(tuple(order)).argsort())
        if len(ready) == self.num_workers:
            nxt = self._read(self._next_view)
        else:  # the rows are copied out of the shared buffer here: no second copy
            nxt = take_rows(self._next_view, _rows_index(tuple(ready)))
            if self.device is not None and nxt.device != self.device:
                nxt = move(nxt, self.device, self.non_blocking)
        preset = out.get("next", None)
        if preset is not None:
            nxt.update(preset.exclude(*nxt.keys(True, True)))
        out.set("next", nxt)
        out.set(ENV_INDEX, torch.tensor(ready, dtype=torch.int64, device=out.device))
        return out


@functools.lru_cache(maxsize=1024)
def _rows_index(rows: tuple[int, ...]) -> torch.Tensor:
    """``torch.tensor(rows)``, made once per tuple (an index only: never written to)."""
    return torch.tensor(rows, dtype=torch.int64)


def _rules_for_rows(rules: list, rows: int) -> list:
    """``rules`` (of the whole batch) for ``rows`` rows of it: the first dim changed."""
    out = []
    for rule in rules:
        if rule.shape is not None:
            rule = copy.copy(rule)
            rule.shape = torch.Size((rows, *rule.shape[1:]))
        out.append(rule)
    return out

"""ParallelEnv's asynchronous steps and resets: ``async_step_send``/``async_step_recv`` and
``async_reset_send``/``async_reset_recv`` (a mixin).

Some sub-envs step (or reset) while the caller goes on; the ``recv`` call returns those that
are ready. The inputs are checked and written as ``step`` and ``reset`` write them
(``_write_inputs``, or ``_write_rows`` for the rows named by ``"env_index"``), the same
one-byte flag wakes a stepping worker, and a worker that fails is reported as by ``step``.
Without buffers (``use_buffers=False``) each row goes through its worker's pipe and the
replies are the results. Also here: ``closes_on_worker_loss``, the guard of every ParallelEnv
call that talks to the workers.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rlcore.step_inputs import ACTION, DONE, OBSERVATION, STATE, check_flat, get_many

from ._async_rows import (
    ASYNC_BUSY,
    ASYNC_PENDING,
    ENV_INDEX,
    RESET_KIND,
    STEP_KIND,
    async_rows,
    index_entry,
    recv_plan,
    rows_index,
    sent_rows,
)
from ._batched_base import _parts, move
from ._tensordict_ops import take_rows
from ._worker_env import STEP

__all__ = ["AsyncStepsMixin", "closes_on_worker_loss"]

ROLES = {STEP_KIND: (ACTION, STATE, OBSERVATION), RESET_KIND: (ACTION, STATE, OBSERVATION, DONE)}


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
    """``ParallelEnv``'s asynchronous steps and resets (see the module docstring)."""

    def _refuse_if_async(self, where: str) -> None:
        if self._async:
            raise RuntimeError(
                ASYNC_PENDING.format(where=f"ParallelEnv.{where}", indices=sorted(self._async))
            )

    @closes_on_worker_loss
    def async_step_send(
        self, tensordict: TensorDictBase, env_index: int | Sequence[int] | None = None
    ) -> None:
        """Start a step of some sub-envs without waiting for it; ``async_step_recv`` reads it.

        ``tensordict`` holds the actions of every sub-env (batch ``[num_workers, ...]``), or of
        the rows named by ``env_index`` (a list: batch ``[k, ...]``; an int: one sub-env's
        data, its own batch size) or, failing that, by its int64 ``"env_index"`` entry (shape
        ``[k]``, or ``[k, *sub_env_batch]`` repeating each index). Inputs are checked as by
        ``step``. A sub-env with a step or reset not received yet is refused (``RuntimeError``
        naming it); ``step``, ``reset`` and ``set_seed`` are refused while anything is in flight.

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
        self._async_send(tensordict, env_index, STEP_KIND)

    @closes_on_worker_loss
    def async_reset_send(
        self,
        tensordict: TensorDictBase | None = None,
        env_index: int | Sequence[int] | None = None,
    ) -> None:
        """Start a reset of some sub-envs without waiting for it; ``async_reset_recv`` reads it.

        The sub-envs are named as in ``async_step_send`` (every one when neither ``env_index``
        nor an ``"env_index"`` entry says otherwise); ``tensordict``, when given, holds their
        reset inputs (checked as by ``reset``), ``"_reset"`` entries included.

        Examples:
            >>> from rlbatched import ParallelEnv
            >>> from rlmocks import CountingEnv
            >>> env = ParallelEnv(3, CountingEnv, mp_start_method="fork")
            >>> env.async_reset_send(env_index=[2, 0])
            >>> out = env.async_reset_recv(min_get=2)
            >>> out["env_index"].tolist(), out["observation"].flatten().tolist()
            ([0, 2], [0, 0])
            >>> env.close()
        """
        self._async_send(tensordict, env_index, RESET_KIND)

    @closes_on_worker_loss
    def async_step_recv(
        self,
        min_get: int = 1,
        env_index: int | Sequence[int] | None = None,
        *,
        max_get: int | None = None,
    ) -> TensorDictBase:
        """Wait until ``min_get`` sub-envs sent to have stepped; return every one that has.

        The result has batch ``[k]`` (``k >= min_get``; ``k <= max_get`` when given, the lowest
        indices first), one row per sub-env, in ascending order of its int64 ``"env_index"``
        entry: what ``step`` returns for those rows (the tensordict sent, less
        ``"env_index"``, with the step's outputs under ``"next"``); rows of sends with
        different entries come as a lazy stack, each row with its own. ``env_index`` waits for
        those sub-envs exactly (``min_get`` is then ignored). The other sub-envs stay in
        flight. Sub-envs that share a process (``num_processes < num_workers``) are stepped one
        after the other, in index order, so they tend to become ready together, a process's
        block at a time. A sub-env that raised is no longer in flight; its error is raised.
        ``RuntimeError`` when nothing is in flight.

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
        return self._async_recv(STEP_KIND, min_get, env_index, max_get)

    @closes_on_worker_loss
    def async_reset_recv(
        self,
        min_get: int = 1,
        env_index: int | Sequence[int] | None = None,
        *,
        max_get: int | None = None,
    ) -> TensorDictBase:
        """Wait until ``min_get`` sub-envs sent a reset have reset; return every one that has.

        As ``async_step_recv``; each row is what ``reset`` returns for that sub-env
        (observations, done flags and state), with its ``"env_index"``.

        Examples:
            >>> from rlbatched import ParallelEnv
            >>> from rlmocks import CountingEnv
            >>> env = ParallelEnv(2, CountingEnv, mp_start_method="fork")
            >>> env.async_reset_send()
            >>> env.async_reset_recv(env_index=1)["env_index"].tolist()
            [1]
            >>> env.async_reset_recv()["env_index"].tolist()
            [0]
            >>> env.close()
        """
        return self._async_recv(RESET_KIND, min_get, env_index, max_get)

    # ------------------------------------------------------------------ sending
    def _async_send(self, tensordict: TensorDictBase | None, env_index: Any, kind: str) -> None:
        where = f"ParallelEnv.async_{kind}_send"
        tensordict, rows = async_rows(tensordict, env_index, self.batch_size, where)
        for index in rows:
            if index in self._async:
                busy = self._async[index][2]
                raise RuntimeError(ASYNC_BUSY.format(where=where, index=index, kind=busy))
        whole = len(rows) == self.num_workers
        if kind == STEP_KIND:
            self._open_for_step()
        else:  # a closed env reopens on a reset of every sub-env only
            flags = torch.tensor([index in rows for index in range(self.num_workers)])
            self._open_for_reset(None if whole else {"_reset": flags})
        pool = self._pool
        with torch.no_grad():
            pool.sync(rows)  # an interrupted exchange is finished before the inputs are overwritten
            if kind == STEP_KIND and not self._use_buffers:
                self._check_rows(tensordict, rows, kind, where)
                for index, part in zip(rows, _parts(tensordict)):
                    pool.send(index, "step_td", self._to_env(part, index), where)
            elif kind == STEP_KIND:
                if whole and rows == sorted(rows):
                    skipped = self._write_inputs(tensordict, "step", f"async_{kind}_send")
                else:
                    skipped = self._write_rows(tensordict, rows, kind, where)
                self._send_steps(rows, skipped, where)
            else:
                self._send_resets(tensordict, rows, where)
                if whole:
                    self._must_reset = False
        for position, index in enumerate(rows):
            self._async[index] = (tensordict, position, kind)

    def _send_resets(self, tensordict: TensorDictBase | None, rows: list[int], where: str) -> None:
        """Start a reset of the sub-envs ``rows`` on their rows of ``tensordict`` (if any)."""
        pool = self._pool
        parts = [None] * len(rows) if tensordict is None else _parts(tensordict)
        if not self._use_buffers:
            if tensordict is not None:
                self._check_rows(tensordict, rows, RESET_KIND, where)
            for index, part in zip(rows, parts):
                part = None if part is None else self._to_env(part, index)
                pool.send(index, "reset_td", (part, {}), where)
            return
        skipped = None
        if tensordict is not None:
            skipped = self._write_rows(tensordict, rows, RESET_KIND, where)
            skipped = skipped or [[] for _ in range(self.num_workers)]
        for index, part in zip(rows, parts):
            masks = None
            if part is not None:
                masks = {
                    key: part.get(key).cpu().numpy()
                    for key in self.reset_keys
                    if part.get(key, None) is not None
                } or None
            keys = None if skipped is None else skipped[index]
            pool.send(index, "reset", (masks, {}, keys), where)

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

    def _check_rows(
        self, tensordict: TensorDictBase, rows: list[int], kind: str, where: str
    ) -> list | None:
        """Check the rows of ``tensordict`` (sub-envs ``rows``) as ``step``/``reset`` checks a
        whole input; return, per worker, the keys that are not passed on (or None)."""
        rules = self._input_rules(ROLES[kind])
        require = kind == STEP_KIND and self._action_required
        if rules[0] == "flat":
            _, keys, flat = rules
            rules = self._row_rules(flat, kind, len(rows))
            skipped = check_flat(rules, get_many(tensordict, keys), where, require)
            if skipped is None:
                return None
            return [[keys[index] for index in skipped]] * self.num_workers
        per_worker: list = [[] for _ in range(self.num_workers)]
        for index, part in zip(rows, _parts(tensordict)):
            per_worker[index] = rules[1][index].check(part, where, require)
        return per_worker if any(per_worker) else None

    def _row_rules(self, rules: list, kind: str, count: int) -> list:
        row_rules = self._plans.get(("rows", kind, count))
        if row_rules is None:
            row_rules = self._plans[("rows", kind, count)] = _rules_for_rows(rules, count)
        return row_rules

    def _write_rows(
        self, tensordict: TensorDictBase, rows: list[int], kind: str, where: str
    ) -> list | None:
        """``_write_inputs`` for the sub-envs ``rows`` (the rows of ``tensordict``, in order).

        For a reset, the inputs not given are zeroed in those rows (as ``reset`` zeroes them).
        """
        phase = kind
        plan = self._plans.get(phase) or self._plan(phase)
        require = kind == STEP_KIND and self._action_required
        if plan[0] == "flat":
            _, keys, rules, dsts = plan
            values = get_many(tensordict, keys)
            skipped = check_flat(self._row_rules(rules, kind, len(rows)), values, where, require)
            at = rows_index(tuple(rows))
            for index in skipped or ():
                values[index] = None
                if kind == RESET_KIND:
                    dst = dsts[index]
                    dst.index_fill_(0, at.to(dst.device), 0)
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
            skipped = trees[index].check(src, where, require)
            keep = [key for key in dst.keys(True, True) if key not in skipped]
            if keep:
                dst.update_(src.select(*keep, strict=False))
            if kind == RESET_KIND:
                for key in skipped:
                    if key in dst.keys(True, True):
                        dst.get(key).zero_()
            per_worker[index] = skipped
        if self._sync_cuda:
            torch.cuda.synchronize(self.shared_tensordict_parent.device)
        return per_worker if any(per_worker) else None

    # ------------------------------------------------------------------ receiving
    def _async_recv(
        self, kind: str, min_get: int, env_index: Any, max_get: int | None
    ) -> TensorDictBase:
        where = f"ParallelEnv.async_{kind}_recv"
        in_flight = sorted(index for index, sent in self._async.items() if sent[2] == kind)
        in_flight, min_get, max_get = recv_plan(in_flight, kind, min_get, env_index, max_get, where)
        pool = self._pool
        try:
            replies = pool.gather_ready(where, in_flight, min_get, max_get)
        except BaseException:
            if pool.alive:  # failed sub-envs were read: they are no longer in flight
                pending = set(pool.pending)
                for index in in_flight:
                    if index not in pending:
                        del self._async[index]
            raise
        ready = sorted(replies)
        sent = [self._async.pop(index) for index in ready]
        if not self._use_buffers:
            results = self._stack([self._to_out(replies[index]) for index in ready])
        elif kind == STEP_KIND:
            results = self._rows_of(self._next_view, ready)
        else:
            results = self._rows_of(self._reset_view, ready)
        if kind == STEP_KIND:
            out = sent_rows(sent, ready)
            preset = out.get("next", None)
            if preset is not None:
                results.update(preset.exclude(*results.keys(True, True)))
            out.set("next", results)
        else:
            out = results
        out.set(ENV_INDEX, index_entry(ready, self.batch_size, out.device))
        return out

    def _rows_of(self, view: TensorDictBase, ready: list[int]) -> TensorDictBase:
        """A copy of the rows ``ready`` of a shared view, on the env's device."""
        if len(ready) == self.num_workers:
            return self._read(view)
        # the rows are copied out of the shared buffer here: no second copy
        out = take_rows(view, rows_index(tuple(ready)))
        if self.device is not None and out.device != self.device:
            out = move(out, self.device, self.non_blocking)
        return out


def _rules_for_rows(rules: list, rows: int) -> list:
    """``rules`` (of the whole batch) for ``rows`` rows of it: the first dim changed."""
    out = []
    for rule in rules:
        if rule.shape is not None:
            rule = copy.copy(rule)
            rule.shape = torch.Size((rows, *rule.shape[1:]))
        out.append(rule)
    return out

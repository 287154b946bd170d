"""How an asynchronous call names its sub-envs and how its results come back, for
``ParallelEnv``'s asynchronous steps and resets (``rlbatched._parallel_async``) and
``AsyncEnvPool``.

A send names its sub-envs by ``env_index`` (an int or a sequence) or by its input's int64
``"env_index"`` entry (``async_rows``); a receive waits for some of those in flight
(``recv_plan``) and returns their rows (``sent_rows``) with their ``"env_index"``
(``index_entry``), in ascending order of it. The error texts name the caller (``where``:
``"ParallelEnv.async_step_send"``, ...).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from ._batched_base import BATCH_ERROR
from ._tensordict_ops import cat, take_rows

__all__ = [
    "ASYNC_BUSY",
    "ASYNC_PENDING",
    "ENV_INDEX",
    "RESET_KIND",
    "STEP_KIND",
    "async_rows",
    "index_entry",
    "recv_plan",
    "rows_index",
    "sent_rows",
]

ENV_INDEX = "env_index"
STEP_KIND, RESET_KIND = "step", "reset"
ASYNC_BUSY = (
    "{where}: sub-env {index} still has a {kind} in flight; receive it with "
    "async_{kind}_recv() before sending it anything else."
)
ASYNC_NOTHING = "{where}: no {kind} in flight; send with async_{kind}_send() first."
ASYNC_NOT_IN_FLIGHT = (
    "{where}: env_index {wanted} names sub-envs with no {kind} in flight (those in "
    "flight: {in_flight})."
)
ASYNC_MIN_GET = (
    "{where}: min_get must be an int between 1 and the number of sub-envs "
    "in flight ({in_flight}), got {got!r}."
)
ASYNC_MAX_GET = (
    "{where}: max_get must be an int greater than or equal to min_get, got "
    "min_get={min_get} and max_get={max_get!r}."
)
ASYNC_PENDING = (
    "{where}: sub-envs {indices} have asynchronous steps or resets in flight "
    "(async_step_send / async_reset_send); receive them first."
)
BAD_ENV_INDEX = (
    "{where}: {key!r} must be an int64 tensor of distinct sub-env indices in "
    "[0, {num_workers}), one per row of the tensordict (batch {batch}; repeated along the "
    "sub-envs' own batch dims), got {got}."
)


def async_rows(
    tensordict: TensorDictBase | None, env_index: Any, batch_size: torch.Size, where: str
) -> tuple[TensorDictBase | None, list[int]]:
    """The sub-envs an asynchronous send names, and the tensordict of their rows.

    The rows are named by ``env_index`` (an int: ``tensordict`` is that sub-env's data, given a
    leading dim here; a sequence of ints), else by the tensordict's int64 ``"env_index"`` entry
    (shape ``[k]`` or ``[k, *batch_size[1:]]``, each row repeating its index), else they are
    every sub-env (``tensordict``, if given, then has the env's batch size). The tensordict
    returned is a new one, without ``"env_index"``. ``where`` names the caller in errors.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(env_index=torch.tensor([2, 0]), batch_size=[2])
        >>> async_rows(td, None, torch.Size([3]), "demo")[1]
        [2, 0]
        >>> async_rows(None, 1, torch.Size([3]), "demo")
        (None, [1])
    """
    num_workers = batch_size[0]
    if isinstance(env_index, int) and not isinstance(env_index, bool):
        rows = _named_rows([env_index], num_workers, where)
        if tensordict is not None:
            tensordict = tensordict.unsqueeze(0)
    elif env_index is not None:
        rows = _named_rows(list(env_index), num_workers, where)
    elif tensordict is not None and ENV_INDEX in tensordict.keys():
        rows = _rows_of_entry(tensordict, batch_size, where)
    else:
        rows = list(range(num_workers))
        if tensordict is not None and tensordict.batch_size != batch_size:
            raise RuntimeError(
                BATCH_ERROR.format(
                    got=tuple(tensordict.batch_size),
                    expected=tuple(batch_size),
                    num_workers=num_workers,
                )
            )
    if tensordict is not None:
        tensordict = tensordict.exclude(ENV_INDEX)  # later edits by the caller are not seen
        if tensordict.batch_size[:1] != (len(rows),):
            raise ValueError(
                BAD_ENV_INDEX.format(
                    where=where,
                    key=ENV_INDEX,
                    num_workers=num_workers,
                    batch=tuple(tensordict.batch_size),
                    got=rows,
                )
            )
    return tensordict, rows


def _named_rows(rows: list, num_workers: int, where: str) -> list[int]:
    if (
        not rows
        or len(set(rows)) != len(rows)
        or not all(isinstance(i, int) and 0 <= i < num_workers for i in rows)
    ):
        raise ValueError(
            BAD_ENV_INDEX.format(
                where=where,
                key=ENV_INDEX,
                num_workers=num_workers,
                batch=f"[{len(rows)}]",
                got=rows,
            )
        )
    return rows


def _rows_of_entry(tensordict: TensorDictBase, batch_size: torch.Size, where: str) -> list[int]:
    env_index = tensordict.get(ENV_INDEX)
    num_workers = batch_size[0]
    batch = tuple(tensordict.batch_size)
    got = f"{type(env_index).__name__}"
    if isinstance(env_index, torch.Tensor):
        got = f"shape {tuple(env_index.shape)}, dtype {env_index.dtype}"
        if (
            env_index.dtype == torch.int64
            and env_index.dim() >= 1
            and tuple(env_index.shape) in (batch[:1], (*batch[:1], *batch_size[1:]))
        ):
            flat = env_index.reshape(env_index.shape[0], -1)
            rows = flat[:, 0].tolist()
            got = f"{flat.tolist()}"
            if bool((flat == flat[:, :1]).all()):
                if len(set(rows)) == len(rows) and all(0 <= i < num_workers for i in rows):
                    return rows
                got = f"{rows}"
    raise ValueError(
        BAD_ENV_INDEX.format(
            where=where, key=ENV_INDEX, num_workers=num_workers, batch=batch, got=got
        )
    )


def recv_plan(
    in_flight: list[int],
    kind: str,
    min_get: int,
    env_index: int | Sequence[int] | None,
    max_get: int | None,
    where: str,
) -> tuple[list[int], int, int | None]:
    """What an asynchronous receive waits for: ``(sub-envs, min_get, max_get)``.

    ``in_flight``: the sub-envs with a ``kind`` (``"step"`` or ``"reset"``) in flight.
    ``env_index`` narrows them to those named, all of which are then waited for. Raises
    ``RuntimeError`` when nothing is in flight, ``ValueError`` for bad arguments.

    Examples:
        >>> recv_plan([0, 2, 3], "step", 2, None, None, "demo")
        ([0, 2, 3], 2, None)
        >>> recv_plan([0, 2, 3], "step", 1, [3, 2], None, "demo")
        ([2, 3], 2, None)
    """
    if not in_flight:
        raise RuntimeError(ASYNC_NOTHING.format(where=where, kind=kind))
    if env_index is not None:
        wanted = [env_index] if isinstance(env_index, int) else sorted(env_index)
        if not wanted or not set(wanted) <= set(in_flight):
            raise ValueError(
                ASYNC_NOT_IN_FLIGHT.format(
                    where=where, wanted=wanted, kind=kind, in_flight=in_flight
                )
            )
        return wanted, len(wanted), None
    if (
        not isinstance(min_get, int)
        or isinstance(min_get, bool)
        or not 1 <= min_get <= len(in_flight)
    ):
        raise ValueError(ASYNC_MIN_GET.format(where=where, in_flight=len(in_flight), got=min_get))
    if max_get is not None and (
        not isinstance(max_get, int) or isinstance(max_get, bool) or max_get < min_get
    ):
        raise ValueError(ASYNC_MAX_GET.format(where=where, min_get=min_get, max_get=max_get))
    return in_flight, min_get, max_get


def sent_rows(sent: list[tuple], ready: list[int]) -> TensorDictBase:
    """The rows of the tensordicts sent for the sub-envs ``ready``, in that order.

    ``sent[i]`` is ``(tensordict, row, ...)``: the send of sub-env ``ready[i]`` and its row in it.
    """
    groups: dict[int, tuple[TensorDictBase, list, list]] = {}
    for index, (td, position, *_) in zip(ready, sent):
        group = groups.setdefault(id(td), (td, [], []))
        group[1].append(position)
        group[2].append(index)
    order = [index for _, _, indices in groups.values() for index in indices]
    parts = []
    for td, positions, _ in groups.values():
        whole = positions == list(range(td.shape[0]))
        parts.append(td.copy() if whole else take_rows(td, rows_index(tuple(positions))))
    out = parts[0] if len(parts) == 1 else cat(parts)
    if out is None:  # sends with different entries: each row keeps its own (a lazy stack)
        out = LazyStackedTensorDict.lazy_stack([row for part in parts for row in part.unbind(0)])
    if order != ready:
        out = take_rows(out, rows_index(tuple(order)).argsort())
    return out


def index_entry(ready: list[int], batch_size: torch.Size, device: Any) -> torch.Tensor:
    """The ``"env_index"`` entry of a receive's result: each row's sub-env index, repeated along
    the sub-envs' own batch dims (``batch_size[1:]``)."""
    index = torch.tensor(ready, dtype=torch.int64, device=device)
    sub = batch_size[1:]
    return index.reshape(-1, *([1] * len(sub))).expand(-1, *sub).clone()


@functools.lru_cache(maxsize=1024)
def rows_index(rows: tuple[int, ...]) -> torch.Tensor:
    """``torch.tensor(rows)``, made once per tuple (an index only: never written to)."""
    return torch.tensor(rows, dtype=torch.int64)

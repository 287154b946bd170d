"""Aggregating done / terminated / truncated flags into ``"_reset"`` signals."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase, is_tensor_collection
from tensordict.utils import is_non_tensor

from rlspecs import Composite
from rlspecs.private_apis import td_get_str

__all__ = ["any_true", "flag_done", "reduce_to_batch", "terminated_or_truncated"]

DONE_NAMES = ("done", "terminated", "truncated")
# Flags from which ``any_true`` asks NumPy (measured in rollouts: slower below, by 2 µs at 1,024)
NUMPY_ANY_MIN = 8192


def any_true(flag: torch.Tensor) -> bool:
    """``bool(flag.any())``, cheaper: a single element is read directly (about 0.2 µs against
    1 µs), a large CPU boolean tensor through NumPy's ``any`` (1.5 µs against 8 µs at 16,384).

    Examples:
        >>> any_true(torch.tensor([[False], [True]])), any_true(torch.zeros(1, dtype=torch.bool))
        (True, False)
    """
    numel = flag.numel()
    if numel == 1:
        return bool(flag)
    if (
        numel >= NUMPY_ANY_MIN
        and flag.dtype is torch.bool
        and flag.device.type == "cpu"
        and not flag.requires_grad
    ):
        return bool(flag.numpy().any())
    return bool(flag.any())


def reduce_to_batch(flag: torch.Tensor, batch_size: torch.Size) -> torch.Tensor:
    """Returns ``flag`` (shape ``(*batch_size, ...)``) reduced with ``any`` to ``batch_size``."""
    extra = flag.ndim - len(batch_size)
    if extra <= 0:
        return flag
    if extra == 1:
        return flag.any(-1)
    return flag.reshape(*batch_size, -1).any(-1)


def terminated_or_truncated(
    data: TensorDictBase,
    full_done_spec: Composite | None = None,
    key: str | None = "_reset",
    write_full_false: bool = False,
) -> bool:
    """Returns whether any done/terminated/truncated flag of ``data`` is set.

    At every level holding done leaves (from ``full_done_spec`` or, without it, the entries named
    ``"done"``, ``"terminated"`` or ``"truncated"``), the flags are OR-ed, reduced to the batch
    size of that level and written under ``key`` (skipped when ``key`` is None). When nothing is
    done, the written entries are removed again unless ``write_full_false``. Flags at a level
    prevail over those of its sub-levels: a nested done counts only where its parent level has no
    done leaves.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict({"done": torch.tensor([[True], [False]])}, [2])
        >>> terminated_or_truncated(data)
        True
        >>> data["_reset"]
        tensor([ True, False])
    """
    written: list[tuple[str, ...]] = []
    any_end = _visit(data, full_done_spec, key, (), written, True)
    if not any_end and not write_full_false and written:
        data.exclude(*written, inplace=True)
    return any_end


def flag_done(data: TensorDictBase, full_done_spec: Composite, key: str = "_reset") -> bool:
    """Like ``terminated_or_truncated`` but the flags keep the done leaves' shape (``(*B, 1)``).

    This is the form ``maybe_reset`` hands to ``_reset``.
    """
    written: list[tuple[str, ...]] = []
    any_end = _visit(data, full_done_spec, key, (), written, False)
    if not any_end and written:
        data.exclude(*written, inplace=True)
    return any_end


def _visit(
    node: TensorDictBase,
    spec: Composite | None,
    key: str | None,
    prefix: tuple[str, ...],
    written: list[tuple[str, ...]],
    reduce: bool,
) -> bool:
    aggregate = None
    subs: list[tuple[str, Any, Composite | None]] = []
    if spec is None:
        for name in list(node.keys()):
            value = td_get_str(node, name, None)
            if name in DONE_NAMES:
                aggregate = value if aggregate is None else aggregate | value
            elif is_tensor_collection(value) and not is_non_tensor(value):
                subs.append((name, value, None))
    else:
        for name, item in spec.items():
            value = td_get_str(node, name, None)
            if value is None:
                continue
            if isinstance(item, Composite):
                subs.append((name, value, item))
            else:
                aggregate = value if aggregate is None else aggregate | value
    any_end = False
    for name, value, sub_spec in subs:
        sub_end = _visit(value, sub_spec, key, (*prefix, name), written, reduce)
        if aggregate is None:
            any_end = any_end or sub_end
    if aggregate is not None:
        if key is not None:
            flag = reduce_to_batch(aggregate, node.batch_size) if reduce else aggregate
            node.set(key, flag.clone() if flag is aggregate else flag)
            written.append((*prefix, key))
        any_end = any_end or bool(aggregate.any())
    return any_end

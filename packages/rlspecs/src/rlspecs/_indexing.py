"""Index parsing shared by every spec: specs index their batch dims the way a sample is indexed."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

TOO_MANY_INDICES = "too many indices for a spec of shape {shape}: {idx!r}"
ONE_ELLIPSIS = "an index can only have a single ellipsis (`...`), got {idx!r}"
INDEX_OUT_OF_RANGE = (
    "index {index} is out of bounds for dim {dim} of size {size} (spec shape {shape})"
)
BOOL_INDEX_SHAPE = (
    "boolean index of shape {got} does not match dims {expected} of spec shape {shape}"
)
BAD_INDEX = (
    "cannot index a spec with {type}: expected ints, slices, None, ..., ranges, lists, "
    "arrays or tensors"
)
NESTED_LIST_INDEX = (
    "nested-list index {idx!r} is ambiguous for this spec (torch reads it as a tuple of indices "
    "in some releases and as a tensor index in others): pass a tensor or a tuple instead. "
    "Pending resolution of https://github.com/pytorch/pytorch/issues/100080."
)
RAGGED_LIST_INDEX = "nested-list index {idx!r} is ragged: every inner list must have one length"


def is_nested_list(idx: Any, in_tuple: bool = False) -> bool:
    """Whether ``idx`` is, or holds as a tuple component, a list that contains a list.

    Examples:
        >>> is_nested_list([[0, 1], [1, 2]]), is_nested_list((0, [[1]])), is_nested_list([0, 1])
        (True, True, False)
    """
    if isinstance(idx, tuple) and not in_tuple:
        return any(is_nested_list(part, in_tuple=True) for part in idx)
    return isinstance(idx, list) and any(isinstance(part, list) for part in idx)


def _index_part(part: Any, idx: Any) -> Any:
    """One component of an index, with lists, ranges and arrays turned into tensors.

    A nested list becomes a tensor index of its shape, as torchrl 0.4 reads it.
    """
    if isinstance(part, np.integer):
        return int(part)
    if isinstance(part, range):
        return torch.arange(part.start, part.stop, part.step)
    if isinstance(part, (list, tuple)):
        try:
            return torch.as_tensor(np.asarray(part))
        except ValueError as err:
            raise IndexError(RAGGED_LIST_INDEX.format(idx=idx)) from err
    if isinstance(part, np.ndarray):
        return torch.as_tensor(part)
    return part


def normalize_index(idx: Any, shape: torch.Size) -> tuple:
    """Spell out an index over ``shape`` as a checked tuple without ``Ellipsis``.

    Specs index their batch dims only, so ``...`` must be resolved against the batch shape
    before the index reaches entries that have more dims. Lists, ranges and arrays become
    tensors (a nested list too, as a tensor index of its shape); out-of-range indices, two
    ellipses and too many indices raise ``IndexError``.

    Examples:
        >>> normalize_index((Ellipsis, 0), torch.Size([3, 2]))
        (slice(None, None, None), 0)
    """
    if isinstance(idx, list):
        idx = (_index_part(idx, idx),)
    elif isinstance(idx, tuple):
        idx = tuple(_index_part(i, idx) for i in idx)
    else:
        idx = (_index_part(idx, idx),)
    ellipses = sum(i is Ellipsis for i in idx)
    if ellipses > 1:
        raise IndexError(ONE_ELLIPSIS.format(idx=idx))
    used = sum(
        i.ndim if isinstance(i, torch.Tensor) and i.dtype == torch.bool else 1
        for i in idx
        if i is not Ellipsis and i is not None
    )
    if used > len(shape):
        raise IndexError(TOO_MANY_INDICES.format(shape=tuple(shape), idx=idx))
    if ellipses:
        k = next(k for k, i in enumerate(idx) if i is Ellipsis)
        idx = idx[:k] + (slice(None),) * (len(shape) - used) + idx[k + 1 :]
    _check_index_bounds(idx, shape)
    return idx


def _check_index_bounds(idx: tuple, shape: torch.Size) -> None:
    dim = 0
    for part in idx:
        if part is None:
            continue
        if isinstance(part, slice):
            dim += 1
        elif isinstance(part, int):
            size = shape[dim]
            if not -size <= part < size:
                raise IndexError(
                    INDEX_OUT_OF_RANGE.format(index=part, dim=dim, size=size, shape=tuple(shape))
                )
            dim += 1
        elif isinstance(part, torch.Tensor):
            if part.dtype == torch.bool:
                expected = shape[dim : dim + part.ndim]
                if part.shape != expected:
                    raise IndexError(
                        BOOL_INDEX_SHAPE.format(
                            got=tuple(part.shape), expected=tuple(expected), shape=tuple(shape)
                        )
                    )
                dim += part.ndim
                continue
            if part.is_floating_point() or part.is_complex():
                raise IndexError(BAD_INDEX.format(type=f"a {part.dtype} tensor"))
            size = shape[dim]
            if part.numel() and (int(part.max()) >= size or int(part.min()) < -size):
                bad = part[(part >= size) | (part < -size)].reshape(-1)[0].item()
                raise IndexError(
                    INDEX_OUT_OF_RANGE.format(index=bad, dim=dim, size=size, shape=tuple(shape))
                )
            dim += 1
        else:
            raise IndexError(BAD_INDEX.format(type=type(part).__name__))


def indexed_shape(shape: torch.Size, idx: tuple) -> torch.Size:
    """The shape that indexing a tensor of ``shape`` with a normalized ``idx`` gives."""
    return torch.empty(shape, device="meta")[idx].shape


def _index_tensor(value: torch.Tensor, idx: tuple) -> torch.Tensor:
    if any(isinstance(i, torch.Tensor) and i.device != value.device for i in idx):
        idx = tuple(i.to(value.device) if isinstance(i, torch.Tensor) else i for i in idx)
    return value[idx]


def pick(tensor_to_index: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """``tensor_to_index`` gathered along its last dim at ``labels`` (leading dims broadcast)."""
    shape = torch.broadcast_shapes(tensor_to_index.shape[:-1], labels.shape[:-1])
    source = tensor_to_index.expand(*shape, tensor_to_index.shape[-1])
    return source.gather(-1, labels.long().expand(*shape, labels.shape[-1]))

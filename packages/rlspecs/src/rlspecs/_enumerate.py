"""``enumerate`` and ``cardinality`` of discrete specs (current torchrl's API).

``spec.enumerate()`` stacks every value a sample of ``spec`` can take along a new first dim; the
value is the same across the spec's batch dims (each sample is broadcast over them), as in
torchrl. ``spec.cardinality()`` counts them.
"""

from __future__ import annotations

import itertools
from typing import Any

import torch
from tensordict import TensorDict

MASK_ROWS = (
    "{cls}.enumerate(use_mask=True) needs one mask shared by every batch entry, got a mask of "
    "shape {shape} whose rows differ"
)
MASKED_ENUMERATE = (
    "Cannot enumerate a masked TensorSpec. Submit an issue on github if this feature is "
    "requested. ({cls} with a mask: clear it with update_mask(None) first)"
)
HETEROGENEOUS_NVEC = (
    "Cannot call enumerate on heterogeneous nvecs: unique nvecs={nvec}. ({cls} has different "
    "nvec rows across its batch dims)"
)
NO_MASK_ENUMERATE = "{cls}.enumerate(use_mask=True) is not implemented (as in torchrl)"


def _broadcast(values: torch.Tensor, shape: torch.Size, domain_ndim: int) -> torch.Tensor:
    """``values`` (``(k, *domain)``) broadcast to ``(k, *shape)`` over the spec's batch dims."""
    batch_ndim = len(shape) - domain_ndim
    values = values.reshape(values.shape[0], *(1,) * batch_ndim, *values.shape[1:])
    return values.expand(values.shape[0], *shape)


def categorical_values(spec: Any, use_mask: bool) -> torch.Tensor:
    """The labels ``0..n-1`` (only the allowed ones with ``use_mask``), shape ``(k, *shape)``."""
    labels = torch.arange(spec.n, device=spec.device)
    if use_mask and spec.mask is not None:
        rows = spec.mask.reshape(-1, spec.n)
        if not bool((rows == rows[0]).all()):
            raise IndexError(
                MASK_ROWS.format(cls=type(spec).__name__, shape=tuple(spec.mask.shape))
            )
        labels = labels[rows[0]]
    return _broadcast(labels.to(spec.dtype), spec.shape, 0)


def binary_values(spec: Any) -> torch.Tensor:
    """Every combination of the ``n`` flags (``2 ** n`` of them), shape ``(2 ** n, *shape)``."""
    n = spec.shape[-1]
    combos = torch.tensor(list(itertools.product((0, 1), repeat=n)), device=spec.device)
    return _broadcast(combos.reshape(-1, n).to(spec.dtype), spec.shape, 1)


def one_hot_values(spec: Any, use_mask: bool) -> torch.Tensor:
    """The ``n`` one-hot vectors, shape ``(n, *shape)``."""
    if use_mask:
        raise NotImplementedError(NO_MASK_ENUMERATE.format(cls=type(spec).__name__))
    eye = torch.eye(spec.n, dtype=spec.dtype, device=spec.device)
    return _broadcast(eye, spec.shape, 1)


def nvec_row(spec: Any) -> list[int]:
    """The cardinalities shared by every batch entry of a multi-categorical ``spec``."""
    nvec = spec.nvec
    rows = nvec.reshape(-1, nvec.shape[-1]).unique(dim=0)
    if rows.shape[0] > 1:
        raise ValueError(HETEROGENEOUS_NVEC.format(nvec=rows.tolist(), cls=type(spec).__name__))
    return rows[0].tolist()


def multi_categorical_values(spec: Any, use_mask: bool) -> torch.Tensor:
    """Every combination of labels, shape ``(prod(nvec), *shape)``."""
    cls = type(spec).__name__
    if use_mask:
        raise NotImplementedError(NO_MASK_ENUMERATE.format(cls=cls))
    if spec.mask is not None:
        raise RuntimeError(MASKED_ENUMERATE.format(cls=cls))
    row = nvec_row(spec)
    grids = torch.meshgrid(*(torch.arange(n, device=spec.device) for n in row), indexing="ij")
    combos = torch.stack([g.reshape(-1) for g in grids], -1).to(spec.dtype)
    return _broadcast(combos, spec.shape, 1)


def multi_one_hot_values(spec: Any, use_mask: bool) -> torch.Tensor:
    """Every combination of one category per block, one-hot, shape ``(prod(nvec), *shape)``."""
    labels = multi_categorical_values(spec.to_categorical_spec(), use_mask)
    blocks = [
        torch.nn.functional.one_hot(column.long(), n)
        for n, column in zip(spec.nvec, labels.unbind(-1))
    ]
    return torch.cat(blocks, -1).to(spec.dtype)


def product(cardinalities: list[Any]) -> Any:
    """The product of the entries' cardinalities (``0`` when there is none)."""
    if not cardinalities:
        return 0
    out = 1
    for c in cardinalities:
        out = out * c
    return out


def composite_values(spec: Any, use_mask: bool) -> TensorDict:
    """Every combination of the entries' values, a ``TensorDict`` of batch ``(k, *shape)``."""
    single = spec
    while single.ndim:
        single = single[0]
    samples = {key: entry.enumerate(use_mask) for key, entry in single.items() if entry is not None}
    if not samples:
        return TensorDict({}, batch_size=spec.shape, device=spec.device)
    grids = torch.meshgrid(*(torch.arange(s.shape[0]) for s in samples.values()), indexing="ij")
    picks = [g.reshape(-1) for g in grids]
    out = TensorDict(
        {key: sample[idx] for (key, sample), idx in zip(samples.items(), picks)},
        batch_size=picks[0].shape[:1],
        device=spec.device,
    )
    if spec.ndim:
        out = out.reshape(-1, *(1,) * spec.ndim).expand(out.shape[0], *spec.shape)
    return out

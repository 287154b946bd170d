"""The tensordict operations the batched envs run on every step, fast on plain trees.

Each function handles plain ``TensorDict`` trees itself (skipping tensordict's per-leaf
validation, which dominates for small envs) and defers to tensordict for anything else
(lazy stacks, non-tensor data), so results are the same either way.
"""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from rlspecs.private_apis import foreach_copy_, td_entries, td_new


def clone(td: TensorDictBase) -> TensorDictBase:
    """A deep copy of ``td``."""
    if type(td) is not TensorDict:
        return td.clone()
    source = {}
    for key, value in td_entries(td).items():
        source[key] = value.clone() if isinstance(value, torch.Tensor) else clone(value)
    return td_new(source, td.batch_size, td.device)


def shallow_copy(td: TensorDictBase) -> TensorDictBase:
    """A new root tensordict holding the same leaves and sub-tensordicts."""
    if type(td) is not TensorDict:
        return td.copy()
    return td_new(dict(td_entries(td)), td.batch_size, td.device)


def stack(tds: list[TensorDictBase]) -> TensorDictBase:
    """``torch.stack(tds, 0)`` for tensordicts with the same keys."""
    first = tds[0]
    keys = td_entries(first).keys() if type(first) is TensorDict else None
    if keys is None or any(
        type(td) is not TensorDict or td_entries(td).keys() != keys for td in tds
    ):
        return torch.stack(tds, 0)
    source = {}
    for key, value in td_entries(first).items():
        values = [td_entries(td)[key] for td in tds]
        source[key] = torch.stack(values, 0) if isinstance(value, torch.Tensor) else stack(values)
    device = first.device
    if any(td.device != device for td in tds):
        device = None
    return td_new(source, torch.Size((len(tds), *first.batch_size)), device)


def cat(tds: list[TensorDictBase]) -> TensorDictBase | None:
    """``torch.cat(tds, 0)``, or None when their entries differ (not the same keys)."""
    if any(type(td) is not TensorDict for td in tds):
        if len({frozenset(td.keys(True, True)) for td in tds}) != 1:
            return None
        return torch.cat(tds, 0)
    first = td_entries(tds[0])
    entries = [td_entries(td) for td in tds]
    if any(e.keys() != first.keys() for e in entries[1:]):
        return None
    source = {}
    for key, value in first.items():
        values = [e[key] for e in entries]
        if isinstance(value, torch.Tensor):
            if not all(isinstance(v, torch.Tensor) for v in values):
                return None
            source[key] = torch.cat(values, 0)
        else:
            sub = cat(values)
            if sub is None:
                return None
            source[key] = sub
    batch = torch.Size((sum(td.batch_size[0] for td in tds), *tds[0].batch_size[1:]))
    device = tds[0].device
    if any(td.device != device for td in tds):
        device = None
    return td_new(source, batch, device)


def take_rows(td: TensorDictBase, index: torch.Tensor) -> TensorDictBase:
    """``td[index]`` for a 1-d int64 ``index``: a copy of those rows of dim 0, in that order."""
    if type(td) is not TensorDict:
        return td[index].clone()  # a lazy stack's rows would be its own tensordicts
    source = {}
    for key, value in td_entries(td).items():
        if isinstance(value, torch.Tensor):
            source[key] = value.index_select(0, index)
        else:
            source[key] = take_rows(value, index)
    return td_new(source, torch.Size((index.numel(), *td.batch_size[1:])), td.device)


def unbind(td: TensorDictBase) -> list[TensorDictBase]:
    """``td.unbind(0)``."""
    if type(td) is not TensorDict:
        return list(td.unbind(0))
    parts = [{} for _ in range(td.batch_size[0])]
    for key, value in td_entries(td).items():
        pieces = value.unbind(0) if isinstance(value, torch.Tensor) else unbind(value)
        for part, piece in zip(parts, pieces):
            part[key] = piece
    batch_size, device = td.batch_size[1:], td.device
    return [td_new(part, batch_size, device) for part in parts]


def leaves(td: TensorDictBase, prefix: tuple = ()) -> list | None:
    """``[(nested_key, tensor)]`` for every leaf, or None when a lazy stack is inside."""
    if isinstance(td, LazyStackedTensorDict):
        return None
    out = []
    for key, value in td.items():
        if isinstance(value, TensorDictBase):
            sub = leaves(value, (*prefix, key))
            if sub is None:
                return None
            out += sub
        else:
            out.append(((*prefix, key), value))
    return out


def copy_into(dsts: list[torch.Tensor], srcs: list) -> None:
    """``dst.copy_(src)`` for each pair whose ``src`` is not None, in one fused call."""
    pairs = [(d, s) for d, s in zip(dsts, srcs) if s is not None]
    if pairs:
        foreach_copy_([d for d, _ in pairs], [s for _, s in pairs])

"""Completing done flags and merging partial resets: the data-side helpers of ``EnvBase``."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection
from tensordict.utils import NestedKey, is_non_tensor

from rlcore._done import reduce_to_batch
from rlspecs import Composite
from rlspecs.private_apis import td_entries, td_get_str, td_is_locked

__all__ = ["DoneLevel", "complete_done", "done_levels", "merge_reset"]

TERMINATED_FROM_DONE_AND_TRUNCATED = (
    "Cannot infer 'terminated' at level {level!r}: the data has 'done' and 'truncated' but no "
    "'terminated'; return 'terminated' from _step/_reset"
)


class DoneLevel:
    """The done leaves of one level of the done spec: names, spec shapes and zero factories."""

    __slots__ = ("prefix", "names", "shapes", "specs")

    def __init__(self, prefix: tuple[str, ...], spec: Composite) -> None:
        self.prefix = prefix
        leaves = [(name, item) for name, item in spec.items() if not isinstance(item, Composite)]
        self.names = tuple(name for name, _ in leaves)
        self.shapes = tuple(torch.Size(item.shape) for _, item in leaves)
        self.specs = tuple(item for _, item in leaves)


def done_levels(spec: Composite, prefix: tuple[str, ...] = ()) -> list[DoneLevel]:
    """Lists the levels of a done spec holding leaves, root first."""
    levels = []
    level = DoneLevel(prefix, spec)
    if level.names:
        levels.append(level)
    for name, item in spec.items():
        if isinstance(item, Composite):
            levels.extend(done_levels(item, (*prefix, name)))
    return levels


def _node(data: TensorDictBase, prefix: tuple[str, ...]) -> TensorDictBase | None:
    for name in prefix:
        data = td_get_str(data, name, None)
        if data is None:
            return None
    return data


def complete_done(
    levels: Sequence[DoneLevel], data: TensorDictBase, leading: torch.Size
) -> TensorDictBase:
    """Fills the done leaves missing from ``data`` in place and reshapes those of wrong shape.

    ``done`` is ``terminated | truncated`` when absent, ``terminated`` copies ``done``, any other
    missing leaf is False. ``leading`` are the data dims in front of the spec shapes.
    """
    for level in levels:
        node = _node(data, level.prefix)
        if node is None:
            continue
        present = {}
        for name, shape in zip(level.names, level.shapes):
            value = td_get_str(node, name, None)
            if value is None:
                continue
            expected = leading + shape if leading else shape
            if value.shape != expected and value.numel() == expected.numel():
                value = value.reshape(expected)
                node.set(name, value)
            present[name] = value
        if len(present) == len(level.names):
            continue
        for name, spec in zip(level.names, level.specs):
            if name in present:
                continue
            if name == "done" and ("terminated" in present or "truncated" in present):
                value = present.get("terminated")
                truncated = present.get("truncated")
                if value is None:
                    value = truncated
                elif truncated is not None:
                    value = value | truncated
                value = value.clone()
            elif name == "terminated" and "done" in present:
                if "truncated" in present:
                    raise RuntimeError(
                        TERMINATED_FROM_DONE_AND_TRUNCATED.format(level=level.prefix)
                    )
                value = present["done"].clone()
            else:
                value = spec.zero(leading)
            node.set(name, value)
            present[name] = value
    return data


def _right_expand(mask: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    extra = value.ndim - mask.ndim
    return mask.reshape(*mask.shape, *([1] * extra)) if extra > 0 else mask


def _merge_node(node: TensorDictBase, node_reset: TensorDictBase, mask: torch.Tensor) -> None:
    """Writes ``node_reset`` into ``node`` where ``mask`` (shape: a prefix of node's batch) holds."""
    if isinstance(node, LazyStackedTensorDict) or isinstance(node_reset, LazyStackedTensorDict):
        stack_dim = (node if isinstance(node, LazyStackedTensorDict) else node_reset).stack_dim
        nodes = node.unbind(stack_dim)
        resets = node_reset.unbind(stack_dim)
        masks = mask.unbind(stack_dim) if stack_dim < mask.ndim else [mask] * len(nodes)
        for sub, sub_reset, sub_mask in zip(nodes, resets, masks):
            _merge_node(sub, sub_reset, sub_mask)
        if not isinstance(node, LazyStackedTensorDict):
            node.update(LazyStackedTensorDict.lazy_stack(list(nodes), stack_dim))
        return
    for name in list(node_reset.keys()):
        if name == "_reset":
            continue
        new = td_get_str(node_reset, name, None)
        old = td_get_str(node, name, None)
        if old is None:
            node.set(name, new)
        elif is_tensor_collection(new) and not is_non_tensor(new):
            _merge_node(old, new, mask)
        elif isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor):
            if old.shape != new.shape:
                node.set(name, new)
            else:
                node.set(name, torch.where(_right_expand(mask, new), new, old))
        else:
            node.set(name, new)


def merge_reset(
    tensordict: TensorDictBase, tensordict_reset: TensorDictBase, reset_keys: Sequence[NestedKey]
) -> TensorDictBase:
    """Merges reset data into ``tensordict`` only where its ``"_reset"`` entries are True.

    Reset entries are popped from ``tensordict``. Levels without a reset entry, or whose reset is
    all True, take the reset data as a whole; a level nested in one already merged is skipped.
    """
    roots: list[tuple[str, ...]] = []
    for reset_key in reset_keys:
        path = (reset_key,) if isinstance(reset_key, str) else tuple(reset_key)
        prefix = path[:-1]
        reset = _pop(tensordict, path)
        if any(prefix[: len(root)] == root for root in roots):
            continue
        roots.append(prefix)
        node = _node(tensordict, prefix)
        node_reset = _node(tensordict_reset, prefix)
        if node_reset is None:
            continue
        if node is None:
            tensordict.set(prefix, node_reset)
            continue
        if reset is None or bool(reset.all()):
            if "_reset" in node_reset.keys():
                node_reset = node_reset.exclude("_reset")
            _update(node, node_reset)
        else:
            mask = reset
            if mask.ndim > node.batch_dims:
                mask = reduce_to_batch(mask, node.batch_size)
            _merge_node(node, node_reset, mask)
    if not reset_keys:
        tensordict.update(tensordict_reset)
    return tensordict


def _update(node: TensorDictBase, node_reset: TensorDictBase) -> None:
    """``node.update(node_reset)``; plain tensordicts of the same shape holding only tensors
    take a dict update, skipping ``update``'s per-entry checks that their shapes already pass.
    """
    if (
        type(node) is TensorDict
        and type(node_reset) is TensorDict
        and not td_is_locked(node)
        and node.batch_size == node_reset.batch_size
        and (node.device is None or node.device == node_reset.device)
    ):
        entries = td_entries(node_reset)
        if all(type(value) is torch.Tensor for value in entries.values()):
            td_entries(node).update(entries)
            return
    node.update(node_reset)


def _pop(data: TensorDictBase, path: tuple[str, ...]) -> torch.Tensor | None:
    node = _node(data, path[:-1])
    if node is None:
        return None
    value = td_get_str(node, path[-1], None)
    if value is not None:
        node.del_(path[-1])
    return value

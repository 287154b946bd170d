"""Building specs from data (``make_composite_from_td``) and filling lazy stacks (``consolidate_spec``)."""

from __future__ import annotations

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

from ._base import TensorSpec
from ._composite import Composite
from ._keys import NestedKey
from ._non_tensor import NonTensor
from ._stack import StackedComposite
from ._unbounded import Unbounded


def make_composite_from_td(td: TensorDictBase, *, unsqueeze_null_shapes: bool = True) -> Composite:
    """Describe a tensordict with a ``Composite`` of ``Unbounded`` leaves (same shapes and dtypes).

    Scalar entries (shape ``()``) get shape ``(1,)`` unless ``unsqueeze_null_shapes=False``.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": torch.zeros(2, 3)}, batch_size=[2])
        >>> make_composite_from_td(td)["obs"].shape
        torch.Size([2, 3])
    """
    spec = Composite(shape=td.batch_size, device=td.device)
    for key, value in td.items():
        if isinstance(value, (NonTensorData, NonTensorStack)):
            spec[key] = NonTensor(
                shape=value.batch_size, device=value.device, example_data=value.tolist()
            )
        elif isinstance(value, TensorDictBase):
            spec[key] = make_composite_from_td(value, unsqueeze_null_shapes=unsqueeze_null_shapes)
        else:
            shape = value.shape if value.shape or not unsqueeze_null_shapes else torch.Size((1,))
            spec[key] = Unbounded(shape=shape, device=value.device, dtype=value.dtype)
    return spec


def _placeholder(example: TensorSpec, example_batch: int, batch: torch.Size) -> TensorSpec:
    """A zero-size spec of ``example``'s class and dtype, with ``batch`` as leading dims."""
    if isinstance(example, Composite):
        out = Composite(shape=batch, device=example.device)
        for key, spec in example.items():
            out[key] = None if spec is None else _placeholder(spec, example_batch, batch)
        return out
    shape = torch.Size((*batch, *([0] * (example.ndim - example_batch))))
    attrs = {
        a: torch.zeros(shape, dtype=getattr(example, a).dtype, device=getattr(example, a).device)
        for a in example._tensor_attrs
    }
    attrs.update({a: None for a in example._batch_attrs})  # no mask on a placeholder
    return example._replace(shape=shape, **attrs, **example._resized(shape))


def consolidate_spec(
    spec: Composite, recurse_through_entries: bool = True, recurse_through_stack: bool = True
) -> Composite:
    """Give every member of a lazy stack of composites every key, using zero-size placeholders.

    A key that a member lacks becomes a placeholder of the same class and dtype whose trailing
    dims have size 0. Composites holding lazy stacks are consolidated entry by entry.

    Examples:
        >>> from rlspecs import Composite, Unbounded
        >>> stack = torch.stack([Composite(a=Unbounded(3)), Composite(b=Unbounded(2))], 0)
        >>> consolidate_spec(stack)[1]["a"].shape
        torch.Size([0])
    """
    if isinstance(spec, StackedComposite):
        members = [
            consolidate_spec(m, recurse_through_entries, recurse_through_stack)
            if recurse_through_entries
            else m.clone()
            for m in spec.members
        ]
        examples: dict[NestedKey, tuple[TensorSpec, int]] = {}
        for member in members:
            for key, leaf in member.items(True, True):
                if leaf is not None:
                    examples.setdefault(key, (leaf, member.ndim))
        for member in members:
            for key, (leaf, ndim) in examples.items():
                if member.get(key, None) is None:
                    member[key] = _placeholder(leaf, ndim, member.shape)
        return StackedComposite(*members, dim=spec.dim)
    if not isinstance(spec, Composite):
        return spec.clone()
    out = spec.empty()
    for key, value in spec.items():
        if recurse_through_entries and isinstance(value, Composite):
            value = consolidate_spec(value, recurse_through_entries, recurse_through_stack)
        elif value is not None:
            value = value.clone()
        out[key] = value
    return out

"""Building specs from data (``make_composite_from_td``), filling lazy stacks (``consolidate_spec``)
and checking them (``check_no_exclusive_keys``)."""

from __future__ import annotations

import torch
from tensordict import NonTensorData, NonTensorStack, TensorDictBase

from ._base import TensorSpec
from ._composite import Composite
from ._keys import NestedKey
from ._non_tensor import NonTensor
from ._stacked_composite import StackedComposite
from ._unbounded import Unbounded
from .errors import SpecShapeError

DYNAMIC_BATCH_DIM = (
    "make_composite_from_td(dynamic_shape=True): entry {key!r} of shape {shape} has no feature "
    "dim to make dynamic: its last dim is a batch dim (batch size {batch}), and the spec's "
    "leading dims must match the Composite's shape"
)
NO_DYNAMIC_DIMS = (
    "make_composite_from_td(dynamic_shape=True): entry {key!r} would get the dynamic shape "
    "{shape}, but rlspecs' leaf specs have no dynamic (-1) dims (only lazy stacks report -1 "
    "where their members differ); use dynamic_shape=False"
)


def make_composite_from_td(
    data: TensorDictBase, *, unsqueeze_null_shapes: bool = True, dynamic_shape: bool = False
) -> Composite:
    """Describe a tensordict with a ``Composite`` of ``Unbounded`` leaves (same shapes and dtypes).

    Current torchrl's signature. Scalar entries (shape ``()``) get shape ``(1,)`` unless
    ``unsqueeze_null_shapes=False``. Non-tensor entries become ``NonTensor`` specs whose
    example is the first element's data. With ``dynamic_shape=True`` the last dim of every
    entry that has dims would be dynamic (``-1``), as in torchrl: an entry whose last dim is a
    batch dim raises ``SpecShapeError`` (a ``ValueError``, as torchrl raises), any other raises
    ``NotImplementedError``, since rlspecs' leaf specs have no dynamic dims; entries without
    dims (scalars, unsqueezed or not) and non-tensors are described as without it.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"obs": torch.zeros(2, 3)}, batch_size=[2])
        >>> make_composite_from_td(td)["obs"].shape
        torch.Size([2, 3])
        >>> scalars = TensorDict({"reward": torch.tensor(1.0)}, batch_size=[])
        >>> make_composite_from_td(scalars, dynamic_shape=True)["reward"].shape
        torch.Size([1])
    """
    return _describe(data, unsqueeze_null_shapes, dynamic_shape, ())


def _describe(
    data: TensorDictBase, unsqueeze: bool, dynamic: bool, prefix: tuple[str, ...]
) -> Composite:
    spec = Composite(shape=data.batch_size, device=data.device)
    for key, value in data.items():
        if isinstance(value, (NonTensorData, NonTensorStack)):
            spec[key] = NonTensor(
                shape=value.batch_size, device=value.device, example_data=_first_data(value)
            )
        elif isinstance(value, TensorDictBase):
            spec[key] = _describe(value, unsqueeze, dynamic, (*prefix, key))
        else:
            shape = value.shape
            if not shape:
                shape = torch.Size((1,)) if unsqueeze else shape
            elif dynamic:
                _refuse_dynamic((*prefix, key), shape, data.batch_size)
            spec[key] = Unbounded(shape=shape, device=value.device, dtype=value.dtype)
    return spec


def _first_data(value: NonTensorData | NonTensorStack) -> object:
    """The data of a non-tensor's first element (torchrl assumes all elements alike); None if empty."""
    if isinstance(value, NonTensorData):
        return value.data
    if value.batch_size.numel() == 0:
        return None
    return value[(0,) * value.batch_dims].data


def _refuse_dynamic(key: tuple[str, ...], shape: torch.Size, batch: torch.Size) -> None:
    """Raise for an entry ``dynamic_shape`` would give a ``-1`` last dim (see above)."""
    name = key[0] if len(key) == 1 else key
    dynamic = torch.Size((*shape[:-1], -1))
    if len(shape) <= len(batch):
        raise SpecShapeError(DYNAMIC_BATCH_DIM.format(key=name, shape=shape, batch=batch))
    raise NotImplementedError(NO_DYNAMIC_DIMS.format(key=name, shape=dynamic))


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


def check_no_exclusive_keys(spec: TensorSpec, recurse: bool = True) -> bool:
    """Whether no lazy stack of composites in ``spec`` has a key that only some members have.

    torchrl's ``torchrl.data.utils.check_no_exclusive_keys``: a ``StackedComposite`` passes when
    every member has exactly the stack's shared (top-level) keys; with ``recurse`` (the default)
    the members and the entries of composites are checked too. Any other spec passes.

    Examples:
        >>> from rlspecs import Composite, Unbounded
        >>> same = torch.stack([Composite(a=Unbounded(3)), Composite(a=Unbounded(2))], 0)
        >>> check_no_exclusive_keys(same)
        True
        >>> other = torch.stack([Composite(a=Unbounded(3)), Composite(b=Unbounded(3))], 0)
        >>> check_no_exclusive_keys(Composite(nested=other, shape=(2,)))
        False
    """
    if isinstance(spec, StackedComposite):
        keys = set(spec.keys())
        for member in spec.members:
            if recurse and not check_no_exclusive_keys(member):
                return False
            if set(member.keys()) != keys:
                return False
        return True
    if isinstance(spec, Composite) and recurse:
        return all(check_no_exclusive_keys(value) for value in spec.values() if value is not None)
    return True

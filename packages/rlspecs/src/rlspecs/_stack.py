"""Stacking specs: dense when members agree, lazy (``Stacked``/``StackedComposite``) otherwise."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from ._base import (
    CHECK_SPEC_ENCODE,
    UNBIND_DIM,
    UNSQUEEZE_DIM,
    DeviceLike,
    ShapeLike,
    TensorSpec,
    _shape_args,
    parse_device,
    parse_shape,
)
from ._composite import BAD_KEY_TYPE, LOCKED, Composite
from ._errors import SpecKeyTypeError, SpecStackError
from ._indexing import normalize_index
from ._keys import NestedKey, is_nested_key, unravel_key

_NESTED_WARNING = ".*nested tensors is in prototype stage.*"
EMPTY_STACK = "cannot stack an empty sequence of specs"
STACK_NDIM = "Ndims differ, got shapes {shapes}: only specs of the same ndim stack"
STACK_DIM = "stack dim {dim} is out of range for specs of {ndim} dims"
STACK_TYPES = "Stacking specs cannot occur: Found more than one type of specs in the list ({types})"
STACK_DTYPES = "Dtypes differ, got {dtypes}: only specs of one dtype stack"
STACK_DEVICES = "Devices differ, got {devices}: move the specs to one device first"
STACK_SHAPES = "Shapes differ, got {shapes}: only composites of the same shape stack"
NO_MEMBER_KEY = "Key {key!r} must be present in at least one of the stacked specs"
HETERO_SAMPLE = (
    "cannot sample a lazy stack of leaves with shapes {shapes} along dim {dim}: heterogeneous "
    "leaf samples are only available along dim 0 (as a nested tensor)"
)
EXPAND_LAZY = (
    "cannot expand a lazy stack of shape {shape} to {new}: the stack dim cannot change size"
)


def stack_specs(specs: Sequence[TensorSpec], dim: int = 0) -> TensorSpec:
    """Stack specs along a new ``dim``: a dense spec when all are equal, a lazy stack otherwise.

    ``torch.stack(specs, dim)`` calls this function.

    Examples:
        >>> from rlspecs import Unbounded
        >>> stack_specs([Unbounded(3), Unbounded(3)], 0).shape
        torch.Size([2, 3])
        >>> type(stack_specs([Unbounded(3), Unbounded(2)], 0)).__name__
        'Stacked'
    """
    specs = list(specs)
    if not specs:
        raise ValueError(EMPTY_STACK)
    first = specs[0]
    _check_stackable(specs)
    ndim = first.ndim
    d = dim + ndim + 1 if dim < 0 else dim
    if not 0 <= d <= ndim:
        raise IndexError(STACK_DIM.format(dim=dim, ndim=ndim))
    composites = [isinstance(s, Composite) for s in specs]
    if all(s == first for s in specs[1:]):
        dense = first.unsqueeze(d)
        return dense.expand(*dense.shape[:d], len(specs), *dense.shape[d + 1 :])
    if all(composites):
        return StackedComposite(*specs, dim=d)
    return Stacked(*specs, dim=d)


def _check_stackable(specs: list[TensorSpec]) -> None:
    """Raise ``SpecStackError`` unless ``specs`` share a kind, ndim, dtype and device."""
    first = specs[0]
    if isinstance(first, Composite):
        if not all(isinstance(s, Composite) for s in specs):
            raise SpecStackError(
                STACK_TYPES.format(types=sorted({type(s).__name__ for s in specs}))
            )
        if any(s.shape != first.shape for s in specs):
            raise SpecStackError(STACK_SHAPES.format(shapes=[tuple(s.shape) for s in specs]))
        devices = {s.device for s in specs} - {None}
        if len(devices) > 1:
            raise SpecStackError(STACK_DEVICES.format(devices=sorted(map(str, devices))))
        return
    if any(type(s) is not type(first) for s in specs):
        raise SpecStackError(STACK_TYPES.format(types=sorted({type(s).__name__ for s in specs})))
    if any(s.ndim != first.ndim for s in specs):
        raise SpecStackError(STACK_NDIM.format(shapes=[tuple(s.shape) for s in specs]))
    if any(s.dtype != first.dtype for s in specs):
        raise SpecStackError(STACK_DTYPES.format(dtypes=sorted({str(s.dtype) for s in specs})))
    if any(s.device != first.device for s in specs):
        raise SpecStackError(STACK_DEVICES.format(devices=sorted({str(s.device) for s in specs})))


@TensorSpec.implements_for_spec(torch.stack)
def _torch_stack(specs: Sequence[TensorSpec], dim: int = 0, *, out: Any = None) -> TensorSpec:
    if out is not None:
        raise NotImplementedError("torch.stack(specs, dim, out=...) is not supported for specs")
    return stack_specs(specs, dim)


STACK_SPACE = (
    "{cls}.space is read-only: a lazy stack has no box of its own; set the space of each "
    "stacked spec (spec[i].space) instead."
)


class Stacked(TensorSpec):
    """A lazy stack of specs along ``dim``, for members whose shapes (or domains) differ.

    Dims where members differ have size ``-1`` in ``shape``. Indexing the stack dim returns the
    member; ``rand``/``zero`` stack the members' samples (a nested tensor when shapes differ).

    Examples:
        >>> from rlspecs import Unbounded
        >>> spec = Stacked(Unbounded(3), Unbounded(2), dim=0)
        >>> spec.shape
        torch.Size([2, -1])
        >>> spec[1].shape
        torch.Size([2])
    """

    def __init__(self, *specs: TensorSpec, dim: int = 0) -> None:
        if len(specs) == 1 and isinstance(specs[0], (list, tuple)):
            specs = tuple(specs[0])
        if not specs:
            raise ValueError(EMPTY_STACK)
        _check_stackable(list(specs))
        ndim = specs[0].ndim
        dim = dim + ndim + 1 if dim < 0 else dim
        if not 0 <= dim <= ndim:
            raise IndexError(STACK_DIM.format(dim=dim, ndim=ndim))
        self._members = list(specs)
        self.dim = dim
        sizes = [
            sizes[0] if all(s == sizes[0] for s in sizes) else -1
            for sizes in zip(*(s.shape for s in specs))
        ]
        sizes.insert(dim, len(specs))
        self._init_attrs(torch.Size(sizes), specs[0].device, specs[0].dtype)

    def _init_attrs(self, shape: torch.Size, device: torch.device | None, dtype) -> None:
        self.shape, self.device, self.dtype = shape, device, dtype

    @property
    def members(self) -> list[TensorSpec]:
        """The stacked specs, in order."""
        return self._members

    @property
    def stack_dim(self) -> int:
        """The dim along which the members are stacked (same as ``dim``)."""
        return self.dim

    @property
    def space(self) -> None:
        """A lazy stack has no box of its own (its members do); read-only, as in torchrl 0.4."""
        return None

    @space.setter
    def space(self, value: Any) -> None:
        raise AttributeError(STACK_SPACE.format(cls=type(self).__name__))

    def __len__(self) -> int:
        """``shape[0]``, as for a tensor."""
        return self.shape[0]

    def clear_device_(self) -> Stacked:
        """Clear the device of every member (a no-op for leaves); returns ``self``."""
        for member in self._members:
            member.clear_device_()
        return self

    def update_mask(self, mask: torch.Tensor | None) -> None:
        """Give each member its slice of ``mask`` along the stack dim (``None`` clears them)."""
        parts = [None] * len(self._members) if mask is None else mask.unbind(self.dim)
        for member, part in zip(self._members, parts):
            member.update_mask(part)

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """The members, when ``dim`` is the stack dim (otherwise index each position)."""
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self.ndim or self.shape[d] < 0:
            raise ValueError(
                UNBIND_DIM.format(
                    cls=type(self).__name__,
                    shape=self.shape,
                    dim=dim,
                    ndim=self.ndim,
                    nbatch=self.ndim,
                )
                + " and dims where the members differ cannot be unbound"
            )
        if d == self.dim:
            return tuple(self._members)
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))

    def _new(self, members: list[TensorSpec], dim: int | None = None) -> Stacked:
        return type(self)(*members, dim=self.dim if dim is None else dim)

    # ------------------------------------------------------------------ samples and checks
    def _sample(self, method: str, shape: ShapeLike | None) -> Any:
        shape = parse_shape(shape)
        parts = [getattr(m, method)(shape) for m in self._members]
        d = len(shape) + self.dim
        if all(p.shape == parts[0].shape for p in parts):
            return torch.stack(parts, d)
        if d != 0:
            raise ValueError(
                HETERO_SAMPLE.format(shapes=[tuple(m.shape) for m in self._members], dim=d)
            )
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_NESTED_WARNING)
            return torch.nested.as_nested_tensor(parts)

    def rand(self, shape: ShapeLike | None = None) -> Any:
        """Stack a random sample of every member."""
        return self._sample("rand", shape)

    def zero(self, shape: ShapeLike | None = None) -> Any:
        """Stack the zeros of every member."""
        return self._sample("zero", shape)

    def one(self, shape: ShapeLike | None = None) -> Any:
        """Stack the ones of every member."""
        return self._sample("one", shape)

    def _parts(self, val: Any) -> list[Any] | None:
        if isinstance(val, torch.Tensor) and val.is_nested:
            parts = list(val.unbind())
        elif isinstance(val, (torch.Tensor, TensorDictBase)):
            d = val.ndim - self.ndim + self.dim
            if d < 0:
                return None
            parts = list(val.unbind(d))
        else:
            return None
        return parts if len(parts) == len(self._members) else None

    def is_in(self, val: Any) -> bool:
        """Whether each slice of ``val`` along the stack dim is in the matching member."""
        parts = self._parts(val)
        return parts is not None and all(m.is_in(p) for m, p in zip(self._members, parts))

    def assert_is_in(self, val: Any) -> None:
        """Raise an ``AssertionError`` naming the first member whose slice of ``val`` is not in it."""
        parts = self._parts(val)
        if parts is None:
            return super().assert_is_in(val)
        for i, (member, part) in enumerate(zip(self._members, parts)):
            try:
                member.assert_is_in(part)
            except AssertionError as err:
                raise AssertionError(f"member {i} of {type(self).__name__}: {err}") from None

    def to_numpy(self, val: Any, safe: bool | None = None) -> Any:
        """The NumPy array of ``val`` (each member's slice checked first when ``safe``)."""
        if CHECK_SPEC_ENCODE if safe is None else safe:
            self.assert_is_in(val)
        if isinstance(val, torch.Tensor) and val.is_nested:
            return [part.detach().cpu().numpy() for part in val.unbind()]
        return val.detach().cpu().numpy()

    def type_check(self, value: Any, key: Any = None) -> None:
        """Check each slice of ``value`` along the stack dim against its member's dtype."""
        parts = self._parts(value)
        if parts is None:
            return super().type_check(value, key)
        for member, part in zip(self._members, parts):
            member.type_check(part, key)

    def encode(self, val: Any, *, ignore_device: bool = False) -> Any:
        """Encode each slice of ``val`` along the stack dim (or each item of a list) by its member."""
        if isinstance(val, (list, tuple)) and len(val) == len(self._members):
            items = list(val)
        else:
            t = torch.as_tensor(val)
            d = t.ndim - self.ndim + self.dim
            items = list(t.unbind(d)) if d >= 0 else []
        if len(items) != len(self._members):
            raise ValueError(
                f"cannot encode a value of shape {getattr(val, 'shape', len(val))} into a "
                f"{type(self).__name__} of {len(self._members)} members along dim {self.dim}"
            )
        parts = [m.encode(v, ignore_device=ignore_device) for m, v in zip(self._members, items)]
        if all(p.shape == parts[0].shape for p in parts):
            return torch.stack(parts, parts[0].ndim - self.ndim + 1 + self.dim)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=_NESTED_WARNING)
            return torch.nested.as_nested_tensor(parts)

    def project(self, val: Any) -> Any:
        """Project each slice along the stack dim with its member, then restack."""
        parts = self._parts(val)
        if parts is None:
            return val
        projected = [m.project(p) for m, p in zip(self._members, parts)]
        if isinstance(val, TensorDictBase):
            return LazyStackedTensorDict(*projected, stack_dim=val.ndim - self.ndim + self.dim)
        if val.is_nested:
            return torch.nested.as_nested_tensor(projected)
        return torch.stack(projected, val.ndim - self.ndim + self.dim)

    # ------------------------------------------------------------------ copies and shapes
    def clone(self) -> Stacked:
        """A deep copy."""
        return self._new([m.clone() for m in self._members])

    def to(self, dest: DeviceLike | torch.dtype) -> Stacked:
        """Move (or cast) every member."""
        if not isinstance(dest, torch.dtype) and parse_device(dest) == self.device:
            return self
        return self._new([m.to(dest) for m in self._members])

    def expand(self, *shape: int) -> Stacked:
        """Add leading dims or grow size-1 dims of every member; ``-1`` keeps a dim as it is."""
        new = _shape_args(shape)
        lead = len(new) - self.ndim
        pos = lead + self.dim
        if lead < 0 or new[pos] not in (-1, len(self._members)):
            raise ValueError(EXPAND_LAZY.format(shape=self.shape, new=new))
        member_shape = (*new[:pos], *new[pos + 1 :])
        return self._new([m.expand(*member_shape) for m in self._members], pos)

    def unsqueeze(self, dim: int) -> Stacked:
        """Insert a dim of size 1 at ``dim``."""
        d = dim + self.ndim + 1 if dim < 0 else dim
        if not 0 <= d <= self.ndim:
            raise ValueError(
                UNSQUEEZE_DIM.format(cls=type(self).__name__, shape=self.shape, dim=dim)
            )
        if d <= self.dim:
            return self._new([m.unsqueeze(d) for m in self._members], self.dim + 1)
        return self._new([m.unsqueeze(d - 1) for m in self._members])

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        """Remove dims of size 1 (the stack dim of a one-member stack gives the member)."""
        if dim is None:
            out: TensorSpec = self
            for d in reversed(range(self.ndim)):
                if self.shape[d] == 1:
                    out = out.squeeze(d)
            return out
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self.ndim:
            raise IndexError(
                f"cannot squeeze dim {dim} of a {type(self).__name__} of shape "
                f"{tuple(self.shape)}: expected a dim in [-{self.ndim}, {self.ndim})"
            )
        if self.shape[d] != 1:
            return self
        if d == self.dim:
            return self._members[0]
        if d < self.dim:
            return self._new([m.squeeze(d) for m in self._members], self.dim - 1)
        return self._new([m.squeeze(d - 1) for m in self._members])

    def __getitem__(self, idx: Any) -> TensorSpec:
        """Index the dims; indexing the stack dim with an int returns that member."""
        return self._index(idx)

    def _index(self, idx: Any) -> TensorSpec:
        idx = normalize_index(idx, self.shape)
        idx = idx + (slice(None),) * (self.ndim - len(idx))
        before, stack_idx, after = idx[: self.dim], idx[self.dim], idx[self.dim + 1 :]
        member_idx = before + after
        while member_idx and member_idx[-1] == slice(None):
            member_idx = member_idx[:-1]
        members = [m[member_idx] for m in self._members] if member_idx else list(self._members)
        new_dim = self.dim - sum(isinstance(i, (int, np.integer)) for i in before)
        if isinstance(stack_idx, (int, np.integer)):
            return members[stack_idx]
        if isinstance(stack_idx, slice):
            return stack_specs(members[stack_idx], new_dim)
        t = torch.as_tensor(stack_idx)
        if t.dtype == torch.bool:
            t = t.nonzero().squeeze(-1)
        if t.ndim == 0:
            return members[int(t)]
        return stack_specs([members[i] for i in t.tolist()], new_dim)

    # ------------------------------------------------------------------ comparison and display
    def __eq__(self, other: object) -> bool:
        return (
            type(other) is type(self)
            and self.dim == other.dim
            and self.device == other.device
            and len(self._members) == len(other._members)
            and all(a == b for a, b in zip(self._members, other._members))
        )

    __hash__ = None

    def __repr__(self) -> str:
        body = "".join("\n    " + repr(m).replace("\n", "\n    ") + "," for m in self._members)
        return f"{type(self).__name__}({body}\n    dim={self.dim}, shape={tuple(self.shape)})"


class StackedComposite(Stacked, Composite):
    """A lazy stack of composites along ``dim``: keys are those every member has.

    ``rand``/``zero`` return a ``LazyStackedTensorDict``; looking up a key stacks the members'
    entries (densely when they agree); indexing the stack dim returns the member.

    Examples:
        >>> from rlspecs import Composite, Unbounded
        >>> spec = StackedComposite(Composite(a=Unbounded(3)), Composite(a=Unbounded(2)), dim=0)
        >>> type(spec.rand()).__name__
        'LazyStackedTensorDict'
        >>> spec["a"].shape
        torch.Size([2, -1])
    """

    __getitem__ = Composite.__getitem__
    rand = Composite.rand
    zero = Composite.zero
    one = Composite.one

    def __init__(self, *specs: Composite, dim: int = 0) -> None:
        self._locked = False
        super().__init__(*specs, dim=dim)

    def _init_attrs(self, shape: torch.Size, device: torch.device | None, dtype) -> None:
        self._shape, self._device, self.dtype = shape, device, None

    @property
    def shape(self) -> torch.Size:
        """The stacked batch shape (members' shape with the stack dim inserted)."""
        return self._shape

    @shape.setter
    def shape(self, value: ShapeLike) -> None:
        self._shape = parse_shape(value)

    batch_size = shape

    @property
    def device(self) -> torch.device | None:
        """The members' device."""
        return self._device

    @device.setter
    def device(self, value: DeviceLike) -> None:
        self._members = [m.to(value) for m in self._members]
        self._device = parse_device(value)

    # ------------------------------------------------------------------ mapping access
    def _get_entry(self, key: str) -> TensorSpec | None:
        entries = [m._get_entry(key) for m in self._members]
        if any(e is None for e in entries):
            if all(e is None for e in entries):
                return None  # a key every member leaves incomplete
            raise ValueError(f"key {key!r} is None in some members of the stack and not in others")
        return stack_specs(entries, self.dim)

    def _iter_keys(
        self, include_nested: bool, leaves_only: bool, prefix: tuple[str, ...]
    ) -> Iterator[NestedKey]:
        first, rest = self._members[0], self._members[1:]
        for key in first._iter_keys(include_nested, leaves_only, ()):
            path = unravel_key(key)
            if all(m._lookup(path, None) is not None for m in rest):
                yield (*prefix, *path) if prefix or len(path) > 1 else key

    __len__ = Stacked.__len__

    def __iter__(self) -> Iterator[NestedKey]:
        return iter(self.keys())

    def clear_device_(self) -> StackedComposite:
        """Forget the device of the stack and of every member; returns ``self``."""
        self._device = None
        for member in self._members:
            member.clear_device_()
        return self

    def set(self, key: NestedKey, spec: TensorSpec) -> StackedComposite:
        """Set ``key`` in every member (a stack along the same dim gives one member each)."""
        if not is_nested_key(key):
            raise SpecKeyTypeError(BAD_KEY_TYPE.format(type=type(key).__name__, key=key))
        if self._locked:
            raise RuntimeError(LOCKED.format(key=key))
        if (
            isinstance(spec, Stacked)
            and spec.dim == self.dim
            and len(spec.members) == len(self._members)
        ):
            parts = spec.members
        else:
            parts = [spec[(slice(None),) * self.dim + (i,)] for i in range(len(self._members))]
        for member, part in zip(self._members, parts):
            member.set(key, part)
        return self

    def __delitem__(self, key: NestedKey) -> None:
        """Delete ``key`` from every member that has it (``KeyError`` when none has it)."""
        if not is_nested_key(key):
            raise SpecKeyTypeError(BAD_KEY_TYPE.format(type=type(key).__name__, key=key))
        if self._locked:
            raise RuntimeError(LOCKED.format(key=key))
        holders = [m for m in self._members if key in m.keys(True)]
        if not holders:
            raise KeyError(NO_MEMBER_KEY.format(key=key))
        for member in holders:
            del member[key]

    def lock_(self, recurse: bool = True) -> StackedComposite:
        """Refuse mutation until ``unlock_``; members are locked too."""
        self._locked = True
        for member in self._members:
            member.lock_(recurse)
        return self

    def unlock_(self, recurse: bool = True) -> StackedComposite:
        """Allow mutation again."""
        self._locked = False
        for member in self._members:
            member.unlock_(recurse)
        return self

    def is_empty(self, recurse: bool = False) -> bool:
        """Whether every member is empty."""
        return all(m.is_empty(recurse) for m in self._members)

    def empty(self) -> StackedComposite:
        """A stack of empty members."""
        return self._new([m.empty() for m in self._members])

    def select(self, *keys: NestedKey, strict: bool = True) -> StackedComposite:
        """Select ``keys`` in every member."""
        return self._new([m.select(*keys, strict=strict) for m in self._members])

    def exclude(self, *keys: NestedKey) -> StackedComposite:
        """Exclude ``keys`` from every member."""
        return self._new([m.exclude(*keys) for m in self._members])

    # ------------------------------------------------------------------ samples and checks
    def _build(self, method: str, shape: ShapeLike | None) -> LazyStackedTensorDict:
        shape = parse_shape(shape)
        tds = [m._build(method, shape) for m in self._members]
        return LazyStackedTensorDict(*tds, stack_dim=len(shape) + self.dim)

    def encode(self, val: Any, *, ignore_device: bool = False) -> LazyStackedTensorDict:
        """Encode a sequence of mappings, one per member, into a lazy stack."""
        tds = [m.encode(v, ignore_device=ignore_device) for m, v in zip(self._members, val)]
        return LazyStackedTensorDict(*tds, stack_dim=self.dim)

    def is_in(self, val: Any) -> bool:
        """Whether each slice of ``val`` along the stack dim is in the matching member."""
        return Stacked.is_in(self, val)

    def to_numpy(self, val: TensorDictBase, safe: bool | None = None) -> dict[str, Any]:
        """A dict of NumPy arrays, one per shared key (members checked first when ``safe``)."""
        if CHECK_SPEC_ENCODE if safe is None else safe:
            self.assert_is_in(val)
        return {key: self[key].to_numpy(val.get(key), False) for key in self.keys()}

    def type_check(self, value: Any, selected_keys: Any = None) -> None:
        """Check the dtypes of every member's slice of ``value`` (or of ``selected_keys``)."""
        if isinstance(value, torch.Tensor):
            if selected_keys is None:
                raise ValueError("value must be a tensordict when selected_keys is None")
            return self[selected_keys].type_check(value, selected_keys)
        for member, part in zip(self._members, value.unbind(value.ndim - self.ndim + self.dim)):
            member.type_check(part, selected_keys)

"""Stacking specs: dense when members agree, lazy (``Stacked``/``StackedComposite``) otherwise."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from ._base import (
    SQUEEZE_DIM,
    UNSQUEEZE_DIM,
    DeviceLike,
    ShapeLike,
    TensorSpec,
    _shape_args,
    normalize_index,
    parse_device,
    parse_shape,
)
from ._composite import LOCKED, Composite
from ._keys import NestedKey, unravel_key

_NESTED_WARNING = ".*nested tensors is in prototype stage.*"
EMPTY_STACK = "cannot stack an empty sequence of specs"
STACK_NDIM = "cannot stack specs of different ndims: got shapes {shapes}"
STACK_DIM = "stack dim {dim} is out of range for specs of {ndim} dims"
STACK_TYPES = "cannot stack a Composite with a non-Composite spec: got {types}"
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
    ndim = first.ndim
    if any(s.ndim != ndim for s in specs):
        raise ValueError(STACK_NDIM.format(shapes=[tuple(s.shape) for s in specs]))
    d = dim + ndim + 1 if dim < 0 else dim
    if not 0 <= d <= ndim:
        raise IndexError(STACK_DIM.format(dim=dim, ndim=ndim))
    composites = [isinstance(s, Composite) for s in specs]
    if any(composites) and not all(composites):
        raise TypeError(STACK_TYPES.format(types=sorted({type(s).__name__ for s in specs})))
    if all(s == first for s in specs[1:]):
        dense = first.unsqueeze(d)
        return dense.expand(*dense.shape[:d], len(specs), *dense.shape[d + 1 :])
    if all(composites):
        return StackedComposite(*specs, dim=d)
    return Stacked(*specs, dim=d)


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
        ndim = specs[0].ndim
        if any(s.ndim != ndim for s in specs):
            raise ValueError(STACK_NDIM.format(shapes=[tuple(s.shape) for s in specs]))
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

    def __len__(self) -> int:
        return len(self._members)

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """The members, when ``dim`` is the stack dim (otherwise index each position)."""
        d = dim + self.ndim if dim < 0 else dim
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
        if self.shape[d] != 1:
            raise ValueError(
                SQUEEZE_DIM.format(
                    dim=dim, cls=type(self).__name__, shape=self.shape, size=self.shape[d]
                )
            )
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
    def _get_entry(self, key: str) -> TensorSpec:
        return stack_specs([m._get_entry(key) for m in self._members], self.dim)

    def _iter_keys(
        self, include_nested: bool, leaves_only: bool, prefix: tuple[str, ...]
    ) -> Iterator[NestedKey]:
        first, rest = self._members[0], self._members[1:]
        for key in first._iter_keys(include_nested, leaves_only, ()):
            path = unravel_key(key)
            if all(m._lookup(path, None) is not None for m in rest):
                yield (*prefix, *path) if prefix or len(path) > 1 else key

    def __len__(self) -> int:
        return len(self.keys())

    def __iter__(self) -> Iterator[NestedKey]:
        return iter(self.keys())

    def set(self, key: NestedKey, spec: TensorSpec) -> StackedComposite:
        """Set ``key`` in every member (a stack along the same dim gives one member each)."""
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
        if self._locked:
            raise RuntimeError(LOCKED.format(key=key))
        for member in self._members:
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

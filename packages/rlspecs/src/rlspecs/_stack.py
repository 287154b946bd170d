"""``Stacked``: lazy stacks of leaf specs whose shapes (or domains) differ, and stacking checks."""

from __future__ import annotations

import warnings
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
from ._composite import Composite
from ._indexing import NESTED_LIST_INDEX, is_nested_list, normalize_index
from ._memo import MemoizedEntries
from ._repr import stacked_repr
from .errors import SpecStackError

_NESTED_WARNING = ".*nested tensors is in prototype stage.*"
EMPTY_STACK = "cannot stack an empty sequence of specs"
STACK_NDIM = "Ndims differ, got shapes {shapes}: only specs of the same ndim stack"
STACK_DIM = "stack dim {dim} is out of range for specs of {ndim} dims"
STACK_TYPES = "Stacking specs cannot occur: Found more than one type of specs in the list ({types})"
STACK_DTYPES = "Dtypes differ, got {dtypes}: only specs of one dtype stack"
STACK_DEVICES = "Devices differ, got {devices}: move the specs to one device first"
STACK_SHAPES = "Shapes differ, got {shapes}: only composites of the same shape stack"
HETERO_SAMPLE = (
    "cannot sample a lazy stack of leaves with shapes {shapes} along dim {dim}: heterogeneous "
    "leaf samples are only available along dim 0 (as a nested tensor)"
)
NO_CARDINALITY = "`cardinality` is not implemented for {cls} specs."
EXPAND_LAZY = (
    "cannot expand a lazy stack of shape {shape} to {new}: the stack dim cannot change size"
)


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


def _restack(specs: list[TensorSpec], dim: int) -> TensorSpec:
    """``torch.stack(specs, dim)`` (``stack_specs``, registered by ``_stacked_composite``)."""
    if not specs:
        raise ValueError(EMPTY_STACK)
    return torch.stack(specs, dim)


STACK_SPACE = (
    "{cls}.space is read-only: a lazy stack has no box of its own; set the space of each "
    "stacked spec (spec[i].space) instead."
)


class Stacked(MemoizedEntries, TensorSpec):
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
            if isinstance(val, TensorDictBase) and (
                val.ndim < self.ndim
                or any(s not in (-1, v) for s, v in zip(self.shape, val.batch_size[d - self.dim :]))
            ):
                return None  # a tensordict's trailing batch dims must be the stack's
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
        return super().encode(val, ignore_device=ignore_device)

    def _memo_children(self) -> list[TensorSpec]:
        return list(self._members)

    def cardinality(self) -> Any:
        """Not defined for a lazy stack (``NotImplementedError``, as in current torchrl)."""
        raise NotImplementedError(NO_CARDINALITY.format(cls=type(self).__name__))

    def enumerate(self, use_mask: bool = False) -> Any:
        """Each member's values, stacked along the stack dim + 1 (the values' first dim leads)."""
        return torch.stack([m.enumerate(use_mask) for m in self._members], self.dim + 1)

    def _encode_eager(self, val: Any, *, ignore_device: bool = False) -> Any:
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
        if is_nested_list(idx):  # torchrl's lazy stacks cannot take one either
            raise NotImplementedError(NESTED_LIST_INDEX.format(idx=idx))
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
            return _restack(members[stack_idx], new_dim)
        t = torch.as_tensor(stack_idx)
        if t.dtype == torch.bool:
            t = t.nonzero().squeeze(-1)
        if t.ndim == 0:
            return members[int(t)]
        return _restack([members[i] for i in t.tolist()], new_dim)

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
        """torchrl's layout: ``LazyStacked<member class>(shape=..., device=..., ...)``."""
        return stacked_repr(self)

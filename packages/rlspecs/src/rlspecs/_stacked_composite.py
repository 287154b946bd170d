"""``StackedComposite``: lazy stacks of composites, and ``stack_specs`` (``torch.stack`` on specs)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from ._base import CHECK_SPEC_ENCODE, DeviceLike, ShapeLike, TensorSpec, parse_device, parse_shape
from ._composite import LOCKED, Composite
from ._keys import NestedKey, is_nested_key, unravel_key
from ._repr import stacked_composite_repr
from ._stack import EMPTY_STACK, STACK_DIM, Stacked, _check_stackable
from .errors import SpecKeyTypeError

NO_MEMBER_KEY = "Key {key} must be present in at least one of the stacked specs"
STACK_BAD_KEY = (
    "key should be a Sequence<NestedKey>: the keys of a lazy stack of composites are str or "
    "tuples of str, got {type} ({key!r}); index a member with spec[i] and set its keys instead"
)
MISSING_VALUE_KEY = (
    "key {key!r} of member {i} of the {cls} is missing from that member's slice of the value"
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


@TensorSpec.implements_for_spec(torch.stack)
def _torch_stack(specs: Sequence[TensorSpec], dim: int = 0, *, out: Any = None) -> TensorSpec:
    if out is not None:
        raise NotImplementedError("torch.stack(specs, dim, out=...) is not supported for specs")
    return stack_specs(specs, dim)


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
        """Set ``key`` in every member (a stack along the same dim gives one member each).

        A key that is not a str or a tuple of str (an integer index) raises
        ``SpecKeyTypeError``, a ``RuntimeError`` as in torchrl.
        """
        if not is_nested_key(key):
            raise SpecKeyTypeError(STACK_BAD_KEY.format(type=type(key).__name__, key=key))
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
            raise SpecKeyTypeError(STACK_BAD_KEY.format(type=type(key).__name__, key=key))
        if self._locked:
            raise RuntimeError(LOCKED.format(key=key))
        holders = [m for m in self._members if key in m.keys(True)]
        if not holders:
            raise KeyError(NO_MEMBER_KEY.format(key=key))
        for member in holders:
            del member[key]

    def update(self, other: Any) -> StackedComposite:
        """Set every entry of ``other``, as torchrl 0.4 does; returns ``self``.

        A key the stack shares whose new value is a composite (or a dict) updates each member's
        entry with that member's slice of it (the whole value when it has a member's shape); any
        other key is set in every member (``set``).
        """
        if self._locked:
            raise RuntimeError(LOCKED.format(key=list(other.keys())))
        for key, item in other.items():
            if key in self.keys() and isinstance(item, (Mapping, Composite)):
                stacked = isinstance(item, Composite) and item.ndim == self.ndim
                parts = item.unbind(self.dim) if stacked else [item] * len(self._members)
                for member, part in zip(self._members, parts):
                    member[key].update(part)
                continue
            self[key] = item
        return self

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
        return super().encode(val, ignore_device=ignore_device)

    def _encode_eager(self, val: Any, *, ignore_device: bool = False) -> LazyStackedTensorDict:
        tds = [m.encode(v, ignore_device=ignore_device) for m, v in zip(self._members, val)]
        return LazyStackedTensorDict(*tds, stack_dim=self.dim)

    def _checked_parts(self, val: Any) -> list[Any] | None:
        """``val``'s slices along the stack dim; a key a member needs but its slice lacks raises."""
        parts = self._parts(val)
        for i, (member, part) in enumerate(zip(self._members, parts or ())):
            if not isinstance(part, TensorDictBase):
                continue
            present = set(part.keys(True))
            for key, spec in member.items(True, True):
                if spec is not None and key not in present:
                    raise KeyError(MISSING_VALUE_KEY.format(key=key, i=i, cls=type(self).__name__))
        return parts

    def is_in(self, val: Any) -> bool:
        """Whether each slice of ``val`` along the stack dim is in the matching member.

        A key some member describes but its slice of ``val`` lacks raises ``KeyError`` (as in
        torchrl 0.4), naming the key and the member.
        """
        parts = self._checked_parts(val)
        return parts is not None and all(m.is_in(p) for m, p in zip(self._members, parts))

    def project(self, val: Any) -> Any:
        """Project each member's slice of ``val`` (``KeyError`` for a missing key, as ``is_in``)."""
        self._checked_parts(val)
        return Stacked.project(self, val)

    def cardinality(self) -> Any:
        """Not defined for a lazy stack (``NotImplementedError``, as in current torchrl)."""
        return Stacked.cardinality(self)

    def enumerate(self, use_mask: bool = False) -> Any:
        """Each member's values (``TensorDict``s), stacked lazily along the stack dim + 1."""
        values = [m.enumerate(use_mask) for m in self._members]
        return LazyStackedTensorDict.maybe_dense_stack(values, self.dim + 1)

    def __repr__(self) -> str:
        """torchrl's layout: the shared ``fields``, each member's ``exclusive_fields``, ..."""
        return stacked_composite_repr(self)

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

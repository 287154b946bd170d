"""``Composite``: a nested mapping from keys to specs, sharing leading batch dims."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

from ._base import (
    CHECK_SPEC_ENCODE,
    UNBIND_DIM,
    UNSQUEEZE_DIM,
    DeviceLike,
    ShapeLike,
    TensorSpec,
    _shape_args,
    expand_shape,
    parse_device,
    parse_shape,
)
from ._composite_keys import _MISSING, _CompositeKeys
from ._enumerate import composite_values, product
from ._indexing import indexed_shape, normalize_index
from ._keys import NestedKey, is_nested_key, unravel_key
from ._memo import MEMO_KEY, MemoizedEntries
from ._observers import Observable, adopt, notify
from ._repr import composite_repr
from .errors import SpecKeyTypeError
from .private_apis import td_new

# "CompositeSpec." also matches torchrl's own text, "Cannot modify a locked CompositeSpec."
LOCKED = "Cannot modify a locked CompositeSpec. Call unlock_() first (key {key!r})"
LOCKED_SHAPE = "Cannot modify shape of locked composite spec: call unlock_() first"
NOT_A_SPEC = (
    "Composite entries must be TensorSpec instances (or None, or a dict of them), "
    "got {type} for key {key!r}"
)
RESERVED_KEY = "CompositeSpec[{key!r}] cannot be set: {key!r} is an attribute, not a key"
RESERVED_GET = "CompositeSpec has no key {key!r}: it is an attribute (spec.{key})"
BAD_KEY_TYPE = "Composite keys are str or tuples of str, got {type} ({key!r})"
DTYPE_CAST = (
    "Only device casting is allowed with specs of type CompositeSpec: got {dest}; "
    "cast the leaves one by one instead"
)
ENCODE_MISSING = "CompositeSpec.encode cannot be used with missing values: key {key!r} is {why}"
_RESERVED = frozenset({"shape", "device", "dtype", "space"})
UNKNOWN_KEY = "key {key!r} not found in Composite; available keys: {keys}"
LEAF_SHAPE = (
    "the leading dims of the spec for key {key!r} (shape {spec_shape}) must match the "
    "Composite's shape {shape}"
)
SHAPE_TWICE = "Composite got both shape= and batch_size=; pass only one"
TOO_MANY_ARGS = "Composite takes at most one positional argument (a mapping), got {n}"
NOT_A_COMPOSITE = "key {key!r} leads through a {cls}, not a Composite"

_NO_DEFAULT = object()


def _to(spec: TensorSpec | None, device: torch.device | None) -> TensorSpec | None:
    return None if spec is None else spec.to(device)


class Composite(Observable, MemoizedEntries, TensorSpec):
    """A nested mapping of specs, all sharing the leading batch dims ``shape``.

    Keys are strings; nested keys are tuples of strings (``spec["a", "b"]``); setting a nested
    key creates the intermediate composites, and a dict value (in the constructor too) becomes a
    nested composite. ``rand``/``zero``/``one`` return a ``TensorDict`` of batch
    ``(*shape, *self.shape)``.

    An entry may be ``None`` (torchrl's "incomplete" composites): such a key is listed, compared
    and copied, but ``rand``/``zero``/``one`` leave it out, ``is_in`` and ``project`` skip it and
    ``encode`` refuses it. The keys ``"shape"``, ``"device"``, ``"dtype"`` and ``"space"`` are
    reserved (``AttributeError``).

    ``observe_(callback)`` registers a callback told of every later change of the tree's
    structure (entries set or deleted at any depth) and of any ``shape``/``dtype``/``device``
    assignment inside it; envs use it to forget what they derived from their specs.

    Examples:
        >>> from rlspecs import Unbounded
        >>> spec = Composite(obs=Unbounded(3), shape=())
        >>> spec["next", "obs"] = Unbounded(3)
        >>> sorted(spec.keys(True, True), key=str)
        [('next', 'obs'), 'obs']
        >>> spec.rand().batch_size
        torch.Size([])
    """

    def __init__(
        self,
        *args: Mapping[NestedKey, TensorSpec],
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        batch_size: ShapeLike | None = None,
        **kwargs: TensorSpec,
    ) -> None:
        if shape is not None and batch_size is not None:
            raise TypeError(SHAPE_TWICE)
        if len(args) > 1:
            raise TypeError(TOO_MANY_ARGS.format(n=len(args)))
        self._specs: dict[str, TensorSpec] = {}
        self._locked = False
        self.dtype = None
        self._shape = parse_shape(shape if batch_size is None else batch_size)
        self._device = parse_device(device)
        if args:
            source = args[0]
            items = source.items() if isinstance(source, (Mapping, Composite)) else source
            for key, value in items:
                self[key] = value
        for key, value in kwargs.items():
            self[key] = value

    def _default_domain(self) -> str:
        return "composite"

    # ------------------------------------------------------------------ shape and device
    @property
    def shape(self) -> torch.Size:
        """The batch dims shared by every entry (assignable; entries must agree)."""
        return self._shape

    @shape.setter
    def shape(self, value: ShapeLike) -> None:
        """Set the batch dims: nested composites follow when theirs disagree; leaves must agree."""
        if self._locked:
            raise RuntimeError(LOCKED_SHAPE)
        value = parse_shape(value)
        for key, spec in self._specs.items():
            if isinstance(spec, Composite):
                if spec.shape[: len(value)] != value:
                    spec.shape = value
            elif spec is not None:
                self._check_shape(key, spec, value)
        self._shape = value

    batch_size = shape

    @property
    def device(self) -> torch.device | None:
        """The device of every entry, or ``None`` when entries may live anywhere."""
        return self._device

    @device.setter
    def device(self, value: DeviceLike) -> None:
        value = parse_device(value)
        if value is not None:
            self._specs = {k: _to(v, value) for k, v in self._specs.items()}
        self._device = value

    def clear_device_(self) -> Composite:
        """Forget the device of this composite and of every nested one (leaves keep theirs)."""
        self._device = None
        for spec in self._specs.values():
            if spec is not None:
                spec.clear_device_()
        notify(self)
        return self

    @property
    def ndim(self) -> int:
        """Number of batch dims."""
        return len(self._shape)

    def ndimension(self) -> int:
        """Number of batch dims (same as ``ndim``)."""
        return len(self._shape)

    @staticmethod
    def _check_shape(key: NestedKey, spec: TensorSpec, shape: torch.Size) -> None:
        if spec.shape[: len(shape)] != shape:
            raise ValueError(LEAF_SHAPE.format(key=key, spec_shape=spec.shape, shape=shape))

    # ------------------------------------------------------------------ locking
    def lock_(self, recurse: bool = True) -> Composite:
        """Refuse every later mutation (set, del, update) until ``unlock_``; returns ``self``."""
        self._locked = True
        if recurse:
            for spec in self._specs.values():
                if isinstance(spec, Composite):
                    spec.lock_(recurse=True)
        return self

    def unlock_(self, recurse: bool = True) -> Composite:
        """Allow mutation again; returns ``self``."""
        self._locked = False
        if recurse:
            for spec in self._specs.values():
                if isinstance(spec, Composite):
                    spec.unlock_(recurse=True)
        return self

    @property
    def is_locked(self) -> bool:
        """Whether the composite refuses mutation; assigning it locks or unlocks (recursively)."""
        return self._locked

    @is_locked.setter
    def is_locked(self, value: bool) -> None:
        if value:
            self.lock_()
        else:
            self.unlock_()

    @property
    def locked(self) -> bool:
        """Same as ``is_locked`` (read-only)."""
        return self._locked

    # ------------------------------------------------------------------ mapping access
    def _lookup(self, path: tuple[str, ...], default: Any) -> Any:
        spec: Any = self
        for part in path:
            if not isinstance(spec, Composite):
                return default
            try:
                spec = spec._get_entry(part)
            except KeyError:
                return default
        return spec

    def _get_entry(self, key: str) -> TensorSpec:
        return self._specs[key]

    def __getitem__(self, idx: Any) -> TensorSpec:
        """Look up a (nested) key, or index the batch dims when ``idx`` is not a key."""
        if isinstance(idx, str):
            try:
                return self._get_entry(idx)
            except KeyError:
                if idx in _RESERVED:
                    raise AttributeError(RESERVED_GET.format(key=idx)) from None
                raise KeyError(UNKNOWN_KEY.format(key=idx, keys=list(self.keys()))) from None
        if not is_nested_key(idx):
            return self._index(idx)
        spec: TensorSpec = self
        for i, part in enumerate(unravel_key(idx)):
            if not isinstance(spec, Composite):
                cls = type(spec).__name__
                raise KeyError(NOT_A_COMPOSITE.format(key=idx[: i + 1], cls=cls))
            try:
                spec = spec._get_entry(part)
            except KeyError:
                raise KeyError(UNKNOWN_KEY.format(key=idx, keys=list(spec.keys()))) from None
        return spec

    def get(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        """Return the spec at ``key``, or ``default`` when it is missing (KeyError without one)."""
        if default is _NO_DEFAULT:
            return self[key]
        return self._lookup(unravel_key(key), default)

    def __setitem__(self, key: NestedKey, spec: TensorSpec | Mapping | None) -> None:
        """Set a (nested) key; intermediate composites are created with this shape and device."""
        self.set(key, spec)

    def set(self, key: NestedKey, spec: TensorSpec | Mapping | None) -> Composite:
        """Set ``key`` to ``spec`` (checking type and leading dims); returns ``self``.

        A nested key is set in the composite that holds its last part, so only that
        composite's lock matters (and this one's when an intermediate must be created).
        """
        if not is_nested_key(key):
            raise SpecKeyTypeError(BAD_KEY_TYPE.format(type=type(key).__name__, key=key))
        path = unravel_key(key)
        if len(path) > 1:
            sub = self._specs.get(path[0])
            if sub is None:
                if self._locked:
                    raise RuntimeError(LOCKED.format(key=key))
                sub = Composite(shape=self._shape, device=self._device)
                self._set_entry(path[0], sub)
            elif not isinstance(sub, Composite):
                raise KeyError(NOT_A_COMPOSITE.format(key=path[:1], cls=type(sub).__name__))
            sub.set(path[1:], spec)
            return self
        if self._locked:
            raise RuntimeError(LOCKED.format(key=key))
        self._set_entry(path[0], spec)
        return self

    def _set_entry(self, key: str, spec: TensorSpec | Mapping | None) -> None:
        if key in _RESERVED:
            raise AttributeError(RESERVED_KEY.format(key=key))
        if isinstance(spec, Mapping):
            spec = Composite(spec, shape=self._shape, device=self._device)
        if spec is not None:
            if not isinstance(spec, TensorSpec):
                raise TypeError(NOT_A_SPEC.format(type=type(spec).__name__, key=key))
            self._check_shape(key, spec, self._shape)
            if self._device is not None and spec.device != self._device:
                spec = spec.to(self._device)
        self._specs[key] = spec
        if "_on_change" in self.__dict__:
            if spec is not None:
                adopt(self, spec)
            notify(self)

    def __delitem__(self, key: NestedKey) -> None:
        """Delete a (nested) key; only the lock of the composite holding its last part matters."""
        if not is_nested_key(key):
            raise SpecKeyTypeError(BAD_KEY_TYPE.format(type=type(key).__name__, key=key))
        if key in _RESERVED:
            raise AttributeError(RESERVED_GET.format(key=key))
        path = unravel_key(key)
        parent = self[path[:-1]] if len(path) > 1 else self
        if not isinstance(parent, Composite) or path[-1] not in parent._specs:
            raise KeyError(UNKNOWN_KEY.format(key=key, keys=list(self.keys(True))))
        if parent._locked:
            raise RuntimeError(LOCKED.format(key=key))
        del parent._specs[path[-1]]
        notify(parent)

    def pop(self, key: NestedKey, default: Any = _NO_DEFAULT) -> Any:
        """Remove ``key`` and return its spec (or ``default`` when missing)."""
        if default is not _NO_DEFAULT and key not in self.keys(True):
            return default
        spec = self[key]
        del self[key]
        return spec

    def update(self, other: Mapping[NestedKey, TensorSpec] | Composite) -> Composite:
        """Set every entry of ``other``; nested composites are updated recursively. Returns ``self``."""
        if self._locked:
            raise RuntimeError(LOCKED.format(key=list(other.keys())))
        for key, spec in other.items():
            current = self.get(key, None)
            if isinstance(current, Composite) and (
                type(spec) is Composite or isinstance(spec, Mapping)
            ):
                current.update(spec)
            else:
                self[key] = spec
        return self

    def __contains__(self, key: object) -> bool:
        return key in self.keys(include_nested=True)

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def _iter_keys(
        self, include_nested: bool, leaves_only: bool, prefix: tuple[str, ...]
    ) -> Iterator[NestedKey]:
        for key, spec in self._specs.items():
            is_composite = isinstance(spec, Composite)
            if not (leaves_only and is_composite):
                yield (*prefix, key) if prefix else key
            if include_nested and is_composite:
                yield from spec._iter_keys(True, leaves_only, (*prefix, key))

    def keys(self, include_nested: bool = False, leaves_only: bool = False) -> _CompositeKeys:
        """The keys, optionally nested ones (as tuples) and optionally leaves only."""
        return _CompositeKeys(self, include_nested, leaves_only)

    def items(
        self, include_nested: bool = False, leaves_only: bool = False
    ) -> Iterator[tuple[NestedKey, TensorSpec]]:
        """``(key, spec)`` pairs, with the same options as ``keys``."""
        for key in self.keys(include_nested, leaves_only):
            yield key, self[key]

    def values(
        self, include_nested: bool = False, leaves_only: bool = False
    ) -> Iterator[TensorSpec]:
        """Specs, with the same options as ``keys``."""
        for key in self.keys(include_nested, leaves_only):
            yield self[key]

    def empty(self) -> Composite:
        """A composite with this shape and device and no entries."""
        return Composite(shape=self._shape, device=self._device)

    def is_empty(self, recurse: bool = False) -> bool:
        """Whether there is no entry (with ``recurse``: no leaf anywhere)."""
        if not recurse:
            return not self._specs
        return not any(True for _ in self.keys(True, True))

    def select(self, *keys: NestedKey, strict: bool = True) -> Composite:
        """A composite holding only ``keys`` (missing keys raise unless ``strict=False``)."""
        out = self.empty()
        for key in keys:
            spec = self[key] if strict else self.get(key, _MISSING)
            if spec is not _MISSING:
                out[key] = spec
        return out

    def exclude(self, *keys: NestedKey) -> Composite:
        """A shallow copy without ``keys``."""
        out = self._copy_with(dict(self._specs))
        for key in keys:
            if key in out.keys(True):
                del out[key]
        return out

    # ------------------------------------------------------------------ samples
    def _build(self, method: str, shape: ShapeLike | None) -> TensorDict:
        shape = parse_shape(shape)
        source = {
            key: getattr(spec, method)(shape)
            for key, spec in self._specs.items()
            if spec is not None
        }
        batch = torch.Size((*shape, *self._shape)) if shape else self._shape
        return td_new(source, batch, self._device)

    def rand(self, shape: ShapeLike | None = None) -> TensorDict:
        """A ``TensorDict`` of random samples, batch ``(*shape, *self.shape)``."""
        return self._build("rand", shape)

    def zero(self, shape: ShapeLike | None = None) -> TensorDict:
        """A ``TensorDict`` of zeros, batch ``(*shape, *self.shape)``."""
        return self._build("zero", shape)

    def one(self, shape: ShapeLike | None = None) -> TensorDict:
        """A ``TensorDict`` of ones, batch ``(*shape, *self.shape)``."""
        return self._build("one", shape)

    def is_in(self, val: Any) -> bool:
        """Whether every entry of the spec is present in ``val`` and in its spec."""
        if not isinstance(val, (TensorDictBase, Mapping)):
            return False
        for key, spec in self._specs.items():
            if spec is None:
                continue
            item = val.get(key, None)
            if item is None:
                if isinstance(spec, Composite) and spec.is_empty(recurse=True):
                    continue
                return False
            if not spec.is_in(item):
                return False
        return True

    def project(self, val: TensorDictBase) -> TensorDictBase:
        """Project every entry of ``val`` that the spec describes (in place in ``val``)."""
        for key, spec in self._specs.items():
            if spec is None:
                continue
            item = val.get(key, None)
            if item is not None:
                projected = spec.project(item)
                if projected is not item:
                    val.set(key, projected)
        return val

    def encode(self, val: Mapping[str, Any], *, ignore_device: bool = False) -> TensorDict:
        """Encode every entry of a mapping into a ``TensorDict`` of this shape.

        A ``None`` value, or a key whose spec is ``None``, raises ``RuntimeError``.
        """
        return super().encode(val, ignore_device=ignore_device)

    def _memo_children(self) -> list[TensorSpec]:
        return [spec for spec in self._specs.values() if spec is not None]

    def cardinality(self) -> int:
        """The product of the entries' cardinalities (``0`` without entries), as in torchrl."""
        return product([s.cardinality() for s in self._specs.values() if s is not None])

    def enumerate(self, use_mask: bool = False) -> TensorDict:
        """Every combination of the entries' values, a ``TensorDict`` of batch ``(k, *shape)``.

        ``None`` entries are left out; an entry that cannot be enumerated raises as it does.

        Examples:
            >>> from rlspecs import Binary, Categorical
            >>> values = Composite(a=Categorical(2), b=Binary(1)).enumerate()
            >>> values.batch_size, values["a"].tolist(), values["b"].tolist()
            (torch.Size([4]), [0, 0, 1, 1], [[0], [1], [0], [1]])
        """
        return composite_values(self, use_mask)

    def _encode_eager(self, val: Mapping[str, Any], *, ignore_device: bool = False) -> TensorDict:
        source = {}
        for key, item in val.items():
            spec = self[key]
            if item is None or spec is None:
                why = "None in the values" if item is None else "None in the spec"
                raise RuntimeError(ENCODE_MISSING.format(key=key, why=why))
            source[key] = spec.encode(item, ignore_device=ignore_device)
        device = None if ignore_device else self._device
        return TensorDict(source, batch_size=self._shape, device=device)

    def type_check(self, value: Any, selected_keys: NestedKey | Any = None) -> None:
        """Check the dtype of every entry of ``value`` (or of ``selected_keys`` only).

        ``value`` may be a tensor when ``selected_keys`` is one key. Raises ``TypeError`` naming
        the key whose dtype differs.
        """
        if isinstance(value, torch.Tensor) and is_nested_key(selected_keys):
            value, selected_keys = {selected_keys: value}, [selected_keys]
        elif is_nested_key(selected_keys):
            selected_keys = [selected_keys]
        for key, spec in self._specs.items():
            if spec is None or (selected_keys is not None and key not in selected_keys):
                continue
            spec.type_check(value[key], key)

    def to_numpy(self, val: TensorDictBase, safe: bool | None = None) -> dict[str, Any]:
        """A dict of NumPy arrays (nested dicts for nested composites), one per entry of ``val``.

        With ``safe`` (default: ``CHECK_SPEC_ENCODE``) each entry is checked against its spec.
        """
        if safe is None:
            safe = CHECK_SPEC_ENCODE
        return {key: self[key].to_numpy(item, safe) for key, item in val.items()}

    # ------------------------------------------------------------------ copies and shapes
    def _copy_with(
        self, specs: dict[str, TensorSpec], shape: torch.Size | None = None
    ) -> Composite:
        out = Composite.__new__(type(self))
        out.__dict__.update(self.__dict__)
        out.__dict__.pop("_on_change", None)  # copies are not observed
        out.__dict__.pop(MEMO_KEY, None)  # and encode eagerly
        out._specs = specs
        out._locked = False
        if shape is not None:
            out._shape = shape
        return out

    def _map(self, fn: Any, shape: torch.Size | None = None) -> Composite:
        """A copy (unlocked) with ``fn`` applied to every entry (``None`` entries stay)."""
        specs = {k: None if v is None else fn(v) for k, v in self._specs.items()}
        return self._copy_with(specs, shape)

    def clone(self) -> Composite:
        """A deep copy (unlocked)."""
        return self._map(lambda v: v.clone())

    def to(self, dest: DeviceLike) -> Composite:
        """Move every entry (and the composite) to a device; ``self`` if already there.

        ``to(None)`` forgets the composite's device and leaves its entries where they are. A
        dtype raises ``ValueError`` (only device casting is allowed, as in torchrl).
        """
        if isinstance(dest, torch.dtype):
            raise ValueError(DTYPE_CAST.format(dest=dest))
        device = parse_device(dest)
        if device == self._device:
            return self
        # None: forget the composite's device; entries keep theirs
        out = self._map(lambda v: _to(v, device))
        out._device = device
        return out

    def expand(self, *shape: int) -> Composite:
        """Add leading batch dims (or grow size-1 dims) in the composite and every entry."""
        new = expand_shape(self._shape, _shape_args(shape), type(self).__name__)
        ndim = self.ndim
        return self._map(lambda v: v.expand(torch.Size((*new, *v.shape[ndim:]))), new)

    def squeeze(self, dim: int | None = None) -> Composite:
        """Remove batch dims of size 1 (all of them, or only ``dim``; a wider dim is kept)."""
        if dim is None:
            out = self
            for d in reversed(range(self.ndim)):
                if self._shape[d] == 1:
                    out = out.squeeze(d)
            return out
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self.ndim:
            raise IndexError(
                f"cannot squeeze dim {dim} of a {type(self).__name__} of shape "
                f"{tuple(self._shape)}: expected a batch dim in [-{self.ndim}, {self.ndim})"
            )
        if self._shape[d] != 1:
            return self
        shape = torch.Size((*self._shape[:d], *self._shape[d + 1 :]))
        return self._map(lambda v: v.squeeze(d), shape)

    def unsqueeze(self, dim: int) -> Composite:
        """Insert a batch dim of size 1 at ``dim`` in the composite and every entry."""
        d = dim + self.ndim + 1 if dim < 0 else dim
        if not 0 <= d <= self.ndim:
            raise ValueError(
                UNSQUEEZE_DIM.format(cls=type(self).__name__, shape=self._shape, dim=dim)
            )
        shape = torch.Size((*self._shape[:d], 1, *self._shape[d:]))
        return self._map(lambda v: v.unsqueeze(d), shape)

    def reshape(self, *shape: int) -> Composite:
        """Reshape the batch dims of the composite and every entry (``view`` is the same)."""
        new = torch.empty(self._shape, device="meta").reshape(_shape_args(shape)).shape
        ndim = self.ndim
        return self._map(lambda v: v.reshape(*new, *v.shape[ndim:]), new)

    view = reshape

    def unbind(self, dim: int = 0) -> tuple[Composite, ...]:
        """Split the composite along batch dim ``dim``."""
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < self.ndim:
            raise ValueError(
                UNBIND_DIM.format(
                    cls=type(self).__name__,
                    shape=self._shape,
                    dim=dim,
                    ndim=self.ndim,
                    nbatch=self.ndim,
                )
            )
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self._shape[d]))

    def _index(self, idx: Any) -> Composite:
        idx = normalize_index(idx, self._shape)
        return self._map(lambda v: v[idx], indexed_shape(self._shape, idx))

    # ------------------------------------------------------------------ comparison and display
    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        return (
            self._shape == other._shape
            and self._device == other._device
            and self._specs.keys() == other._specs.keys()
            and all(spec == other._specs[k] for k, spec in self._specs.items())
        )

    __hash__ = None

    def __repr__(self) -> str:
        """torchrl 0.4's layout (current torchrl's under ``set_spec_api("current")``)."""
        return composite_repr(self)

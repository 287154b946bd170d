"""The abstract base of every spec, plus shape, device and index parsing shared by all specs."""

from __future__ import annotations

import copy
import os
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from ._indexing import (
    NESTED_LIST_INDEX,
    _index_tensor,
    indexed_shape,
    is_nested_list,
    normalize_index,
)
from ._memo import MEMO_KEY, MemoizedEncode, plain_encode
from ._observers import TRACKED_ATTRIBUTES, attribute_changed
from .errors import SpecShapeError

DEVICE_TYPING = torch.device | str | int
DeviceLike = DEVICE_TYPING | None
ShapeLike = int | Sequence[int] | torch.Size

BAD_DEVICE = "cannot parse device {device!r}: expected None, an int, a str such as 'cpu' or 'cuda:0', or a torch.device"
BAD_SHAPE = "cannot parse shape {shape!r}: expected an int or a sequence of ints"
ENCODE_SHAPE = (
    "Shape mismatch: cannot encode a value of shape {got} into a {cls} of shape {expected} "
    "(a non-tensor value must hold exactly the spec's elements)"
)
EXPAND_SHAPE = (
    "cannot expand a {cls} of shape {shape} to {new}: each trailing dim must match or be 1"
)
UNSQUEEZE_DIM = (
    "cannot unsqueeze a {cls} of shape {shape} at dim {dim}: it would split the domain dims"
)
SQUEEZE_DOMAIN = (
    "cannot squeeze dim {dim} of a {cls} of shape {shape}: it is a domain dim "
    "(the final dimension must remain unchanged)"
)
UNBIND_DIM = (
    "cannot unbind a {cls} of shape {shape} along dim {dim}: expected a batch dim in "
    "[-{ndim}, {nbatch}) (domain dims cannot be unbound)"
)
RESHAPE_DOMAIN = (
    "cannot reshape a {cls} of shape {shape} to {new}: the trailing domain dims {domain} must stay"
)
NO_RAND = "{cls} does not implement rand"
NO_INDEX = (
    "{cls}.index is not defined: only one-hot and categorical specs index tensors with their values"
)
NO_CARDINALITY = "`cardinality` is not implemented for {cls} specs."
NO_ENUMERATE = "enumerate is not implemented for spec of class {cls}."
NOT_IN_SPEC = "value of shape {shape} and dtype {dtype} is not in {spec!r}"
TYPE_CHECK = "value.dtype={got} but {cls}.dtype={expected}{where}"

# ``CHECK_SPEC_ENCODE=1`` in the environment makes ``to_numpy`` (and friends) check membership
# by default, as in torchrl; read once, at import.
CHECK_SPEC_ENCODE = os.environ.get("CHECK_SPEC_ENCODE", "").lower() in {"1", "true", "yes", "on"}


def parse_device(device: DeviceLike) -> torch.device | None:
    """Turn a device description into a ``torch.device`` (``None`` stays ``None``).

    Examples:
        >>> parse_device("cpu")
        device(type='cpu')
        >>> parse_device(None) is None
        True

    ``"cuda"`` without an index becomes the current CUDA device when CUDA is available.
    """
    if device is None:
        return None
    if not isinstance(device, torch.device):
        try:
            if isinstance(device, int) and not isinstance(device, bool):
                device = torch.device("cuda", device)
            elif isinstance(device, str):
                device = torch.device(device)
            else:
                raise ValueError(BAD_DEVICE.format(device=device))
        except RuntimeError as err:
            raise ValueError(BAD_DEVICE.format(device=device)) from err
    if device.type == "cuda" and device.index is None and torch.cuda.is_available():
        # "cuda" means the current device: name it, so that specs on "cuda" and "cuda:0" agree
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def parse_shape(shape: ShapeLike | None) -> torch.Size:
    """Turn a shape description into a ``torch.Size``; a bare int means a 1-d shape.

    Examples:
        >>> parse_shape(3)
        torch.Size([3])
        >>> parse_shape((2, 1))
        torch.Size([2, 1])
    """
    if shape is None:
        return torch.Size(())
    if isinstance(shape, torch.Size):
        return shape
    if isinstance(shape, (int, np.integer)) and not isinstance(shape, bool):
        return torch.Size((int(shape),))
    try:
        return torch.Size([int(s) for s in shape])
    except (TypeError, ValueError) as err:
        raise ValueError(BAD_SHAPE.format(shape=shape)) from err


def _shape_args(shape: tuple) -> torch.Size:
    """Read ``*shape`` varargs, which may also be a single sequence."""
    if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
        return parse_shape(shape[0])
    return parse_shape(shape)


def expand_shape(old: torch.Size, new: torch.Size, cls: str) -> torch.Size:
    """Resolve ``expand``'s target shape: leading dims are added, size-1 dims may grow."""
    lead = len(new) - len(old)
    if lead < 0 or any(n < 0 for n in new[:lead]):
        raise ValueError(EXPAND_SHAPE.format(cls=cls, shape=old, new=new))
    tail = []
    for n, o in zip(new[lead:], old):
        if n == -1:
            n = o
        elif n != o and o != 1:
            raise ValueError(EXPAND_SHAPE.format(cls=cls, shape=old, new=new))
        tail.append(n)
    return torch.Size((*new[:lead], *tail))


def _is_floating(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


# torch functions that specs implement (``torch.stack(specs, dim)`` and the like)
SPEC_HANDLED_FUNCTIONS: dict[Callable, Callable] = {}


# every spec class by name, so that specs converting into one another (a ``Categorical``'s
# one-hot spec, a ``OneHot``'s labels) refer to each other without importing each other
_SPEC_CLASSES: dict[str, type] = {}


def spec_class(name: str) -> type:
    """The spec class named ``name`` (``"OneHot"``, ``"Categorical"``, ...).

    Examples:
        >>> import rlspecs
        >>> spec_class("OneHot") is rlspecs.OneHot
        True
    """
    return _SPEC_CLASSES[name]


class TensorSpec(MemoizedEncode):
    """Abstract description of a tensor: its ``shape``, ``dtype``, ``device`` and domain.

    A leaf built with ``device=None`` lives on torch's default device (the CPU unless changed).

    Subclasses implement ``rand`` and ``_in_domain`` (and ``_project`` when values can leave the
    domain). ``shape``, ``dtype`` and ``device`` are plain, assignable attributes; so are
    ``space`` and ``domain`` (as in torchrl, where they are dataclass fields): assigning one
    replaces what the attribute reports, not the spec's bounds or categories. Assigning
    ``shape``, ``dtype`` or ``device`` of a spec inside an observed ``Composite`` (an env's
    specs) calls its observers (``Composite.observe_``).

    Examples:
        >>> from rlspecs import Unbounded
        >>> spec = Unbounded(3)
        >>> spec.rand((2,)).shape
        torch.Size([2, 3])
        >>> spec.ndimension(), spec.to_numpy(torch.zeros(3)).shape
        (1, (3,))
    """

    # tensor attributes that have the spec's full shape (indexed, expanded, moved with the spec)
    _tensor_attrs: tuple[str, ...] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _SPEC_CLASSES.setdefault(cls.__name__, cls)

    # optional tensor attributes (None or a tensor) shaped (*batch dims, *own trailing dims),
    # where the batch dims are the spec's dims before its domain dims (the action mask)
    _batch_attrs: tuple[str, ...] = ()
    # trailing dims that belong to the domain (a one-hot's last dim): never indexed nor squeezed
    _domain_ndim: int = 0
    # whether a nested-list index (spec[[[0, 1], [1, 2]]]) is read as a tensor index, as torchrl
    # 0.4 does for most specs; Bounded and MultiCategorical refuse it there (NotImplementedError)
    _nested_list_index: bool = True

    shape: torch.Size
    dtype: torch.dtype | None
    device: torch.device | None

    def __init__(
        self, shape: ShapeLike | None, device: DeviceLike, dtype: torch.dtype | None
    ) -> None:
        self.shape = parse_shape(shape)
        device = parse_device(device)
        self.device = torch.get_default_device() if device is None else device
        self.dtype = dtype

    def __setattr__(self, name: str, value: Any, _set: Any = object.__setattr__) -> None:
        _set(self, name, value)
        # an observed spec (one inside an env's specs) tells its observers, see _observers
        if name in TRACKED_ATTRIBUTES and "_on_change" in self.__dict__:
            attribute_changed(self)

    def __getstate__(self) -> dict[str, Any]:
        # observers (an env's cache reset) stay with the original: copies and pickles drop them;
        # a memoized encode stays memoized but forgets its plans
        state = self.__dict__
        if "_on_change" in state or state.get(MEMO_KEY):
            state = dict(state)
            state.pop("_on_change", None)
            if state.get(MEMO_KEY):
                state[MEMO_KEY] = {}
        return state

    # ------------------------------------------------------------------ basic attributes
    @property
    def ndim(self) -> int:
        """Number of dims of the spec's shape."""
        return len(self.shape)

    def ndimension(self) -> int:
        """Number of dims of the spec's shape (same as ``ndim``)."""
        return len(self.shape)

    def numel(self) -> int:
        """Number of elements of a sample (product of the shape)."""
        return self.shape.numel()

    @property
    def space(self) -> Any:
        """The domain's descriptor (a box); assignable, as in torchrl."""
        if "_space" in self.__dict__:  # assigned, None included (torchrl keeps what it is given)
            return self.__dict__["_space"]
        return self._default_space()

    @space.setter
    def space(self, value: Any) -> None:
        self.__dict__["_space"] = value

    def _default_space(self) -> Any:
        return None

    @property
    def domain(self) -> str:
        """``"continuous"``, ``"discrete"`` or ``"composite"``; assignable, as in torchrl."""
        override = self.__dict__.get("_domain")
        return self._default_domain() if override is None else override

    @domain.setter
    def domain(self, value: str) -> None:
        self.__dict__["_domain"] = value

    def _default_domain(self) -> str:
        return "continuous" if self.dtype is not None and _is_floating(self.dtype) else "discrete"

    def clear_device_(self) -> TensorSpec:
        """A no-op on leaves, which always have a device; returns ``self``."""
        return self

    def _full_shape(self, shape: ShapeLike | None) -> torch.Size:
        if not shape:
            return self.shape
        return torch.Size((*parse_shape(shape), *self.shape))

    # ------------------------------------------------------------------ sampling
    def rand(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Sample a random value of shape ``(*shape, *self.shape)`` in the domain."""
        raise NotImplementedError(NO_RAND.format(cls=type(self).__name__))

    def zero(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Return zeros of shape ``(*shape, *self.shape)``."""
        return torch.zeros(self._full_shape(shape), dtype=self.dtype, device=self.device)

    def one(self, shape: ShapeLike | None = None) -> torch.Tensor:
        """Return ones of shape ``(*shape, *self.shape)``."""
        return torch.ones(self._full_shape(shape), dtype=self.dtype, device=self.device)

    # ------------------------------------------------------------------ validation
    def is_in(self, val: Any) -> bool:
        """Whether ``val`` has this spec's dtype and trailing shape and lies in its domain."""
        if not isinstance(val, torch.Tensor) or val.dtype != self.dtype:
            return False
        ndim = len(self.shape)
        if val.ndim < ndim or (ndim and val.shape[val.ndim - ndim :] != self.shape):
            return False
        return self._in_domain(val)

    def _in_domain(self, val: torch.Tensor) -> bool:
        return True

    def assert_is_in(self, val: Any) -> None:
        """Raise an ``AssertionError`` naming the value's shape and dtype if it is not in the spec."""
        if not self.is_in(val):
            raise AssertionError(
                NOT_IN_SPEC.format(
                    shape=getattr(val, "shape", None), dtype=getattr(val, "dtype", None), spec=self
                )
            )

    def type_check(self, value: torch.Tensor, key: Any = None) -> None:
        """Raise a ``TypeError`` naming ``key`` when ``value``'s dtype is not the spec's."""
        if value.dtype is not self.dtype:
            where = "" if key is None else f" (key {key!r})"
            raise TypeError(
                TYPE_CHECK.format(
                    got=value.dtype, cls=type(self).__name__, expected=self.dtype, where=where
                )
            )

    def project(self, val: torch.Tensor) -> torch.Tensor:
        """Map ``val`` into the domain (clamp or round); values already inside are returned as is."""
        if self.is_in(val):
            return val
        return self._project(val)

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return val.to(self.dtype)

    @plain_encode
    def _encode_eager(self, val: Any, *, ignore_device: bool = False) -> Any:
        device = None if ignore_device else self.device
        is_tensor = isinstance(val, torch.Tensor)
        if isinstance(val, np.ndarray) and not val.flags.writeable:
            val = val.copy()
        val = torch.as_tensor(val, dtype=self.dtype, device=device)
        shape = self.shape
        ndim = len(shape)
        if val.shape != shape and not (
            is_tensor and val.ndim > ndim and val.shape[val.ndim - ndim :] == shape
        ):
            if val.numel() != shape.numel():
                raise SpecShapeError(
                    ENCODE_SHAPE.format(got=val.shape, cls=type(self).__name__, expected=shape)
                )
            val = val.reshape(shape)
        return val

    def cardinality(self) -> int | float | torch.Tensor:
        """The number of values a sample can take (current torchrl); see each spec class."""
        raise NotImplementedError(NO_CARDINALITY.format(cls=type(self).__name__))

    def enumerate(self, use_mask: bool = False) -> Any:
        """Every value a sample can take, stacked along a new first dim (discrete specs only)."""
        raise NotImplementedError(NO_ENUMERATE.format(cls=type(self).__name__))

    def to_numpy(self, val: torch.Tensor, safe: bool | None = None) -> np.ndarray:
        """The NumPy array of ``val``; with ``safe`` (default: ``CHECK_SPEC_ENCODE``) check it first.

        Raises ``AssertionError`` when ``safe`` and ``val`` is not in the spec.
        """
        if safe is None:
            safe = CHECK_SPEC_ENCODE
        if safe:
            self.assert_is_in(val)
        return val.detach().cpu().numpy()

    def index(self, index: torch.Tensor, tensor_to_index: torch.Tensor) -> torch.Tensor:
        """Pick entries of ``tensor_to_index`` with values of this spec (one-hot or labels)."""
        raise NotImplementedError(NO_INDEX.format(cls=type(self).__name__))

    # ------------------------------------------------------------------ copies and moves
    def _replace(self, **attrs: Any) -> TensorSpec:
        new = copy.copy(self)
        new.__dict__.pop(MEMO_KEY, None)  # copies encode eagerly, as torchrl's new specs do
        for name, value in attrs.items():
            setattr(new, name, value)
        return new

    def _resized(self, shape: torch.Size) -> dict[str, Any]:
        """Attributes (beyond ``shape``) that change when the spec takes a new shape."""
        return {}

    def _batch_attr_values(self) -> dict[str, torch.Tensor]:
        """The optional batch attributes that are set (not None)."""
        out = {}
        for a in self._batch_attrs:
            value = getattr(self, a)
            if value is not None:
                out[a] = value
        return out

    def clone(self) -> TensorSpec:
        """Return a deep copy: tensors are copied, nothing is shared with ``self``."""
        attrs = {a: getattr(self, a).clone() for a in self._tensor_attrs}
        attrs.update({a: v.clone() for a, v in self._batch_attr_values().items()})
        return self._replace(**attrs)

    def to(self, dest: DeviceLike | torch.dtype) -> TensorSpec:
        """Return the spec on another device (or with another dtype); ``self`` if nothing changes.

        ``to(None)`` leaves the spec where it is.
        """
        if isinstance(dest, torch.dtype):
            if dest == self.dtype:
                return self
            return self._replace(dtype=dest, **self._cast_attrs(dest))
        device = parse_device(dest)
        if device is None or device == self.device:
            return self
        attrs = {a: getattr(self, a).to(device) for a in self._tensor_attrs}
        attrs.update({a: v.to(device) for a, v in self._batch_attr_values().items()})
        return self._replace(device=device, **attrs)

    def _cast_attrs(self, dtype: torch.dtype) -> dict[str, Any]:
        return {}

    def cpu(self) -> TensorSpec:
        """Return the spec on the CPU."""
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> TensorSpec:
        """Return the spec on a CUDA device (the current one by default)."""
        return self.to("cuda" if device is None else f"cuda:{device}")

    # ------------------------------------------------------------------ shape operations
    @property
    def _nbatch(self) -> int:
        return len(self.shape) - self._domain_ndim

    def _reshaped(self, shape: torch.Size) -> TensorSpec:
        """Same elements, new shape (squeeze/unsqueeze/reshape): tensor attributes follow."""
        attrs = {a: getattr(self, a).reshape(shape) for a in self._tensor_attrs}
        nbatch, new_nbatch = self._nbatch, len(shape) - self._domain_ndim
        for a, value in self._batch_attr_values().items():
            attrs[a] = value.reshape(*shape[:new_nbatch], *value.shape[nbatch:])
        return self._replace(shape=shape, **attrs, **self._resized(shape))

    def expand(self, *shape: int) -> TensorSpec:
        """Return the spec with extra leading batch dims (or size-1 dims grown); ``-1`` keeps a dim."""
        new = expand_shape(self.shape, _shape_args(shape), type(self).__name__)
        attrs = {a: getattr(self, a).expand(new).clone() for a in self._tensor_attrs}
        nbatch, new_nbatch = self._nbatch, len(new) - self._domain_ndim
        for a, value in self._batch_attr_values().items():
            attrs[a] = value.expand(*new[:new_nbatch], *value.shape[nbatch:])
        return self._replace(shape=new, **attrs, **self._resized(new))

    def reshape(self, *shape: int) -> TensorSpec:
        """Return the spec with its batch dims reshaped (``-1`` infers a dim); ``view`` is the same.

        The domain dims (a one-hot's last dim) must stay the trailing dims.
        """
        new = torch.empty(self.shape, device="meta").reshape(_shape_args(shape)).shape
        domain = self.shape[self._nbatch :]
        if self._domain_ndim and new[len(new) - self._domain_ndim :] != domain:
            raise ValueError(
                RESHAPE_DOMAIN.format(
                    cls=type(self).__name__, shape=self.shape, new=new, domain=tuple(domain)
                )
            )
        return self._reshaped(new)

    view = reshape

    def flatten(self, start_dim: int, end_dim: int) -> TensorSpec:
        """Merge dims ``start_dim..end_dim`` into one, as ``torch.flatten`` does."""
        return self.reshape(
            torch.empty(self.shape, device="meta").flatten(start_dim, end_dim).shape
        )

    def unflatten(self, dim: int, sizes: Sequence[int]) -> TensorSpec:
        """Split dim ``dim`` into ``sizes``, as ``torch.unflatten`` does."""
        return self.reshape(torch.empty(self.shape, device="meta").unflatten(dim, sizes).shape)

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        """Remove batch dims of size 1 (all of them, or only ``dim``; a wider dim is kept).

        Squeezing a domain dim of size 1 (a one-hot over one category) raises ``ValueError``.
        """
        nbatch = self._nbatch
        if dim is None:
            keep = [i for i, s in enumerate(self.shape) if s != 1 or i >= nbatch]
        else:
            d = dim + len(self.shape) if dim < 0 else dim
            if self.shape[d] != 1:
                return self
            if d >= nbatch:
                raise ValueError(
                    SQUEEZE_DOMAIN.format(dim=dim, cls=type(self).__name__, shape=self.shape)
                )
            keep = [i for i in range(len(self.shape)) if i != d]
        if len(keep) == len(self.shape):
            return self
        return self._reshaped(torch.Size([self.shape[i] for i in keep]))

    def unsqueeze(self, dim: int) -> TensorSpec:
        """Insert a batch dim of size 1 at ``dim``."""
        ndim = len(self.shape)
        d = dim + ndim + 1 if dim < 0 else dim
        if not 0 <= d <= ndim - self._domain_ndim:
            raise ValueError(
                UNSQUEEZE_DIM.format(cls=type(self).__name__, shape=self.shape, dim=dim)
            )
        return self._reshaped(torch.Size((*self.shape[:d], 1, *self.shape[d:])))

    def __getitem__(self, idx: Any) -> TensorSpec:
        """Index the batch dims (int, slice, range, list, array, tensor, None, ellipsis).

        Indexing works as on a sample; the domain dims (a one-hot's last dim) are never indexed.
        A nested list is read as a tensor index (``Bounded`` and ``MultiCategorical`` refuse it
        with ``NotImplementedError``, as in torchrl).
        """
        if not self._nested_list_index and is_nested_list(idx):
            raise NotImplementedError(NESTED_LIST_INDEX.format(idx=idx))
        nbatch = self._nbatch
        idx = normalize_index(idx, self.shape[:nbatch])
        new = torch.Size((*indexed_shape(self.shape[:nbatch], idx), *self.shape[nbatch:]))
        attrs = {a: _index_tensor(getattr(self, a), idx) for a in self._tensor_attrs}
        attrs.update({a: _index_tensor(v, idx) for a, v in self._batch_attr_values().items()})
        return self._replace(shape=new, **attrs, **self._resized(new))

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """Split the spec along batch dim ``dim`` into ``shape[dim]`` specs."""
        nbatch = self._nbatch
        d = dim + self.ndim if dim < 0 else dim
        if not 0 <= d < nbatch:
            raise ValueError(
                UNBIND_DIM.format(
                    cls=type(self).__name__,
                    shape=self.shape,
                    dim=dim,
                    ndim=self.ndim,
                    nbatch=nbatch,
                )
            )
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))

    # ------------------------------------------------------------------ comparison and display
    def _eq_fields(self) -> tuple:
        return ()

    def _eq_other_class(self, other: object) -> bool:
        """Equality with a spec of another class (torchrl 0.4 equates a few pairs)."""
        return False

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return self._eq_other_class(other)
        if (
            self.shape != other.shape
            or self.dtype != other.dtype
            or self.device != other.device
            or self._eq_fields() != other._eq_fields()
        ):
            return False
        for a in self._batch_attrs:
            mine, theirs = getattr(self, a), getattr(other, a)
            if (mine is None) != (theirs is None) or (
                mine is not None
                and (mine.shape != theirs.shape or not torch.equal(mine, theirs.to(mine.device)))
            ):
                return False
        return all(torch.equal(getattr(self, a), getattr(other, a)) for a in self._tensor_attrs)

    __hash__ = None  # equality is by value

    def _repr_lines(self) -> list[str]:
        """The ``name=value`` lines of the repr (torchrl's fields, plus a mask when one is set)."""
        lines = [f"shape={self.shape}", f"space={self.space}"]
        mask = self.__dict__.get("mask")
        if mask is not None:
            lines.append(
                f"mask=Tensor(shape={mask.shape}, device={mask.device}, dtype={mask.dtype})"
            )
        return [*lines, f"device={self.device}", f"dtype={self.dtype}", f"domain={self.domain}"]

    def __repr__(self) -> str:
        """torchrl's layout: the class name, then one indented ``name=value`` line per field."""
        body = ",\n".join(textwrap.indent(line, "    ") for line in self._repr_lines())
        return f"{type(self).__name__}(\n{body})"

    # ------------------------------------------------------------------ torch function dispatch
    @classmethod
    def implements_for_spec(cls, torch_function: Callable) -> Callable:
        """Register the decorated function as the spec version of ``torch_function``.

        ``torch.stack``, ``torch.squeeze`` and ``torch.unsqueeze`` are registered; any other
        torch function called on specs raises ``TypeError``.
        """

        def decorator(func: Callable) -> Callable:
            SPEC_HANDLED_FUNCTIONS[torch_function] = func
            return func

        return decorator

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        handler = SPEC_HANDLED_FUNCTIONS.get(func)
        if handler is None or not all(issubclass(t, TensorSpec) for t in types):
            return NotImplemented
        return handler(*args, **(kwargs or {}))


@TensorSpec.implements_for_spec(torch.squeeze)
def _squeeze(spec: TensorSpec, dim: int | None = None) -> TensorSpec:
    return spec.squeeze(dim)


@TensorSpec.implements_for_spec(torch.unsqueeze)
def _unsqueeze(spec: TensorSpec, dim: int) -> TensorSpec:
    return spec.unsqueeze(dim)

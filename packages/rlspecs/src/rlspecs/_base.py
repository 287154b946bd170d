"""The abstract base of every spec, plus shape and device parsing shared by all specs."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

DeviceLike = torch.device | str | int | None
ShapeLike = int | Sequence[int] | torch.Size

BAD_DEVICE = "cannot parse device {device!r}: expected None, an int, a str such as 'cpu' or 'cuda:0', or a torch.device"
BAD_SHAPE = "cannot parse shape {shape!r}: expected an int or a sequence of ints"
ENCODE_SHAPE = "cannot encode a value of shape {got} into a {cls} of shape {expected}"
EXPAND_SHAPE = (
    "cannot expand a {cls} of shape {shape} to {new}: each trailing dim must match or be 1"
)
UNSQUEEZE_DIM = (
    "cannot unsqueeze a {cls} of shape {shape} at dim {dim}: it would split the domain dims"
)
SQUEEZE_DIM = (
    "cannot squeeze dim {dim} of a {cls} of shape {shape}: that dim has size {size}, not 1"
)
TOO_MANY_INDICES = "too many indices for a spec of shape {shape}: {idx!r}"
NO_RAND = "{cls} does not implement rand"
NOT_IN_SPEC = "value of shape {shape} and dtype {dtype} is not in {spec!r}"


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


def normalize_index(idx: Any, shape: torch.Size) -> tuple:
    """Spell out an index over ``shape`` as a tuple without ``Ellipsis``.

    Specs index their batch dims only, so ``...`` must be resolved against the batch shape
    before the index reaches entries that have more dims.

    Examples:
        >>> normalize_index((Ellipsis, 0), torch.Size([3, 2]))
        (slice(None, None, None), 0)
    """
    if not isinstance(idx, tuple):
        idx = (idx,)
    used = sum(
        i.ndim if isinstance(i, torch.Tensor) and i.dtype == torch.bool else 1
        for i in idx
        if i is not Ellipsis and i is not None
    )
    if used > len(shape):
        raise IndexError(TOO_MANY_INDICES.format(shape=tuple(shape), idx=idx))
    for k, i in enumerate(idx):
        if i is Ellipsis:
            return idx[:k] + (slice(None),) * (len(shape) - used) + idx[k + 1 :]
    return idx


def _is_floating(dtype: torch.dtype) -> bool:
    return dtype.is_floating_point or dtype.is_complex


class TensorSpec:
    """Abstract description of a tensor: its ``shape``, ``dtype``, ``device`` and domain.

    A leaf built with ``device=None`` lives on torch's default device (the CPU unless changed).

    Subclasses implement ``rand`` and ``_in_domain`` (and ``_project`` when values can leave the
    domain). ``shape``, ``dtype`` and ``device`` are plain, assignable attributes.

    Examples:
        >>> from rlspecs import Unbounded
        >>> spec = Unbounded(3)
        >>> spec.rand((2,)).shape
        torch.Size([2, 3])
    """

    # tensor attributes that have the spec's full shape (indexed, expanded, moved with the spec)
    _tensor_attrs: tuple[str, ...] = ()
    # trailing dims that belong to the domain (a one-hot's last dim): never indexed nor squeezed
    _domain_ndim: int = 0

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

    # ------------------------------------------------------------------ basic attributes
    @property
    def ndim(self) -> int:
        """Number of dims of the spec's shape."""
        return len(self.shape)

    def numel(self) -> int:
        """Number of elements of a sample (product of the shape)."""
        return self.shape.numel()

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

    def project(self, val: torch.Tensor) -> torch.Tensor:
        """Map ``val`` into the domain (clamp or round); values already inside are returned as is."""
        if self.is_in(val):
            return val
        return self._project(val)

    def _project(self, val: torch.Tensor) -> torch.Tensor:
        return val.to(self.dtype)

    def encode(self, val: Any, *, ignore_device: bool = False) -> torch.Tensor:
        """Turn a NumPy array, Python scalar or tensor into a tensor of this spec's dtype/device.

        A value whose shape differs from the spec's but holds as many elements is reshaped; any
        other shape mismatch raises a ``ValueError`` naming both shapes.
        """
        device = None if ignore_device else self.device
        if isinstance(val, np.ndarray) and not val.flags.writeable:
            val = val.copy()
        val = torch.as_tensor(val, dtype=self.dtype, device=device)
        shape = self.shape
        ndim = len(shape)
        if val.shape != shape and not (val.ndim > ndim and val.shape[val.ndim - ndim :] == shape):
            if val.numel() != shape.numel():
                raise ValueError(
                    ENCODE_SHAPE.format(got=val.shape, cls=type(self).__name__, expected=shape)
                )
            val = val.reshape(shape)
        return val

    # ------------------------------------------------------------------ copies and moves
    def _replace(self, **attrs: Any) -> TensorSpec:
        new = copy.copy(self)
        for name, value in attrs.items():
            setattr(new, name, value)
        return new

    def _resized(self, shape: torch.Size) -> dict[str, Any]:
        """Attributes (beyond ``shape``) that change when the spec takes a new shape."""
        return {}

    def clone(self) -> TensorSpec:
        """Return a deep copy: tensors are copied, nothing is shared with ``self``."""
        return self._replace(**{a: getattr(self, a).clone() for a in self._tensor_attrs})

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
        return self._replace(
            device=device, **{a: getattr(self, a).to(device) for a in self._tensor_attrs}
        )

    def _cast_attrs(self, dtype: torch.dtype) -> dict[str, Any]:
        return {}

    def cpu(self) -> TensorSpec:
        """Return the spec on the CPU."""
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> TensorSpec:
        """Return the spec on a CUDA device (the current one by default)."""
        return self.to("cuda" if device is None else f"cuda:{device}")

    # ------------------------------------------------------------------ shape operations
    def _reshaped(self, shape: torch.Size) -> TensorSpec:
        """Same elements, new shape (squeeze/unsqueeze): tensor attributes are reshaped."""
        return self._replace(
            shape=shape, **{a: getattr(self, a).reshape(shape) for a in self._tensor_attrs}
        )

    def expand(self, *shape: int) -> TensorSpec:
        """Return the spec with extra leading batch dims (or size-1 dims grown); ``-1`` keeps a dim."""
        new = expand_shape(self.shape, _shape_args(shape), type(self).__name__)
        return self._replace(
            shape=new,
            **{a: getattr(self, a).expand(new).clone() for a in self._tensor_attrs},
            **self._resized(new),
        )

    def squeeze(self, dim: int | None = None) -> TensorSpec:
        """Remove batch dims of size 1 (all of them, or only ``dim``)."""
        nbatch = len(self.shape) - self._domain_ndim
        if dim is None:
            keep = [i for i, s in enumerate(self.shape) if s != 1 or i >= nbatch]
        else:
            d = dim + len(self.shape) if dim < 0 else dim
            if self.shape[d] != 1:
                raise ValueError(
                    SQUEEZE_DIM.format(
                        dim=dim, cls=type(self).__name__, shape=self.shape, size=self.shape[d]
                    )
                )
            keep = [i for i in range(len(self.shape)) if i != d]
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
        """Index the batch dims (int, slice, tensor, ellipsis), as one would index a sample."""
        nbatch = len(self.shape) - self._domain_ndim
        batch = torch.empty(self.shape[:nbatch], device="meta")[idx].shape
        new = torch.Size((*batch, *self.shape[nbatch:]))
        attrs = {}
        for a in self._tensor_attrs:
            val = getattr(self, a)
            if isinstance(idx, torch.Tensor):
                idx = idx.to(val.device)
            attrs[a] = val[idx]
        return self._replace(shape=new, **attrs, **self._resized(new))

    def unbind(self, dim: int = 0) -> tuple[TensorSpec, ...]:
        """Split the spec along batch dim ``dim`` into ``shape[dim]`` specs."""
        d = dim + self.ndim if dim < 0 else dim
        return tuple(self[(slice(None),) * d + (i,)] for i in range(self.shape[d]))

    # ------------------------------------------------------------------ comparison and display
    def _eq_fields(self) -> tuple:
        return ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return False
        if (
            self.shape != other.shape
            or self.dtype != other.dtype
            or self.device != other.device
            or self._eq_fields() != other._eq_fields()
        ):
            return False
        return all(torch.equal(getattr(self, a), getattr(other, a)) for a in self._tensor_attrs)

    __hash__ = None  # equality is by value

    def _repr_fields(self) -> str:
        return ""

    def __repr__(self) -> str:
        extra = self._repr_fields()
        extra = f", {extra}" if extra else ""
        return (
            f"{type(self).__name__}(shape={tuple(self.shape)}, dtype={self.dtype}, "
            f"device={self.device}{extra})"
        )

    # ------------------------------------------------------------------ torch.stack support
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func is torch.stack:
            from ._stack import stack_specs

            return stack_specs(*args, **(kwargs or {}))
        return NotImplemented

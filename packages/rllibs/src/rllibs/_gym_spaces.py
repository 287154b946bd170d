"""Gymnasium spaces ↔ specs, plus the per-space converters used on the step path.

Each space gives three things, all decided once when the wrapper is built:

- a spec (``space_to_spec``; ``spec_to_space`` goes the other way);
- a reader turning what the env returns (NumPy arrays, Python scalars, dicts, tuples) into
  tensors (``make_reader``): ``torch.from_numpy`` on arrays already of the right dtype, so a
  step costs no copy and no spec lookup;
- a writer turning a policy's action tensor into what ``env.step`` expects (``make_writer``).

Readers and writers work unchanged on batched (vector-env) values: the batch dims lead.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rlcore import numpy_dtype
from rlspecs import (
    Binary,
    Bounded,
    Categorical,
    Composite,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Stacked,
    TensorSpec,
    Unbounded,
)

__all__ = [
    "is_image_space",
    "make_reader",
    "make_writer",
    "space_to_spec",
    "spec_to_space",
    "to_numpy",
]

UNSUPPORTED_SPACE = (
    "cannot convert the gymnasium space {space!r} to a spec: supported spaces are Box, Discrete, "
    "MultiDiscrete, MultiBinary, Dict and Tuple"
)
HETEROGENEOUS_TUPLE = (
    "cannot convert the gymnasium Tuple space {space!r}: its members give different specs; "
    "use a Dict space (one key per member) instead"
)
UNSUPPORTED_SPEC = (
    "cannot convert the spec {spec!r}{where} to a gymnasium space: supported specs are Unbounded, "
    "Bounded, Categorical, OneHot, MultiCategorical, MultiOneHot, Binary, Composite and Stacked "
    "(stacked along dim 0)"
)
NESTED_TUPLE = (
    "cannot convert the gymnasium Tuple space {space!r}: Tuple members must be Box, Discrete, "
    "MultiDiscrete or MultiBinary spaces; use a Dict space for nested structures"
)

Reader = Callable[[Any], Any]
Writer = Callable[[Any], Any]


def _spaces():
    from gymnasium import spaces

    return spaces


def _torch_dtype(np_dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty((), dtype=np_dtype)).dtype


def is_image_space(space: Any) -> bool:
    """Whether ``space`` holds images (a ``uint8`` Box of rank 3, or rank 2 in ``[0, 255]``).

    Examples:
        >>> from gymnasium.spaces import Box
        >>> is_image_space(Box(0, 255, (84, 84, 3), dtype="uint8"))
        True
    """
    spaces = _spaces()
    if not isinstance(space, spaces.Box) or space.dtype != np.uint8:
        return False
    if len(space.shape) == 3:
        return True
    return len(space.shape) == 2 and bool((space.low == 0).all() and (space.high == 255).all())


def space_to_spec(
    space: Any, *, categorical_action_encoding: bool = False, device: Any = None
) -> TensorSpec:
    """Return the spec of one (unbatched) value of a gymnasium space.

    Box → ``Bounded`` (``Unbounded`` when every bound is infinite), dtype from the space;
    Discrete → ``OneHot`` (``Categorical`` with ``categorical_action_encoding``);
    MultiDiscrete → ``MultiOneHot`` (``MultiCategorical``), or, when every entry has the same
    size ``n``, ``OneHot(n)`` (``Categorical(n)``) shaped like ``nvec``; MultiBinary → ``Binary``;
    Dict → ``Composite``; Tuple → the members stacked on a leading dim. A Box whose bounds are
    infinite or the extremes of its dtype (torchrl 0.4 writes those) is unbounded; a ``bool`` Box
    gives ``Categorical(2, dtype=torch.bool)`` flags.

    Examples:
        >>> from gymnasium.spaces import Discrete
        >>> space_to_spec(Discrete(3)).shape
        torch.Size([3])
        >>> space_to_spec(Discrete(3), categorical_action_encoding=True).n
        3
    """
    spaces = _spaces()
    kwargs = {"categorical_action_encoding": categorical_action_encoding, "device": device}
    if isinstance(space, spaces.Box):
        dtype = _torch_dtype(space.dtype)
        if dtype == torch.bool:
            return Categorical(2, shape=space.shape, device=device, dtype=torch.bool)
        low, high = space.low, space.high
        if _is_unbounded(low, high, space.dtype):
            return Unbounded(shape=space.shape, device=device, dtype=dtype)
        return Bounded(
            low=torch.as_tensor(low),
            high=torch.as_tensor(high),
            shape=space.shape,
            device=device,
            dtype=dtype,
        )
    if isinstance(space, spaces.Discrete):
        if categorical_action_encoding:
            return Categorical(int(space.n), device=device, dtype=torch.int64)
        return OneHot(int(space.n), device=device, dtype=torch.int64)
    if isinstance(space, spaces.MultiDiscrete):
        nvec = torch.as_tensor(space.nvec, dtype=torch.int64)
        if nvec.numel() and bool((nvec == nvec.flatten()[0]).all()):
            # one size for every entry: a shaped Categorical (OneHot), as torchrl 0.4 stacks them
            n = int(nvec.flatten()[0])
            if categorical_action_encoding:
                return Categorical(n, shape=nvec.shape, device=device, dtype=torch.int64)
            return OneHot(n, shape=(*nvec.shape, n), device=device, dtype=torch.int64)
        if categorical_action_encoding or nvec.ndim > 1:
            return MultiCategorical(nvec, device=device, dtype=torch.int64)
        return MultiOneHot(nvec, device=device, dtype=torch.int64)
    if isinstance(space, spaces.MultiBinary):
        return Binary(shape=space.shape, device=device, dtype=_torch_dtype(space.dtype))
    if isinstance(space, spaces.Dict):
        return Composite(
            {key: space_to_spec(sub, **kwargs) for key, sub in space.spaces.items()},
            shape=(),
            device=device,
        )
    if isinstance(space, spaces.Tuple):
        if any(isinstance(sub, (spaces.Dict, spaces.Tuple)) for sub in space.spaces):
            raise TypeError(NESTED_TUPLE.format(space=space))
        members = [space_to_spec(sub, **kwargs) for sub in space.spaces]
        if any(member != members[0] for member in members[1:]):
            raise ValueError(HETEROGENEOUS_TUPLE.format(space=space))
        return torch.stack(members, 0)
    raise TypeError(UNSUPPORTED_SPACE.format(space=space))


def _is_unbounded(low: np.ndarray, high: np.ndarray, np_dtype: np.dtype) -> bool:
    info = np.finfo(np_dtype) if np.issubdtype(np_dtype, np.floating) else np.iinfo(np_dtype)
    return bool(
        ((low == -np.inf) | (low <= info.min)).all()
        and ((high == np.inf) | (high >= info.max)).all()
    )


def spec_to_space(spec: TensorSpec) -> Any:
    """Return the gymnasium space of the values of ``spec`` (the inverse of ``space_to_spec``).

    ``Unbounded`` → an infinite Box for floats (gymnasium samples those from a normal law;
    its checker advises finite bounds), the dtype's extremes for integers; ``Bounded`` → a Box
    of its bounds and dtype;
    ``Categorical(n)`` → ``Discrete(n)``, or ``MultiDiscrete`` of ``n`` in every entry when it
    has a shape; ``OneHot(n)`` → ``Discrete(n)`` (``MultiDiscrete`` with leading dims);
    ``MultiCategorical``/``MultiOneHot`` → ``MultiDiscrete(nvec)``; ``Binary`` →
    ``MultiBinary``; ``bool`` flags → a ``bool`` Box; ``Composite`` → ``Dict`` (nested keys as
    nested Dicts, its batch dims dropped as torchrl 0.4 does); ``Stacked`` (dim 0) → ``Tuple``.
    Round trips through ``space_to_spec`` give the spec back, except that a ``MultiCategorical``
    (``MultiOneHot``) whose entries all have the same size comes back as a shaped
    ``Categorical`` (``OneHot``) and that the members of a ``Stacked`` spec must be alike.

    Examples:
        >>> from rlspecs import Composite, OneHot, Unbounded
        >>> spec_to_space(OneHot(3))
        Discrete(3)
        >>> spec_to_space(Composite(obs=Unbounded(2), flag=Categorical(2, dtype=torch.bool)))
        Dict('flag': Box(False, True, (), bool), 'obs': Box(-inf, inf, (2,), float32))
    """
    return _spec_to_space(spec, ())


def _spec_to_space(spec: TensorSpec, where: tuple) -> Any:
    spaces = _spaces()
    shape = tuple(spec.shape)
    if isinstance(spec, Composite):
        if spec.shape:
            spec = spec[(0,) * len(spec.shape)]
        return spaces.Dict({key: _spec_to_space(sub, (*where, key)) for key, sub in spec.items()})
    if isinstance(spec, Stacked) and spec.dim == 0:
        return spaces.Tuple(_spec_to_space(sub, where) for sub in spec.unbind(0))
    dtype = getattr(spec, "dtype", None)
    if dtype == torch.bool and isinstance(spec, (Unbounded, Categorical, Bounded)):
        return spaces.Box(0, 1, shape, dtype=bool)
    np_dtype = numpy_dtype(dtype) if dtype is not None else None
    if isinstance(spec, MultiOneHot):
        nvec = np.asarray(spec.nvec, dtype=np.int64)
        return spaces.MultiDiscrete(np.broadcast_to(nvec, (*shape[:-1], nvec.size)).copy())
    if isinstance(spec, MultiCategorical):
        return spaces.MultiDiscrete(spec.nvec.expand(shape).cpu().numpy(), dtype=np_dtype)
    if isinstance(spec, Binary):
        return spaces.MultiBinary(shape[0] if len(shape) == 1 else list(shape))
    if isinstance(spec, Categorical):
        if not shape:
            return spaces.Discrete(spec.n)
        return spaces.MultiDiscrete(np.full(shape, spec.n), dtype=np_dtype)
    if isinstance(spec, OneHot):
        if len(shape) == 1:
            return spaces.Discrete(spec.n)
        return spaces.MultiDiscrete(np.full(shape[:-1], spec.n))
    if isinstance(spec, Bounded):
        low = spec.low.detach().cpu().numpy()
        high = spec.high.detach().cpu().numpy()
        return spaces.Box(low, high, shape, dtype=np_dtype)
    if isinstance(spec, Unbounded):
        if np.issubdtype(np_dtype, np.floating):
            return spaces.Box(-np.inf, np.inf, shape, dtype=np_dtype)
        info = np.iinfo(np_dtype)
        return spaces.Box(info.min, info.max, shape, dtype=np_dtype)
    at = f" at key {where!r}" if where else ""
    raise TypeError(UNSUPPORTED_SPEC.format(spec=spec, where=at))


def _first_max(values: list) -> int:
    """``argmax`` of a short list (first maximum); 5x faster than ``int(tensor.argmax())``."""
    return values.index(max(values))


# ---------------------------------------------------------------------- readers (env → torch)
def _array_reader(np_dtype: np.dtype) -> Reader:
    def read(value: Any) -> torch.Tensor:
        array = np.asarray(value, dtype=np_dtype)
        flags = array.flags
        # from_numpy shares memory: read-only (or oddly strided) arrays get their own copy
        if not (flags.writeable and flags.c_contiguous):
            array = array.copy()
        return torch.from_numpy(array)

    return read


def _label_reader(start: Any) -> Reader:
    shift = torch.as_tensor(start, dtype=torch.int64)
    shifted = bool((shift != 0).any())

    def read(value: Any) -> torch.Tensor:
        labels = torch.from_numpy(np.array(value, dtype=np.int64, ndmin=0))
        return labels - shift if shifted else labels

    return read


def _one_hot_reader(n: int, start: Any) -> Reader:
    read_labels = _label_reader(start)
    return lambda value: torch.nn.functional.one_hot(read_labels(value), n)


def _multi_one_hot_reader(nvec: list[int], start: np.ndarray) -> Reader:
    read_labels = _label_reader(start)

    def read(value: Any) -> torch.Tensor:
        labels = read_labels(value)
        return torch.cat(
            [torch.nn.functional.one_hot(labels[..., i], n) for i, n in enumerate(nvec)], -1
        )

    return read


def make_reader(space: Any, spec: TensorSpec, batch_ndim: int = 0) -> Reader:
    """Return a function converting values of ``space`` (batch dims first) to ``spec``'s tensors.

    Dict spaces give dicts of tensors (nested as the space is).

    Examples:
        >>> from gymnasium.spaces import Box
        >>> space = Box(-1, 1, (2,))
        >>> make_reader(space, space_to_spec(space))(space.sample()).shape
        torch.Size([2])
    """
    spaces = _spaces()
    if isinstance(space, spaces.Box):
        return _array_reader(space.dtype)
    if isinstance(space, spaces.MultiBinary):
        return _array_reader(space.dtype)
    if isinstance(space, spaces.Discrete):
        if isinstance(spec, OneHot):
            return _one_hot_reader(int(space.n), int(space.start))
        return _label_reader(int(space.start))
    if isinstance(space, spaces.MultiDiscrete):
        if isinstance(spec, MultiOneHot):
            return _multi_one_hot_reader(space.nvec.tolist(), space.start)
        if isinstance(spec, OneHot):
            return _one_hot_reader(spec.n, space.start)
        return _label_reader(space.start)
    if isinstance(space, spaces.Dict):
        readers = [
            (key, make_reader(sub, spec[key], batch_ndim)) for key, sub in space.spaces.items()
        ]
        return lambda value: {key: read(value[key]) for key, read in readers}
    if isinstance(space, spaces.Tuple):
        readers = [make_reader(sub, spec[0], batch_ndim) for sub in space.spaces]
        return lambda value: torch.stack(
            [read(member) for read, member in zip(readers, value)], batch_ndim
        )
    raise TypeError(UNSUPPORTED_SPACE.format(space=space))


# ---------------------------------------------------------------------- writers (torch → env)
def to_numpy(tensor: torch.Tensor) -> np.ndarray:
    """Return a NumPy view of ``tensor`` (detached and moved to the CPU first when needed).

    Examples:
        >>> to_numpy(torch.ones(2, requires_grad=True))
        array([1., 1.], dtype=float32)
    """
    try:
        return tensor.numpy()
    except (RuntimeError, TypeError):  # requires grad, or not on the CPU
        return tensor.detach().cpu().numpy()


def make_writer(space: Any, spec: TensorSpec, batch_ndim: int = 0) -> Writer:
    """Return a function converting an action of ``spec`` into what ``space``'s env expects.

    Examples:
        >>> from gymnasium.spaces import Discrete
        >>> space = Discrete(3)
        >>> make_writer(space, space_to_spec(space))(torch.tensor([0, 0, 1]))
        2
    """
    spaces = _spaces()
    if isinstance(space, spaces.Box):
        return to_numpy
    if isinstance(space, spaces.MultiBinary):
        dtype = space.dtype
        return lambda action: to_numpy(action).astype(dtype, copy=False)
    if isinstance(space, spaces.Discrete):
        start = int(space.start)
        one_hot = isinstance(spec, OneHot)
        if batch_ndim:
            if one_hot:
                return lambda action: to_numpy(action.argmax(-1)) + start
            return lambda action: to_numpy(action).astype(np.int64, copy=False) + start
        if one_hot:
            return lambda action: _first_max(action.tolist()) + start
        return lambda action: int(action) + start
    if isinstance(space, spaces.MultiDiscrete):
        start = space.start
        if isinstance(spec, OneHot):
            return lambda action: to_numpy(action.argmax(-1)) + start
        if isinstance(spec, MultiOneHot):
            sizes = space.nvec.tolist()

            def write(action: torch.Tensor) -> np.ndarray:
                labels = [part.argmax(-1) for part in action.split(sizes, -1)]
                return to_numpy(torch.stack(labels, -1)) + start

            return write
        return lambda action: to_numpy(action).astype(np.int64, copy=False) + start
    if isinstance(space, spaces.Dict):
        writers = [
            (key, make_writer(sub, spec[key], batch_ndim)) for key, sub in space.spaces.items()
        ]
        return lambda action: {key: write(action.get(key)) for key, write in writers}
    if isinstance(space, spaces.Tuple):
        writers = [make_writer(sub, spec[0], batch_ndim) for sub in space.spaces]
        return lambda action: tuple(
            write(member) for write, member in zip(writers, action.unbind(batch_ndim))
        )
    raise TypeError(UNSUPPORTED_SPACE.format(space=space))


# ---------------------------------------------------------------------- torchrl 0.4 names
def _remap_state(space: Any) -> Any:
    spaces = _spaces()
    if isinstance(space, spaces.Dict):
        subs = {key: _remap_state(sub) for key, sub in space.spaces.items()}
        if "state" in subs and "observation" not in subs:
            subs["observation"] = subs.pop("state")
        return spaces.Dict(subs)
    return space


def _gym_to_torchrl_spec_transform(
    spec: Any,
    dtype: torch.dtype | None = None,
    device: Any = None,
    categorical_action_encoding: bool = False,
    remap_state_to_observation: bool = True,
    batch_size: tuple[int, ...] | torch.Size = (),
) -> TensorSpec:
    """torchrl 0.4's name and signature for ``space_to_spec``.

    ``dtype`` overrides the dtype of a Box; ``remap_state_to_observation`` renames a Dict
    entry ``"state"`` to ``"observation"`` (when there is none), as torchrl's wrappers name a
    lone state vector; ``batch_size`` expands the spec to these leading dims.

    Examples:
        >>> from gymnasium.spaces import Box, Dict
        >>> spec = _gym_to_torchrl_spec_transform(Dict(state=Box(-1, 1, (2,))), batch_size=(4,))
        >>> list(spec.keys()), spec["observation"].shape
        (['observation'], torch.Size([4, 2]))
    """
    spaces = _spaces()
    if dtype is not None and isinstance(spec, spaces.Box):
        np_dtype = numpy_dtype(dtype)
        spec = spaces.Box(spec.low.astype(np_dtype), spec.high.astype(np_dtype), dtype=np_dtype)
    if remap_state_to_observation:
        spec = _remap_state(spec)
    result = space_to_spec(
        spec, categorical_action_encoding=categorical_action_encoding, device=device
    )
    if batch_size:
        if isinstance(result, Composite):
            return result.expand(*batch_size)
        return result.expand(*batch_size, *result.shape)
    return result


def _torchrl_to_gym_spec_transform(
    spec: TensorSpec, categorical_action_encoding: bool = False
) -> Any:
    """torchrl 0.4's name and signature for ``spec_to_space``.

    ``categorical_action_encoding`` is accepted for torchrl 0.4 compatibility: one-hot and
    categorical specs give the same space.

    Examples:
        >>> from rlspecs import OneHot
        >>> _torchrl_to_gym_spec_transform(OneHot(3), categorical_action_encoding=False)
        Discrete(3)
    """
    return spec_to_space(spec)

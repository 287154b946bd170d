"""Memoized ``encode`` (current torchrl's ``memoize_encode``): the conversion steps that the first
value needed are worked out once, then replayed on every later value without inspecting it.

Only worth it when every value has the same type and shape (a wrapper's observations); a value
that needed no reshape the first time is not reshaped later either, as in torchrl.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .errors import SpecShapeError

MEMO_WARNING = "memoized encoding is an experimental feature. Use at your own risks."
MEMO_SHAPE = (
    "Shape mismatch: the value has shape {got} which is incompatible with the spec shape "
    "{expected} (memoized encode of a {cls}: every value must have the shape of the first one)"
)

# where a spec keeps its memo: {ignore_device: encode plan}; absent when encode is eager
MEMO_KEY = "_encode_memo"


def set_memoized(spec: Any, mode: bool) -> None:
    """Switch ``spec.encode`` to the memoized path (``mode=True``) or back to the eager one."""
    warnings.warn(MEMO_WARNING, UserWarning, stacklevel=3)
    if mode:
        spec.__dict__[MEMO_KEY] = {}
    else:
        spec.__dict__.pop(MEMO_KEY, None)


def erase(spec: Any) -> None:
    """Forget the plans a memoized ``spec`` worked out (the next value builds a new one)."""
    memo = spec.__dict__.get(MEMO_KEY)
    if memo is not None:
        memo.clear()


def encode_memoized(spec: Any, memo: dict, val: Any, ignore_device: bool) -> Any:
    """``spec.encode(val)`` through the plan cached for ``ignore_device`` (built on first use)."""
    plan = memo.get(ignore_device)
    if plan is None:
        plan = memo[ignore_device] = _plan(spec, val, ignore_device)
    return plan(val)


def plain_encode(method: Callable) -> Callable:
    """Mark ``TensorSpec._encode_eager``: specs that keep it get a replayable plan."""
    method._plain_encode = True
    return method


def _plan(spec: Any, val: Any, ignore_device: bool) -> Callable[[Any], Any]:
    if not getattr(type(spec)._encode_eager, "_plain_encode", False):
        # specs with their own conversion (one-hot labels, composites, stacks) run it each time;
        # a composite's entries are memoized themselves
        def eager(value: Any) -> Any:
            return spec._encode_eager(value, ignore_device=ignore_device)

        return eager
    dtype, shape, cls = spec.dtype, spec.shape, type(spec).__name__
    device = None if ignore_device else spec.device
    steps: list[Callable[[Any], Any]] = []
    if isinstance(val, np.ndarray) and not val.flags.writeable:
        steps.append(np.array)  # torch cannot wrap a read-only array
    steps.append(lambda v: torch.as_tensor(v, dtype=dtype, device=device))
    probe = val
    for step in steps:
        probe = step(probe)
    if probe.shape != shape and not (
        isinstance(val, torch.Tensor) and probe.shape[probe.ndim - len(shape) :] == shape
    ):

        def reshape(value: torch.Tensor) -> torch.Tensor:
            try:
                return value.reshape(shape)
            except RuntimeError as err:
                raise SpecShapeError(
                    MEMO_SHAPE.format(got=value.shape, expected=shape, cls=cls)
                ) from err

        steps.append(reshape)

    def run(value: Any) -> Any:
        for step in steps:
            value = step(value)
        return value

    return run


class MemoizedEncode:
    """``encode`` (eager, or memoized after ``memoize_encode``) of every spec."""

    def _encode_eager(self, val: Any, *, ignore_device: bool = False) -> Any:
        raise NotImplementedError

    def encode(self, val: Any, *, ignore_device: bool = False) -> Any:
        """Turn a NumPy array, Python scalar or tensor into a tensor of this spec's dtype/device.

        A value whose shape differs from the spec's but holds as many elements is reshaped. As
        in torchrl 0.4, a NumPy array or Python value must hold exactly the spec's elements (a
        batch of them raises); a tensor may carry extra leading batch dims. Any other shape
        mismatch raises a ``SpecShapeError`` (a ``ValueError`` and a ``RuntimeError``) naming
        both shapes. After ``memoize_encode()``, the conversion steps of the first value are
        replayed on later ones.
        """
        memo = self.__dict__.get(MEMO_KEY)
        if memo is not None:
            return encode_memoized(self, memo, val, ignore_device)
        return self._encode_eager(val, ignore_device=ignore_device)

    def memoize_encode(self, mode: bool = True) -> None:
        """Cache the conversion steps of ``encode`` (current torchrl; warns: experimental there too).

        With ``mode=True`` the first value's steps (array to tensor, cast, reshape) are worked
        out once per ``ignore_device`` and replayed on every later value, which must then have
        the same type and shape; ``mode=False`` goes back to the eager ``encode``. Copies of the
        spec (``clone``, indexing, ...) encode eagerly. Composites and lazy stacks pass the mode
        on to their entries.

        Examples:
            >>> import warnings
            >>> import numpy as np
            >>> from rlspecs import Unbounded
            >>> spec = Unbounded(3)
            >>> with warnings.catch_warnings():
            ...     warnings.simplefilter("ignore")
            ...     spec.memoize_encode()
            >>> spec.encode(np.zeros((1, 3))).shape
            torch.Size([3])
            >>> spec.erase_memoize_cache()
        """
        set_memoized(self, mode)

    def erase_memoize_cache(self) -> None:
        """Forget the steps ``memoize_encode`` cached (the next ``encode`` works them out anew)."""
        erase(self)


class MemoizedEntries(MemoizedEncode):
    """``memoize_encode``/``erase_memoize_cache`` of specs that hold specs (composites, stacks).

    The mode and the erasure reach every held spec (``_memo_children``), as in torchrl.
    """

    def _memo_children(self) -> list[Any]:
        raise NotImplementedError

    def memoize_encode(self, mode: bool = True) -> None:
        """Memoize (or stop memoizing) ``encode`` here and in every held spec."""
        set_memoized(self, mode)
        for child in self._memo_children():
            child.memoize_encode(mode)

    def erase_memoize_cache(self) -> None:
        """Forget the memoized ``encode`` steps here and in every held spec."""
        erase(self)
        for child in self._memo_children():
            child.erase_memoize_cache()

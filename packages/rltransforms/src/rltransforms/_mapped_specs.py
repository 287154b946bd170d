"""The spec of a transformed leaf, computed by running the transform on the spec's bounds."""

from __future__ import annotations

from collections.abc import Callable

import torch
from tensordict import NestedKey

from rlspecs import Bounded, TensorSpec, Unbounded

SPEC_TYPE_ERROR = (
    "{cls}: cannot transform the spec of {key!r} ({type}); Bounded and Unbounded are supported"
)


def spec_through(
    cls: str,
    key: NestedKey,
    spec: TensorSpec,
    fn: Callable[[torch.Tensor], torch.Tensor],
    keeps_bounds: bool = True,
) -> TensorSpec:
    """The spec of `fn(value)` for values of `spec`.

    A `Bounded` spec's bounds go through `fn` when `fn` maps the box onto a box
    (`keeps_bounds`: elementwise monotone maps, copies, convex combinations); otherwise, and
    for `Unbounded`, the result is `Unbounded` with the shape and dtype `fn` gives.
    """
    if isinstance(spec, Bounded) and keeps_bounds:
        low, high = fn(spec.low), fn(spec.high)
        return Bounded(
            low=torch.minimum(low, high),
            high=torch.maximum(low, high),
            dtype=low.dtype,
            device=spec.device,
        )
    if isinstance(spec, (Bounded, Unbounded)):
        out = fn(spec.zero())
        return Unbounded(shape=out.shape, dtype=out.dtype, device=spec.device)
    raise TypeError(SPEC_TYPE_ERROR.format(cls=cls, key=key, type=type(spec).__name__))

"""Spec helpers shared by the mocks."""

from __future__ import annotations

import torch

from rlspecs import Composite, TensorSpec


def expand_to_batch(spec: Composite, batch_size: torch.Size) -> Composite:
    """A copy of the unbatched ``spec`` with ``batch_size`` prepended to every shape."""
    if not batch_size:
        return spec.clone()
    return spec.expand(*batch_size, *spec.shape)


def as_composite(spec: TensorSpec, key: str, batch_size: torch.Size) -> Composite:
    """``spec`` itself if it is a Composite, else ``Composite({key: spec}, shape=batch_size)``."""
    if isinstance(spec, Composite):
        return spec
    return Composite({key: spec}, shape=batch_size)

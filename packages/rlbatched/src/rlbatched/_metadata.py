"""What a batched env knows of its sub-envs before it runs them: ``EnvMeta``.

A ``SerialEnv`` reads it from sub-envs it builds in this process. A ``ParallelEnv`` never runs
a sub-env's code here: its workers report it when they start (``reporting_workers`` says which:
one per group of workers whose factory and keyword arguments are the same, since only
different ones may give different specs), unless every factory is an ``rlcore.EnvCreator``,
which knows the specs of what it builds (``creator_metadata``, as torchrl uses its
``EnvCreator``'s metadata).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from rlcore import EnvBase, EnvCreator
from rlspecs import Composite

__all__ = [
    "EnvMeta",
    "check_schemas",
    "creator_metadata",
    "metas_from_reports",
    "reporting_workers",
]

SCHEMA_ERROR = (
    "share_individual_td=False needs sub-envs with the same spec keys, shapes, dtypes and "
    "devices, but worker {index}'s differ from worker 0's ({detail}); leave "
    "share_individual_td unset (the specs are then stacked lazily) or give every worker the "
    "same env."
)


class EnvMeta:
    """Specs, batch size, device and batch-locking of one sub-env.

    Examples:
        >>> from rlmocks import CountingEnv
        >>> meta = EnvMeta.from_env(CountingEnv())
        >>> meta.batch_size, meta.batch_locked, "observation" in meta.output_spec[
        ...     "full_observation_spec"].keys()
        (torch.Size([]), True, True)
        >>> meta.same_specs(EnvMeta.from_env(CountingEnv()))
        True
    """

    __slots__ = ("batch_size", "device", "batch_locked", "output_spec", "input_spec")

    def __init__(
        self,
        batch_size: torch.Size,
        device: torch.device | None,
        batch_locked: bool,
        output_spec: Composite,
        input_spec: Composite,
    ) -> None:
        self.batch_size = torch.Size(batch_size)
        self.device = device
        self.batch_locked = bool(batch_locked)
        self.output_spec = output_spec
        self.input_spec = input_spec

    @classmethod
    def from_env(cls, env: EnvBase) -> EnvMeta:
        """The metadata of ``env`` (copies of its specs)."""
        return cls(
            env.batch_size,
            env.device,
            env.batch_locked,
            env.output_spec.clone(),
            env.input_spec.clone(),
        )

    @classmethod
    def from_creator(cls, creator: EnvCreator) -> EnvMeta:
        """The metadata an ``EnvCreator`` keeps of the envs it builds (no env is built)."""
        specs = creator.specs
        return cls(
            creator.batch_size,
            creator.device,
            creator.batch_locked,
            specs["output_spec"].clone(),
            specs["input_spec"].clone(),
        )

    def same_specs(self, other: EnvMeta) -> bool:
        """Whether ``other`` has the same batch size and specs (bounds included)."""
        return (
            self.batch_size == other.batch_size
            and self.output_spec == other.output_spec
            and self.input_spec == other.input_spec
        )

    def schema(self) -> tuple:
        """What the shared buffers depend on: batch size, device, and every leaf's key, type,
        shape, dtype and device (not its bounds)."""
        leaves = []
        for spec in (self.output_spec, self.input_spec):
            for key, leaf in spec.items(True, True):
                leaves.append(
                    (key, type(leaf).__name__, tuple(leaf.shape), leaf.dtype, leaf.device)
                )
        return (tuple(self.batch_size), self.device, self.batch_locked, tuple(leaves))

    def __repr__(self) -> str:
        return f"EnvMeta(batch_size={tuple(self.batch_size)}, device={self.device})"


def _same_kwargs(a: dict, b: dict) -> bool:
    if a is b:
        return True
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - values whose == is not a bool (tensors): not the same
        return False


def _groups(fns: Sequence[Callable], kwargs: Sequence[dict]) -> list[int]:
    """Per worker, the first worker with the same factory and equal keyword arguments."""
    firsts: list[int] = []
    for index, (fn, kw) in enumerate(zip(fns, kwargs)):
        first = index
        for other in sorted(set(firsts)):
            if fns[other] is fn and _same_kwargs(kwargs[other], kw):
                first = other
                break
        firsts.append(first)
    return firsts


def reporting_workers(fns: Sequence[Callable], kwargs: Sequence[dict]) -> list[bool]:
    """Which workers report their sub-env's metadata at start: the first of each group of
    workers built by the same factory with equal keyword arguments (the others build the same).

    Examples:
        >>> from rlmocks import CountingEnv
        >>> reporting_workers([CountingEnv] * 3, [{}, {}, {"max_steps": 2}])
        [True, False, True]
    """
    return [first == index for index, first in enumerate(_groups(fns, kwargs))]


def metas_from_reports(
    fns: Sequence[Callable], kwargs: Sequence[dict], reports: Sequence[Any]
) -> list[EnvMeta]:
    """One ``EnvMeta`` per worker from the start replies: a reporting worker's own, shared by
    the other workers of its group (``reporting_workers``)."""
    firsts = _groups(fns, kwargs)
    return [reports[first] for first in firsts]


def creator_metadata(fns: Sequence[Callable], kwargs: Sequence[dict]) -> list[EnvMeta] | None:
    """The metadata of every worker from its ``EnvCreator``, or None when a factory is not one
    or is given keyword arguments (which may change what it builds): the workers report it."""
    if not all(isinstance(fn, EnvCreator) for fn in fns) or any(kwargs):
        return None
    made: dict[int, EnvMeta] = {}
    for fn in fns:
        if id(fn) not in made:
            made[id(fn)] = EnvMeta.from_creator(fn)
    return [made[id(fn)] for fn in fns]


def check_schemas(metas: Sequence[EnvMeta]) -> None:
    """Raise ``ValueError`` when the metadata give different shared buffers (with
    ``share_individual_td=False``, one dense buffer laid out from worker 0's)."""
    reference = metas[0].schema()
    for index, meta in enumerate(metas[1:], 1):
        schema = meta.schema()
        if schema != reference:
            detail = _first_difference(reference, schema)
            raise ValueError(SCHEMA_ERROR.format(index=index, detail=detail))


def _first_difference(reference: tuple, other: tuple) -> str:
    names = ("batch size", "device", "batch_locked")
    for name, a, b in zip(names, reference[:3], other[:3]):
        if a != b:
            return f"{name} {b} vs {a}"
    mine = {leaf[0]: leaf[1:] for leaf in other[3]}
    theirs = {leaf[0]: leaf[1:] for leaf in reference[3]}
    for key in sorted(set(mine) | set(theirs), key=str):
        if mine.get(key) != theirs.get(key):
            return f"key {key!r}: {mine.get(key)} vs {theirs.get(key)}"
    return "specs"

"""What a batched env knows of its sub-envs before it runs them: ``EnvMetaData``.

``get_env_metadata`` reads it from an env, a factory or an ``rlcore.EnvCreator`` (current
torchrl's ``torchrl.envs.get_env_metadata``). A ``SerialEnv`` reads it from sub-envs it builds in
this process. A ``ParallelEnv`` never runs
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
from tensordict import TensorDictBase

from rlcore import EnvBase, EnvCreator
from rlspecs import Composite

__all__ = [
    "EMPTY_SPECS_ERROR",
    "EnvMetaData",
    "check_no_empty_specs",
    "check_schemas",
    "creator_metadata",
    "get_env_metadata",
    "metas_from_reports",
    "reporting_workers",
]

SCHEMA_ERROR = (
    "share_individual_td=False needs sub-envs with the same spec keys, shapes, dtypes and "
    "devices, but worker {index}'s differ from worker 0's ({detail}); leave "
    "share_individual_td unset (the specs are then stacked lazily) or give every worker the "
    "same env."
)
# torchrl's text (0.4 and current), naming our transform
EMPTY_SPECS_ERROR = (
    "The environment passed to {cls} has empty specs in {key}. Consider using "
    "rltransforms.RemoveEmptySpecs to remove the empty specs."
)
KWARGS_MISMATCH = (
    "kwargs mismatch between EnvCreator and the kwargs provided to get_env_metadata:"
    "got EnvCreator.create_env_kwargs={creator_kwargs} and kwargs = {kwargs}"
)
NOT_SUPPORTED = "env of type {type} is not supported by get_env_metadata."
# the spec groups a batched env lays its buffers out from, in torchrl's order of checking
SPEC_GROUPS = (
    ("input_spec", "full_state_spec"),
    ("input_spec", "full_action_spec"),
    ("output_spec", "full_done_spec"),
    ("output_spec", "full_reward_spec"),
    ("output_spec", "full_observation_spec"),
)


class EnvMetaData:
    """Specs, batch size, device and batch-locking of one env, without the env.

    What a batched env needs to lay out its buffers and give its specs before its sub-envs run
    (torchrl's ``EnvMetaData``); picklable, so that a worker can report it. ``tensordict`` is
    zeros of every entry a step reads or writes (torchrl's also holds ``"_reset"`` entries);
    ``has_dynamic_specs`` says whether a leaf spec has a ``-1`` dim (a lazy stack of specs of
    different shapes).

    Examples:
        >>> from rlmocks import CountingEnv
        >>> meta = EnvMetaData.from_env(CountingEnv())
        >>> meta.batch_size, meta.batch_locked, meta.env_str
        (torch.Size([]), True, 'CountingEnv(batch_size=torch.Size([]), device=None)')
        >>> meta.specs["output_spec", "full_observation_spec", "observation"].shape
        torch.Size([1])
        >>> sorted(meta.tensordict.keys())
        ['action', 'done', 'next', 'observation', 'terminated']
        >>> meta.expand(3).batch_size, meta.has_dynamic_specs
        (torch.Size([3]), False)
        >>> meta.same_specs(EnvMetaData.from_env(CountingEnv()))
        True
    """

    __slots__ = (
        "batch_size",
        "device",
        "batch_locked",
        "output_spec",
        "input_spec",
        "env_str",
        "action_required",
    )

    def __init__(
        self,
        batch_size: torch.Size,
        device: torch.device | None,
        batch_locked: bool,
        output_spec: Composite,
        input_spec: Composite,
        env_str: str = "",
        action_required: bool = True,
    ) -> None:
        self.batch_size = torch.Size(batch_size)
        self.device = device
        self.batch_locked = bool(batch_locked)
        self.output_spec = output_spec
        self.input_spec = input_spec
        self.env_str = env_str
        self.action_required = bool(action_required)  # a step without its action raises

    @classmethod
    def from_env(cls, env: EnvBase) -> EnvMetaData:
        """The metadata of ``env`` (copies of its specs)."""
        try:
            env_str = str(env)
        except Exception:  # noqa: BLE001 - a repr that fails (torchrl falls back the same way)
            env_str = f"{type(env).__name__}()"
        return cls(
            env.batch_size,
            env.device,
            env.batch_locked,
            env.output_spec.clone(),
            env.input_spec.clone(),
            env_str,
            env._action_required,
        )

    # torchrl's name
    metadata_from_env = from_env

    @classmethod
    def from_creator(cls, creator: EnvCreator) -> EnvMetaData:
        """The metadata an ``EnvCreator`` keeps of the envs it builds (no env is built)."""
        specs = creator.specs
        return cls(
            creator.batch_size,
            creator.device,
            creator.batch_locked,
            specs["output_spec"].clone(),
            specs["input_spec"].clone(),
            f"{creator.env_type.__name__}()",
            creator._action_required,
        )

    @property
    def specs(self) -> Composite:
        """A Composite holding ``output_spec`` and ``input_spec`` (as ``env.specs``)."""
        return Composite(
            output_spec=self.output_spec, input_spec=self.input_spec, shape=self.batch_size
        )

    @property
    def has_dynamic_specs(self) -> bool:
        """Whether a leaf spec has a ``-1`` dim: its data may change shape between steps, so
        batched envs exchange it without preallocated buffers (``use_buffers``)."""
        for spec in (self.output_spec, self.input_spec):
            for _, leaf in spec.items(True, True):
                if -1 in leaf.shape:
                    return True
        return False

    @property
    def tensordict(self) -> TensorDictBase:
        """Zeros of every entry a step reads or writes (a new tensordict at each read): the root
        observations, done flags, state and actions, and ``"next"``'s observations, rewards
        and done flags."""
        return self.zeros(())

    def zeros(self, batch: tuple) -> TensorDictBase:
        """``tensordict`` with ``batch`` dims in front of the env's batch size."""
        out, inp = self.output_spec, self.input_spec
        root = out["full_observation_spec"].zero(batch)
        for spec in (out["full_done_spec"], inp["full_state_spec"], inp["full_action_spec"]):
            root.update(spec.zero(batch))
        nxt = out["full_observation_spec"].zero(batch)
        nxt.update(out["full_reward_spec"].zero(batch))
        nxt.update(out["full_done_spec"].zero(batch))
        root.set("next", nxt)
        return root

    def reset_zeros(self) -> TensorDictBase:
        """Zeros of what a reset returns: observations, done flags and state (what a batched env
        gives for a sub-env it does not reset, under the caller's entries)."""
        out = self.output_spec["full_observation_spec"].zero()
        out.update(self.output_spec["full_done_spec"].zero())
        out.update(self.input_spec["full_state_spec"].zero())
        return out

    def expand(self, *size: int) -> EnvMetaData:
        """The metadata of a batch of such envs: ``size`` is the new batch size (the env's
        batch size last), as ``Composite.expand``."""
        if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)):
            size = tuple(size[0])
        return EnvMetaData(
            torch.Size(size),
            self.device,
            self.batch_locked,
            self.output_spec.expand(size),
            self.input_spec.expand(size),
            self.env_str,
            self.action_required,
        )

    def clone(self) -> EnvMetaData:
        """A copy with copies of the specs."""
        return EnvMetaData(
            self.batch_size,
            self.device,
            self.batch_locked,
            self.output_spec.clone(),
            self.input_spec.clone(),
            self.env_str,
            self.action_required,
        )

    def to(self, device: torch.device | str | int | None) -> EnvMetaData:
        """The metadata with the specs on ``device`` (None: as they are)."""
        if device is None:
            return self.clone()
        device = torch.device(device)
        return EnvMetaData(
            self.batch_size,
            device,
            self.batch_locked,
            self.output_spec.to(device),
            self.input_spec.to(device),
            self.env_str,
            self.action_required,
        )

    def same_specs(self, other: EnvMetaData) -> bool:
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
        return (
            f"EnvMetaData(env_str={self.env_str!r}, batch_size={tuple(self.batch_size)}, "
            f"device={self.device})"
        )


def get_env_metadata(
    env_or_creator: EnvBase | Callable[..., EnvBase],
    kwargs: dict | None = None,
    *,
    env_validator: Callable[[EnvBase], None] | None = None,
) -> EnvMetaData:
    """The ``EnvMetaData`` of an env, of the env a factory builds, or of an ``EnvCreator``'s.

    As current torchrl's ``get_env_metadata``: an env is read as it is; a factory is called
    with ``kwargs``, read, and the env it built closed; an ``EnvCreator`` gives the metadata it
    keeps (``kwargs`` must then be empty or its own ``create_env_kwargs``: ``RuntimeError``
    otherwise). ``env_validator`` is called on the env read (on one built for the purpose, for
    an ``EnvCreator``) before its metadata are taken.

    Raises:
        RuntimeError: ``kwargs`` differ from an ``EnvCreator``'s own.
        NotImplementedError: ``env_or_creator`` is neither an env nor callable.

    Examples:
        >>> from rlmocks import CountingEnv
        >>> get_env_metadata(CountingEnv, {"max_steps": 3}).batch_size
        torch.Size([])
        >>> get_env_metadata(CountingEnv(batch_size=(2,))).batch_size
        torch.Size([2])
    """
    if isinstance(env_or_creator, EnvBase):
        if env_validator is not None:
            env_validator(env_or_creator)
        return EnvMetaData.from_env(env_or_creator)
    if isinstance(env_or_creator, EnvCreator):
        if kwargs and kwargs != env_or_creator.create_env_kwargs:
            raise RuntimeError(
                KWARGS_MISMATCH.format(
                    creator_kwargs=env_or_creator.create_env_kwargs, kwargs=kwargs
                )
            )
        if env_validator is not None:
            transient = env_or_creator()
            try:
                env_validator(transient)
            finally:
                transient.close()
        return EnvMetaData.from_creator(env_or_creator)
    if not callable(env_or_creator):
        raise NotImplementedError(NOT_SUPPORTED.format(type=type(env_or_creator)))
    env = env_or_creator(**(kwargs or {}))
    try:
        if env_validator is not None:
            env_validator(env)
        return EnvMetaData.from_env(env)
    finally:
        env.close()


def check_no_empty_specs(meta: EnvMetaData, cls: str) -> None:
    """Raise ``RuntimeError`` (torchrl's text) when a spec group of ``meta`` holds an empty
    ``Composite`` (an entry with nothing in it: no buffer can hold it).

    An empty group itself (e.g. no state) is fine; as in torchrl, the deepest, last such entry
    is named. ``cls`` is the batched env's class name.

    Examples:
        >>> from rlmocks import CountingEnv
        >>> env = CountingEnv()
        >>> check_no_empty_specs(EnvMetaData.from_env(env), "SerialEnv")  # nothing empty
        >>> env.observation_spec["info"] = Composite()
        >>> check_no_empty_specs(EnvMetaData.from_env(env), "SerialEnv")
        Traceback (most recent call last):
        ...
        RuntimeError: The environment passed to SerialEnv has empty specs in info. ...
    """
    for part, group in SPEC_GROUPS:
        specs = getattr(meta, part)
        if group not in specs.keys():
            continue
        for key, spec in reversed(list(specs[group].items(True))):
            if isinstance(spec, Composite) and spec.is_empty():
                raise RuntimeError(EMPTY_SPECS_ERROR.format(cls=cls, key=key))


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
) -> list[EnvMetaData]:
    """One ``EnvMetaData`` per worker from the start replies: a reporting worker's own, shared by
    the other workers of its group (``reporting_workers``)."""
    firsts = _groups(fns, kwargs)
    return [reports[first] for first in firsts]


def creator_metadata(fns: Sequence[Callable], kwargs: Sequence[dict]) -> list[EnvMetaData] | None:
    """The metadata of every worker from its ``EnvCreator``, or None when a factory is not one
    or is given keyword arguments (which may change what it builds): the workers report it."""
    if not all(isinstance(fn, EnvCreator) for fn in fns) or any(kwargs):
        return None
    made: dict[int, EnvMetaData] = {}
    for fn in fns:
        if id(fn) not in made:
            made[id(fn)] = EnvMetaData.from_creator(fn)
    return [made[id(fn)] for fn in fns]


def check_schemas(metas: Sequence[EnvMetaData]) -> None:
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

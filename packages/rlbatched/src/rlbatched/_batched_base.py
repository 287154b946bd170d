"""What SerialEnv and ParallelEnv share: arguments, metadata, specs, seeding and forwarding."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase

from rlcore import EnvBase, EnvClosedError
from rlcore.step_inputs import (
    ACTION,
    DONE,
    OBSERVATION,
    STATE,
    TreeRules,
    check_flat,
    flat_rules,
    get_many,
)

from . import _tensordict_ops
from ._metadata import EnvMetaData, check_no_empty_specs, check_schemas

SHARE_INDIVIDUAL_TD_ERROR = (
    "share_individual_td must be set to None or True when using multi-task batched "
    "environments (create_env_fn is a list of different callables), got False."
)
NUM_WORKERS_ERROR = "num_workers must be a positive integer, got {got}."
NUM_FNS_ERROR = "create_env_fn has {got} callables but num_workers is {expected}."
NUM_KWARGS_ERROR = "create_env_kwargs has {got} dicts but num_workers is {expected}."
BATCH_ERROR = (
    "Expected a tensordict with shape==env.batch_size, got {got} for a batched env of "
    "batch size {expected} ({num_workers} workers): one entry per worker is needed."
)
CLOSED_ERROR = (
    "{cls} is closed (close() was called, or it lost a worker) and was not reset since; "
    "call reset() to start it again before stepping."
)
PARTIAL_RESET_CLOSED_ERROR = (
    '{cls} is closed (close() was called, or it lost a worker): a partial reset ("_reset" '
    "entries) cannot reopen it, since the other sub-envs have no state; call reset() first."
)
PIN_MEMORY_ERROR = (
    "pin_memory=True is not supported for batched envs (torchrl 0.4 deprecated it too): "
    "append rltransforms.PinMemoryTransform to pin what you move to the GPU."
)
STEP_WHEN_DONE_ERROR = (
    "allow_step_when_done=True is not supported (torchrl 0.4 deprecated it too): reset the "
    'done sub-envs with a partial reset ("_reset" entries, or env.step_and_maybe_reset).'
)
MEMMAP_ERROR = (
    "memmap=True is not supported: the batched env's buffers live in shared memory "
    "(torchrl 0.4 also refuses memmap with shared_memory); memory-map the collected data "
    "instead, e.g. td.memmap_()."
)
USE_BUFFERS_ERROR = "use_buffers must be None, True or False, got {got!r}."
POLICY_PROOF_WARNING = "policy_proof is ignored (as in torchrl 0.4, which never reads it)."
NOT_STARTED_ERROR = (
    "{cls} has no attribute {name!r}; sub-env attributes are forwarded only once the "
    "env is started (call env.start() or env.reset() first)."
)


def move(td: TensorDictBase, device: torch.device, non_blocking: bool) -> TensorDictBase:
    """``td.to(device)``; with ``non_blocking``, a copy off a GPU is waited for before return.

    A non-blocking copy to the host returns before the data has arrived: reading it then
    gives stale values without an error. Copies onto a GPU are ordered on its stream, so
    they may stay asynchronous.
    """
    moved = td.to(device, non_blocking=non_blocking)
    if non_blocking and torch.device(device).type == "cpu" and td.device is not None:
        if td.device.type == "cuda":
            torch.cuda.synchronize(td.device)
    return moved


def _spec_keys(meta: EnvMetaData, *names: str) -> list:
    keys = []
    for name in names:
        spec = meta.output_spec[name] if name in meta.output_spec.keys() else meta.input_spec[name]
        keys += [key for key in spec.keys(True, True) if key not in keys]
    return keys


def _parts(tensordict: TensorDictBase) -> list[TensorDictBase]:
    """The per-worker entries of a batched tensordict (dim 0)."""
    if isinstance(tensordict, LazyStackedTensorDict) and tensordict.stack_dim == 0:
        return list(tensordict.tensordicts)
    return list(tensordict.unbind(0))


def step_rows(mask: torch.Tensor, num_workers: int) -> list[int] | None:
    """The sub-envs a ``"_step"`` mask asks to step (any of their flags set), or None for all.

    Examples:
        >>> import torch
        >>> step_rows(torch.tensor([[True, False], [False, False], [False, True]]), 3)
        [0, 2]
        >>> step_rows(torch.ones(2, dtype=torch.bool), 2) is None
        True
    """
    flags = mask.reshape(num_workers, -1).any(-1).tolist()
    if all(flags):
        return None
    return [index for index, flag in enumerate(flags) if flag]


class _BatchedInputs:
    """A batched env's step check, as ``EnvBase.step`` calls it (``check(tensordict)``)."""

    __slots__ = ("env",)

    def __init__(self, env: BatchedEnvBase) -> None:
        self.env = env

    def check(self, tensordict: TensorDictBase) -> list | None:
        return self.env._check_inputs(tensordict, "step", (ACTION, STATE))


def step_function(
    env: EnvBase, post_process: bool = True
) -> Callable[[TensorDictBase], TensorDictBase]:
    """``td -> next td`` for ``env``: ``env.step`` without nesting the result under "next".

    When the env keeps EnvBase's ``step``, this calls its ``_step`` (and, if
    ``post_process``, ``_step_proc_data``) hooks directly, which is what ``step`` does
    minus merging into the input tensordict. A batched env of identical sub-envs skips
    the post-processing: its own ``step`` runs it once on the stacked result.
    """
    if type(env).step is not EnvBase.step:
        return lambda td: env.step(td).get("next")
    if not post_process:
        return env._step
    inner, proc = env._step, env._step_proc_data
    return lambda td: proc(inner(td))


class BatchedEnvBase(EnvBase):
    """Common machinery of ``SerialEnv`` and ``ParallelEnv`` (not used directly).

    A step's action goes to every sub-env, so a missing action leaf raises (``KeyError``
    naming it) before any sub-env steps.

    Examples:
        >>> from rlbatched import SerialEnv
        >>> from rlmocks import CountingEnv
        >>> isinstance(SerialEnv(2, CountingEnv), BatchedEnvBase)
        True
    """

    def __init__(
        self,
        num_workers: int,
        create_env_fn: Callable[..., EnvBase] | Sequence[Callable[..., EnvBase]],
        create_env_kwargs: dict | Sequence[dict] | None = None,
        share_individual_td: bool | None = None,
        shared_memory: bool = True,
        device: torch.device | str | int | None = None,
        serial_for_single: bool = False,
        *,
        pin_memory: bool = False,
        memmap: bool = False,
        policy_proof: Callable | None = None,
        allow_step_when_done: bool = False,
        non_blocking: bool = False,
        use_buffers: bool | None = None,
    ):
        if pin_memory:
            raise ValueError(PIN_MEMORY_ERROR)
        if allow_step_when_done:
            raise ValueError(STEP_WHEN_DONE_ERROR)
        if memmap:
            raise ValueError(MEMMAP_ERROR)
        if policy_proof is not None:
            warnings.warn(POLICY_PROOF_WARNING, UserWarning, stacklevel=3)
        if use_buffers not in (None, True, False):
            raise TypeError(USE_BUFFERS_ERROR.format(got=use_buffers))
        if num_workers < 1:
            raise ValueError(NUM_WORKERS_ERROR.format(got=num_workers))
        if callable(create_env_fn):
            fns = [create_env_fn] * num_workers
        else:
            fns = list(create_env_fn)
            if len(fns) != num_workers:
                raise ValueError(NUM_FNS_ERROR.format(got=len(fns), expected=num_workers))
        single_task = len({id(fn) for fn in fns}) == 1
        if share_individual_td is False and not single_task:
            raise ValueError(SHARE_INDIVIDUAL_TD_ERROR)
        if create_env_kwargs is None:
            kwargs = [{} for _ in range(num_workers)]
        elif isinstance(create_env_kwargs, dict):
            kwargs = [dict(create_env_kwargs) for _ in range(num_workers)]
        else:
            kwargs = [dict(kw) for kw in create_env_kwargs]
            if len(kwargs) != num_workers:
                raise ValueError(NUM_KWARGS_ERROR.format(got=len(kwargs), expected=num_workers))

        super().__init__(device=device)
        self.num_workers = num_workers
        self.create_env_fn = fns
        self.create_env_kwargs = kwargs
        self.shared_memory = shared_memory
        self.serial_for_single = serial_for_single
        self.non_blocking = non_blocking
        self._single_task = single_task
        # the argument; once the metadata are known, whether the buffers are stacked lazily
        self.share_individual_td = share_individual_td
        # the argument; once the metadata are known, the decision (_set_metadata)
        self._use_buffers_arg = use_buffers
        self._use_buffers: bool | None = None
        self._device_arg = self.__dict__["_device"]
        # set by close() (or a lost worker), cleared by reset(): until then, stepping raises
        self._must_reset = False
        self.__dict__["_metas"] = None
        metas = self._initial_metadata(fns, kwargs)
        if metas is not None:
            self._set_metadata(metas)

    def _initial_metadata(
        self, fns: list[Callable], kwargs: list[dict]
    ) -> list[EnvMetaData] | None:
        """The sub-envs' metadata known at construction, or None (a subclass reads them later).

        Here: each distinct factory builds one sub-env in this process, which is read.
        """
        seen: dict[int, EnvMetaData] = {}
        metas = []
        for fn, kw in zip(fns, kwargs):
            if id(fn) not in seen:
                seen[id(fn)] = EnvMetaData.from_env(fn(**kw))
            metas.append(seen[id(fn)])
        return metas

    def _set_metadata(self, metas: list[EnvMetaData]) -> None:
        """Record the sub-envs' metadata: the batch size, device and specs follow from them.

        The specs are those of worker 0 expanded to the batch when every worker's are the same,
        else the workers' specs stacked lazily (as the buffers then are, unless
        ``share_individual_td`` says otherwise).
        """
        distinct = list({id(m): m for m in metas}.values())
        for other in distinct:
            check_no_empty_specs(other, type(self).__name__)
        use_buffers = self._use_buffers_arg
        if use_buffers is None:
            use_buffers = not any(other.has_dynamic_specs for other in distinct)
        self._use_buffers = use_buffers
        meta = metas[0]
        homogeneous = all(other is meta or meta.same_specs(other) for other in metas[1:])
        share = self.share_individual_td
        if share is False and not homogeneous:
            check_schemas(metas)
        self.__dict__["_metas"] = metas
        batch_size = torch.Size([self.num_workers, *meta.batch_size])
        out_device = self._device_arg if self._device_arg is not None else meta.device
        self.__dict__["_batch_size"] = batch_size
        self.__dict__["_device"] = out_device
        self.__dict__["_batch_locked"] = meta.batch_locked
        # one dense shared tensordict, or one per worker stacked lazily
        self._lazy_stack = (not homogeneous) if share is None else share
        self.share_individual_td = self._lazy_stack
        self._env_device = meta.device

        if homogeneous:
            output_spec = meta.output_spec.expand(batch_size)
            input_spec = meta.input_spec.expand(batch_size)
        else:
            output_spec = torch.stack([m.output_spec for m in metas], 0)
            input_spec = torch.stack([m.input_spec for m in metas], 0)
        if out_device is not None and out_device != meta.device:
            output_spec = output_spec.to(out_device)
            input_spec = input_spec.to(out_device)
        self.full_action_spec = input_spec["full_action_spec"]
        self.full_state_spec = input_spec["full_state_spec"]
        self.full_observation_spec = output_spec["full_observation_spec"]
        self.full_reward_spec = output_spec["full_reward_spec"]
        self.full_done_spec = output_spec["full_done_spec"]
        self.empty_cache()

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Create the sub-envs (no-op when already started)."""
        if not self._started():
            self._start_workers()

    def _started(self) -> bool:
        raise NotImplementedError

    def _open_for_step(self) -> None:
        """Start a new env lazily; refuse to step a closed env that was not reset since."""
        if self._must_reset:
            raise EnvClosedError(CLOSED_ERROR.format(cls=type(self).__name__))
        if not self._started():
            self._start_workers()

    def _open_for_reset(self, masks: dict | None) -> None:
        """Start the env if needed; a closed env reopens on a full reset only."""
        if self._must_reset and masks is not None:
            if not all(bool(mask.all()) for mask in masks.values()):
                raise EnvClosedError(PARTIAL_RESET_CLOSED_ERROR.format(cls=type(self).__name__))
        if not self._started():
            self._start_workers()

    def _start_workers(self) -> None:
        raise NotImplementedError

    def update_kwargs(self, kwargs: dict | Sequence[dict]) -> None:
        """Update the keyword arguments given to ``create_env_fn`` at the next start."""
        if isinstance(kwargs, dict):
            for worker_kwargs in self.create_env_kwargs:
                worker_kwargs.update(kwargs)
        else:
            kwargs = list(kwargs)
            if len(kwargs) != self.num_workers:
                raise ValueError(
                    NUM_KWARGS_ERROR.format(got=len(kwargs), expected=self.num_workers)
                )
            for worker_kwargs, new in zip(self.create_env_kwargs, kwargs):
                worker_kwargs.update(new)

    def _set_seed(self, seed: int | None) -> None:
        self.set_seed(seed)

    # ------------------------------------------------------------------ input checks
    def _input_rules(self, roles: tuple[str, ...]) -> tuple:
        """Rules for the leaves of the given roles, computed once (until a spec changes).

        ``("flat", keys, rules)`` when no spec holds a lazy stack, else ``("tree", rules)``
        with one ``TreeRules`` per worker.
        """

        def compute() -> tuple:
            specs = {role: self._role_spec(role) for role in roles}
            rules = None if self._lazy_stack else flat_rules(specs)
            if rules is not None:
                keys = [key if isinstance(key, tuple) else (key,) for key in (r.key for r in rules)]
                return ("flat", keys, rules)
            per_meta: dict[int, TreeRules] = {}
            trees = []
            for meta in self._metas:
                if id(meta) not in per_meta:
                    meta_specs = {role: self._role_spec(role, meta) for role in roles}
                    per_meta[id(meta)] = TreeRules(meta_specs)
                trees.append(per_meta[id(meta)])
            return ("tree", trees)

        return self._cache_get(f"batched_input_rules:{','.join(roles)}", compute)

    def _role_spec(self, role: str, meta: EnvMetaData | None = None) -> Any:
        name = {
            ACTION: "full_action_spec",
            STATE: "full_state_spec",
            OBSERVATION: "full_observation_spec",
            DONE: "full_done_spec",
        }[role]
        if meta is None:
            return getattr(self, name)
        specs = meta.input_spec if role in (ACTION, STATE) else meta.output_spec
        return specs[name]

    @property
    def _action_required(self) -> bool:
        # a step needs the action where a sub-env's does (their metadata say; rlcore's contract)
        def compute() -> bool:
            if self.__dict__.get("_metas") is None:
                self._ensure_metadata()  # a ParallelEnv whose workers did not report yet
            return any(meta.action_required for meta in self._metas)

        return self._cache_get("action_required", compute)

    @property
    def _step_inputs(self) -> _BatchedInputs | bool:
        """The step's input check (``EnvBase.step`` runs it): the rules of ``rlcore.step_inputs``
        compiled for the batch, per sub-env where their specs are stacked lazily."""
        if not self._checks_step_inputs:
            return False
        return self._cache_get("step_inputs", lambda: _BatchedInputs(self))

    def _check_inputs(self, tensordict: TensorDictBase, phase: str, roles: tuple) -> list | None:
        """Check ``tensordict``'s leaves of ``roles``; return what not to pass on, per worker.

        Raises ``KeyError`` for a missing action (on a step) and ``ValueError`` for a
        malformed action or state leaf. Returns None when every leaf is passed on, else one
        list of keys per worker.
        """
        where = f"{type(self).__name__}.{phase}"
        require = phase == "step" and self._action_required
        rules = self._input_rules(roles)
        if rules[0] == "flat":
            _, keys, flat = rules
            skipped = check_flat(flat, get_many(tensordict, keys), where, require)
            if skipped is None:
                return None
            return [[keys[i] for i in skipped]] * self.num_workers
        per_worker = [
            tree.check(part, where, require) for tree, part in zip(rules[1], _parts(tensordict))
        ]
        return per_worker if any(per_worker) else None

    # ------------------------------------------------------------------ helpers
    def _check_batch(self, tensordict: TensorDictBase) -> None:
        if tensordict.batch_size != self.batch_size:
            raise RuntimeError(
                BATCH_ERROR.format(
                    got=tuple(tensordict.batch_size),
                    expected=tuple(self.batch_size),
                    num_workers=self.num_workers,
                )
            )

    def _reset_masks(self, tensordict: TensorDictBase | None) -> dict | None:
        """The ``_reset`` entries of ``tensordict`` (root and nested), or None for a full reset."""
        if tensordict is None:
            return None
        masks = {}
        for key in self.reset_keys:
            mask = tensordict.get(key, None)
            if mask is not None:
                masks[key] = mask
        return masks or None

    def _workers_to_reset(self, masks: dict | None) -> list[bool]:
        if masks is None:
            return [True] * self.num_workers
        needs = None
        for mask in masks.values():
            per_worker = mask.flatten(1).any(-1) if mask.dim() > 1 else mask
            needs = per_worker if needs is None else needs | per_worker
        return needs.tolist()

    def _reset_output_keys(self, index: int) -> list:
        """Keys a reset of worker ``index`` returns: observations, done flags and state."""
        return _spec_keys(
            self._metas[index], "full_observation_spec", "full_done_spec", "full_state_spec"
        )

    def _input_keys(self, index: int) -> list:
        """Keys a step of worker ``index`` reads: actions, state and observations."""
        return _spec_keys(
            self._metas[index], "full_action_spec", "full_state_spec", "full_observation_spec"
        )

    @property
    def use_buffers(self) -> bool | None:
        """Whether the sub-envs' data go through buffers laid out once from their specs (None
        until the specs are known: a ``ParallelEnv`` learns them when its workers start).

        The ``use_buffers`` argument; left unset, True unless a sub-env has dynamic specs
        (``EnvMetaData.has_dynamic_specs``), as in torchrl. Without buffers, every step and
        reset stacks the sub-envs' own outputs (densely where they stack, else lazily).
        """
        return self._use_buffers

    def _stack(self, tds: list[TensorDictBase]) -> TensorDictBase:
        if not self._use_buffers:
            return LazyStackedTensorDict.maybe_dense_stack(tds)
        if self._lazy_stack:
            return LazyStackedTensorDict(*tds, stack_dim=0)
        return _tensordict_ops.stack(tds)

    # ------------------------------------------------------------------ forwarding
    def _forward_attr(self, name: str) -> Any:
        raise NotImplementedError

    def __getattr__(self, name: str) -> Any:
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name.startswith("_") or "_metas" not in self.__dict__:
                raise
            if self.__dict__["_metas"] is None or not self._started():
                raise AttributeError(
                    NOT_STARTED_ERROR.format(cls=type(self).__name__, name=name)
                ) from None
        return self._forward_attr(name)

    def __repr__(self) -> str:
        if self.__dict__.get("_metas") is None:  # not started: reading the specs would start it
            return f"{type(self).__name__}(num_workers={self.num_workers}, not started)"
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, "
            f"batch_size={tuple(self.batch_size)}, device={self.device})"
        )

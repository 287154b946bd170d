"""``EnvBase``: the environment base class (reset / step / rollout on TensorDicts)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rlcore._dense_step import DenseStepper
from rlcore._done import any_true, flag_done, reduce_to_batch
from rlcore._done_plan import complete_done, done_levels, merge_reset
from rlcore._env_meta import EnvMeta
from rlcore._env_specs import EnvSpecsMixin
from rlcore._rollout import run_rollout
from rlcore._step_mdp import StepMDP
from rlspecs import Composite, parse_device
from rlspecs.private_apis import td_entries, td_is_locked, td_set_str

__all__ = ["EnvBase"]

_NO_DIMS = torch.Size(())

BATCH_LOCKED_READ_ONLY = "batch_locked is a read-only property"
BATCH_MISMATCH = "Expected a tensordict with shape==env.batch_size, got {got} and {expected}"
RESET_INPLACE = (
    "{cls}._reset returned its input tensordict; return a new one (e.g. start from "
    "tensordict.empty()) holding the reset values"
)
RESET_NOT_TD = "{cls}._reset returned a {type}, a TensorDict was expected"
STEP_NOT_TD = "{cls}._step returned a {type}, a TensorDict was expected"
DONE_AFTER_PARTIAL_RESET = (
    "Env done entry {key!r} is True after reset where {reset_key!r} asked for a reset; _reset "
    "must clear it (or build the env with allow_done_after_reset=True)"
)
DONE_AFTER_RESET = (
    "The done entry {key!r} is (partially) True after a call to reset() in env {cls}; _reset "
    "must return done=False (or build the env with allow_done_after_reset=True)"
)
DTYPE_MISMATCH = "expected {name}.dtype to be {expected} but got {got} (key {key!r})"
SHAPE_MISMATCH = "expected {name}.shape to be {expected} but got {got} (key {key!r})"
RAND_ACTION_BATCH = (
    "The input tensordict and the env have different batch sizes: env.batch_size={env} and "
    "tensordict.batch_size={td}; an env that is not batch-locked needs an empty batch_size or "
    "the tensordict's"
)


def _next_seed(seed: int) -> int:
    generator = torch.Generator().manual_seed(seed)
    return int(torch.randint(0, 2**32 - 1, (), generator=generator))


class EnvBase(EnvSpecsMixin, nn.Module, metaclass=EnvMeta):
    """Base class of environments: ``reset``, ``step`` and ``rollout`` on TensorDicts.

    Subclasses implement ``_reset(tensordict)`` (observations, done flags and state at the root,
    nested keys allowed; ``"_reset"`` entries of the input flag the sub-envs to reset),
    ``_step(tensordict)`` (the *next* observations, reward and done flags at the root) and
    ``_set_seed(seed)``, and set their specs with the properties (``observation_spec``,
    ``action_spec``, ``reward_spec``, ``done_spec``, ``state_spec`` or the ``full_*`` ones).
    Missing done leaves are completed (``done`` from ``terminated | truncated`` and back), a leaf
    spec is stored under its default key and the default done spec is ``done`` and
    ``terminated`` booleans of shape ``(*batch_size, 1)``.

    Hooks for wrappers (TransformedEnv, batched envs), all safe to call on any env:

    - ``_step_proc_data(next_td)``: reshapes rewards/done to their specs, completes done flags,
      runs the type checks when ``_run_type_checks``;
    - ``_reset_proc_data(td, td_reset)``: completes done flags, checks done after reset
      (``_reset_check_done``) and merges partial resets into ``td`` (``"_reset"`` entries popped);
    - ``_complete_done(data)``: done completion only;
    - ``_type_check(next_td)``: the dtype/shape checks of ``_step_proc_data``;
    - ``_assert_tensordict_shape(td)``: the batch-size check of ``step``/``reset``;
    - ``_any_done(td)``: whether a root (after ``step_mdp``) is done, root levels prevailing;
    - ``_step_mdp``: the cached ``StepMDP(self, exclude_action=False)`` used by rollout;
    - ``empty_cache()``: forget key lists and plans (any change of the specs calls it);
    - ``_dense_stepper()``: optional, None here; an env with a fixed dense layout returns a
      ``DenseStepper`` that batched envs use to step it straight into their buffers.

    Internal state lives in ``self.__dict__`` (``_device``, ``_batch_size``, ``_output_spec``,
    ``_input_spec``, ``_cache``, ``_run_type_checks``, ``_allow_done_after_reset``,
    ``is_closed``) so the per-step path never goes through ``nn.Module.__setattr__``.

    Examples:
        >>> import torch
        >>> from rlspecs import Composite, Unbounded
        >>> class Counter(EnvBase):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.observation_spec = Composite(count=Unbounded(1))
        ...         self.action_spec = Unbounded(1)
        ...         self.count = torch.zeros(1)
        ...     def _reset(self, td):
        ...         self.count.zero_()
        ...         return TensorDict({"count": self.count.clone()}, [])
        ...     def _step(self, td):
        ...         self.count += 1
        ...         return TensorDict({"count": self.count.clone(), "reward": torch.ones(1),
        ...                            "done": self.count > 2}, [])
        ...     def _set_seed(self, seed):
        ...         pass
        >>> rollout = Counter().rollout(10)
        >>> rollout.batch_size, rollout.names
        (torch.Size([3]), ['time'])
    """

    _batch_locked = True

    def __new__(cls, *args: Any, **kwargs: Any) -> EnvBase:
        # Defaults live in __dict__ from the start, so subclasses may set specs, device or
        # batch_size before calling EnvBase.__init__ (and __del__ is safe on failed inits).
        self = super().__new__(cls)
        self.__dict__.update(
            _device=None,
            _batch_size=torch.Size(()),
            _run_type_checks=False,
            _allow_done_after_reset=False,
            is_closed=False,
            _cache={},
            _output_spec=None,
            _input_spec=None,
        )
        return self

    def __init__(
        self,
        *,
        device: torch.device | str | int | None = None,
        dtype: torch.dtype | None = None,
        batch_size: torch.Size | tuple[int, ...] | None = None,
        run_type_checks: bool = False,
        allow_done_after_reset: bool = False,
    ) -> None:
        super().__init__()
        state = self.__dict__
        if device is not None:
            state["_device"] = parse_device(device)
        if dtype is not None:
            # torchrl's older envs pass their default dtype and may read it back as `self.dtype`;
            # the specs, not this attribute, decide the dtypes of the data
            state["dtype"] = dtype
        if batch_size is not None:
            state["_batch_size"] = torch.Size(batch_size)
        state["_run_type_checks"] = run_type_checks
        state["_allow_done_after_reset"] = allow_done_after_reset

    # ------------------------------------------------------------------ attributes
    @property
    def batch_locked(self) -> bool:
        """Whether inputs must have exactly ``batch_size`` (read-only; class attr ``_batch_locked``)."""
        return self._batch_locked

    @batch_locked.setter
    def batch_locked(self, value: bool) -> None:
        raise RuntimeError(BATCH_LOCKED_READ_ONLY)

    @property
    def batch_size(self) -> torch.Size:
        """The env batch size; setting it reshapes the specs' batch dims."""
        return self.__dict__["_batch_size"]

    @batch_size.setter
    def batch_size(self, value: torch.Size | tuple[int, ...]) -> None:
        value = torch.Size(value)
        reshaped = {}
        for name in ("_output_spec", "_input_spec"):
            spec = self.__dict__.get(name)
            if spec is None:
                continue
            spec = spec.clone()
            for entry in spec.values():
                entry.shape = value
            spec.shape = value
            reshaped[name] = spec
        self.__dict__["_batch_size"] = value
        for name, spec in reshaped.items():
            self._spec_store(name, spec)
        self.empty_cache()

    @property
    def device(self) -> torch.device | None:
        """The env device (None: no device)."""
        return self.__dict__["_device"]

    @device.setter
    def device(self, value: torch.device | str | int | None) -> None:
        self.__dict__["_device"] = parse_device(value)
        self.empty_cache()

    @property
    def run_type_checks(self) -> bool:
        """Whether ``step`` checks the dtypes and shapes of its outputs against the specs."""
        return self.__dict__["_run_type_checks"]

    @run_type_checks.setter
    def run_type_checks(self, value: bool) -> None:
        self.__dict__["_run_type_checks"] = value

    @property
    def batch_dims(self) -> int:
        """Number of batch dims."""
        return len(self.batch_size)

    @property
    def shape(self) -> torch.Size:
        """The batch size (torchrl's alias)."""
        return self.batch_size

    def ndimension(self) -> int:
        """Number of batch dims (torchrl's alias of ``batch_dims``)."""
        return len(self.batch_size)

    @property
    def ndim(self) -> int:
        """Number of batch dims (torchrl's alias of ``batch_dims``)."""
        return len(self.batch_size)

    def numel(self) -> int:
        """Number of sub-envs (product of the batch size)."""
        return self.batch_size.numel()

    def add_truncated_keys(self) -> EnvBase:
        """Adds a ``"truncated"`` entry beside every done key that lacks one; returns the env.

        The new entries copy their done key's spec. An env that does not write them gets
        them filled with False at each step and reset, like any done entry it leaves out, so
        a transform or wrapper that truncates episodes (e.g. ``StepCounter``) has a key to set.

        Examples:
            >>> env = MyEnv().add_truncated_keys()
            >>> env.done_keys
            ['done', 'terminated', 'truncated']
            >>> env.rollout(3)["next", "truncated"].any().item()
            False
        """
        done_spec = self.full_done_spec.clone()
        for key in self.done_keys:
            parent = key[:-1] if isinstance(key, tuple) else ()
            truncated = (*parent, "truncated") if parent else "truncated"
            if truncated not in done_spec.keys(include_nested=True):
                done_spec[truncated] = done_spec[key].clone()
        self.full_done_spec = done_spec
        return self

    @property
    def specs(self) -> Composite:
        """A Composite holding ``output_spec`` and ``input_spec``."""
        return Composite(
            output_spec=self.output_spec, input_spec=self.input_spec, shape=self.batch_size
        )

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Envs are not called like modules: use ``step``, ``reset`` or ``rollout``."""
        raise NotImplementedError("EnvBase.forward is not used; call step, reset or rollout")

    # ------------------------------------------------------------------ subclass interface
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _step(tensordict)")

    def _reset(self, tensordict: TensorDictBase | None, **kwargs: Any) -> TensorDictBase:
        raise NotImplementedError(f"{type(self).__name__} must implement _reset(tensordict)")

    def _set_seed(self, seed: int | None) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _set_seed(seed)")

    def _dense_stepper(self) -> DenseStepper | None:
        """A ``DenseStepper`` for batched envs to step this env into their buffers, or None.

        Optional (None: batched envs stack this env's tensordicts); see ``rlcore._dense_step``.
        Batched envs ask ``rlcore._dense_step.dense_stepper(env)``, which caches the answer.
        """
        return None

    # ------------------------------------------------------------------ plans (cached)
    @property
    def _done_levels(self) -> list:
        return self._cache_get("done_levels", lambda: done_levels(self.full_done_spec))

    @property
    def _reward_shapes(self) -> list:
        return self._cache_get(
            "reward_shapes",
            lambda: [(key, self.full_reward_spec[key].shape) for key in self.reward_keys],
        )

    @property
    def _step_mdp(self) -> StepMDP:
        return self._cache_get("step_mdp", lambda: StepMDP(self, exclude_action=False))

    @property
    def _any_done_keys(self) -> list:
        """Done leaves deciding whether a root is done: a level's leaves prevail over sub-levels.

        Within a level, ``done`` alone is read when present (it is ``terminated | truncated``).
        """
        return self._cache_get(
            "any_done_keys", lambda: _prevailing_done_keys(self.full_done_spec, ())
        )

    @property
    def _flat_done(self) -> bool:
        """True when every done leaf is at the root."""
        return self._cache_get("flat_done", lambda: all(isinstance(k, str) for k in self.done_keys))

    def _leading_dims(self, data: TensorDictBase) -> torch.Size:
        batch_size = self.batch_size
        if not batch_size:
            return data.batch_size
        return data.batch_size[: data.batch_dims - len(batch_size)]

    # ------------------------------------------------------------------ step
    def _assert_tensordict_shape(self, tensordict: TensorDictBase) -> None:
        batch_size = self.__dict__["_batch_size"]
        if (self._batch_locked or batch_size) and tensordict.batch_size != batch_size:
            raise RuntimeError(
                BATCH_MISMATCH.format(got=tensordict.batch_size, expected=batch_size)
            )

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Runs one step: writes ``_step``'s results under ``"next"`` and returns ``tensordict``.

        Entries already under ``"next"`` in the input are kept where ``_step`` does not write.

        Raises:
            RuntimeError: the tensordict's batch size is not the env's (when batch-locked or the
                env batch is not empty).
        """
        self._assert_tensordict_shape(tensordict)
        next_td = self._step(tensordict)
        if type(next_td) is not TensorDict and not isinstance(next_td, TensorDictBase):
            raise TypeError(
                STEP_NOT_TD.format(cls=type(self).__name__, type=type(next_td).__name__)
            )
        next_td = self._step_proc_data(next_td)
        _set_next(tensordict, next_td)
        return tensordict

    @property
    def _complete_step_keys(self) -> list | tuple:
        """``[(key, shape)]`` of every reward and done leaf when all sit at the root, else ``()``.

        A plain step output holding each of these with exactly that shape needs neither
        reward reshaping nor done completion (see ``_step_proc_data``). The cache would
        recompute a None on every call, hence the empty tuple.
        """

        def plan() -> list | tuple:
            levels = self._done_levels
            if any(level.prefix for level in levels) or any(
                type(key) is not str for key, _ in self._reward_shapes
            ):
                return ()
            keys = list(self._reward_shapes)
            for level in levels:
                keys.extend(zip(level.names, level.shapes))
            return keys

        return self._cache_get("complete_step_keys", plan)

    def _step_proc_data(self, next_td: TensorDictBase) -> TensorDictBase:
        keys = self.__dict__["_cache"].get("complete_step_keys")
        if keys is None:
            keys = self._complete_step_keys
        if not self._batch_locked:
            keys = None
        if keys and type(next_td) is TensorDict:
            # fast path: every reward and done leaf is already there with its spec shape, so
            # the general path below would change nothing (it only reshapes or fills leaves)
            entries = td_entries(next_td)
            for key, shape in keys:
                value = entries.get(key)
                if not isinstance(value, torch.Tensor) or value.shape != shape:
                    break
            else:
                if self.__dict__["_run_type_checks"]:
                    self._type_check(next_td)
                return next_td
        leading = self._leading_dims(next_td) if not self._batch_locked else _NO_DIMS
        for key, shape in self._reward_shapes:
            reward = _entry(next_td, key)
            if reward is None:
                continue
            expected = leading + shape if leading else shape
            if reward.shape != expected and reward.numel() == expected.numel():
                next_td.set(key, reward.reshape(expected))
        complete_done(self._done_levels, next_td, leading)
        if self.__dict__["_run_type_checks"]:
            self._type_check(next_td)
        return next_td

    def _complete_done(self, data: TensorDictBase) -> TensorDictBase:
        leading = self._leading_dims(data) if not self._batch_locked else _NO_DIMS
        return complete_done(self._done_levels, data, leading)

    def _type_check(self, next_td: TensorDictBase) -> None:
        """Checks dtypes (done, reward, observations) and observation shapes against the specs."""
        output_spec = self.output_spec
        leading = self._leading_dims(next_td) if not self._batch_locked else _NO_DIMS
        groups = (
            ("done", output_spec["full_done_spec"]),
            ("reward", output_spec["full_reward_spec"]),
            ("observation", output_spec["full_observation_spec"]),
        )
        for name, spec in groups:
            for key in spec.keys(True, True):
                value = next_td.get(key, None)
                if not isinstance(value, torch.Tensor):
                    continue
                leaf = spec[key]
                if value.dtype != leaf.dtype:
                    raise TypeError(
                        DTYPE_MISMATCH.format(
                            name=name, expected=leaf.dtype, got=value.dtype, key=key
                        )
                    )
                expected = leading + leaf.shape
                if (
                    name == "observation"
                    and all(s >= 0 for s in expected)
                    and value.shape != expected
                ):
                    raise TypeError(
                        SHAPE_MISMATCH.format(
                            name=name, expected=expected, got=value.shape, key=key
                        )
                    )

    # ------------------------------------------------------------------ reset
    def reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        """Resets the env (only the sub-envs flagged by ``"_reset"`` entries, when present).

        Returns the reset observations, done flags and state; when ``tensordict`` is given it is
        updated in place (only where reset) and returned, with its ``"_reset"`` entries removed.
        """
        if tensordict is not None:
            self._assert_tensordict_shape(tensordict)
        select_reset_only = kwargs.pop("select_reset_only", False)
        reset_input = tensordict
        if select_reset_only and tensordict is not None:
            reset_input = tensordict.select(*self.reset_keys, strict=False)
        tensordict_reset = (
            self._reset(reset_input, **kwargs) if kwargs else self._reset(reset_input)
        )
        if tensordict_reset is reset_input and reset_input is not None:
            raise RuntimeError(RESET_INPLACE.format(cls=type(self).__name__))
        if not isinstance(tensordict_reset, TensorDictBase):
            raise RuntimeError(
                RESET_NOT_TD.format(cls=type(self).__name__, type=type(tensordict_reset).__name__)
            )
        return self._reset_proc_data(tensordict, tensordict_reset)

    def _reset_proc_data(
        self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        self._complete_done(tensordict_reset)
        self._reset_check_done(tensordict, tensordict_reset)
        if tensordict is None:
            return tensordict_reset
        return merge_reset(tensordict, tensordict_reset, self.reset_keys)

    def _reset_check_done(
        self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase
    ) -> None:
        if self.__dict__["_allow_done_after_reset"]:
            return
        checked: list[tuple[str, ...]] = []
        for reset_key, group in zip(self.reset_keys, self.done_keys_groups):
            path = (reset_key,) if isinstance(reset_key, str) else reset_key
            if any(path[: len(root)] == root for root in checked):
                continue
            checked.append(path[:-1])
            reset = _entry(tensordict, reset_key) if tensordict is not None else None
            for done_key in group:
                done = _entry(tensordict_reset, done_key)
                if done is None or not bool(done.any()):
                    continue
                if reset is None:
                    raise RuntimeError(
                        DONE_AFTER_RESET.format(key=done_key, cls=type(self).__name__)
                    )
                mask = reset
                if mask.ndim > done.ndim:
                    mask = reduce_to_batch(mask, done.shape)
                mask = mask.reshape(*mask.shape, *([1] * (done.ndim - mask.ndim)))
                if bool((done & mask).any()):
                    raise RuntimeError(
                        DONE_AFTER_PARTIAL_RESET.format(key=done_key, reset_key=reset_key)
                    )

    # ------------------------------------------------------------------ done / auto-reset
    def _any_done(self, tensordict: TensorDictBase) -> bool:
        for key in self._any_done_keys:
            value = _entry(tensordict, key)
            if value is not None and any_true(value):
                return True
        return False

    def maybe_reset(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Resets the sub-envs that are done in ``tensordict`` (a root, after ``step_mdp``)."""
        keys = self.__dict__["_cache"].get("root_done_keys")
        if keys is None:
            keys = self._cache_get(
                "root_done_keys", lambda: tuple(self._any_done_keys) if self._flat_done else ()
            )
        if keys and type(tensordict) is TensorDict:
            entries = td_entries(tensordict)
            flag = None
            for key in keys:
                value = entries.get(key)
                if value is not None:
                    flag = value if flag is None else flag | value
            if flag is None or not any_true(flag):
                return tensordict
            td_set_str(tensordict, "_reset", flag.clone())
        elif not flag_done(tensordict, self.full_done_spec, "_reset"):
            return tensordict
        return self.reset(tensordict, select_reset_only=True)

    def step_and_maybe_reset(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """Steps, then returns ``(transition, root of the next step)``, resetting done sub-envs.

        Examples:
            >>> data, root = env.step_and_maybe_reset(env.rand_action(env.reset()))
            >>> "next" in data.keys(), "next" in root.keys()
            (True, False)
        """
        device = self.__dict__["_device"]
        if device is not None and tensordict.device != device:
            tensordict = tensordict.to(device)
        tensordict = self.step(tensordict)
        step_mdp = self.__dict__["_cache"].get("step_mdp") or self._step_mdp
        return tensordict, self.maybe_reset(step_mdp(tensordict))

    # ------------------------------------------------------------------ rollout
    def rollout(
        self,
        max_steps: int,
        policy: Callable[[TensorDictBase], Any] | None = None,
        callback: Callable[[EnvBase, TensorDictBase], Any] | None = None,
        *,
        auto_reset: bool = True,
        auto_cast_to_device: bool = False,
        break_when_any_done: bool = True,
        return_contiguous: bool = True,
        tensordict: TensorDictBase | None = None,
    ) -> TensorDictBase:
        """Runs up to ``max_steps`` steps and returns them stacked: shape ``(*batch, T)``.

        The last dim is named ``"time"``. ``policy`` may be a TensorDict module or any callable
        taking and returning (or filling) a tensordict, or an ``nn.Module`` on tensors (called on
        the observations, its output becomes the action); None draws random actions.

        Args:
            max_steps: number of steps.
            policy: the policy (default: random actions from the action spec).
            callback: called as ``callback(env, transition)`` after every step.
            auto_reset: reset first (with ``tensordict`` as input); otherwise ``tensordict`` is
                the first root (done sub-envs in it are reset).
            auto_cast_to_device: move data to the policy's device for the policy and back.
            break_when_any_done: stop at the first done; otherwise done sub-envs are reset in
                place and the rollout goes on.
            return_contiguous: stack densely; False gives lazy stacks for heterogeneous data.
            tensordict: the input of reset (or the first root when ``auto_reset=False``).
        """
        return run_rollout(
            self,
            max_steps,
            policy,
            callback,
            auto_reset=auto_reset,
            auto_cast_to_device=auto_cast_to_device,
            break_when_any_done=break_when_any_done,
            return_contiguous=return_contiguous,
            tensordict=tensordict,
        )

    # ------------------------------------------------------------------ random actions, fakes
    def rand_action(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Writes a random action from the action spec into ``tensordict`` (or a new one)."""
        shape = _NO_DIMS
        if not self._batch_locked and tensordict is not None:
            if not self.batch_size:
                shape = tensordict.batch_size
            elif tensordict.batch_size != self.batch_size:
                raise RuntimeError(
                    RAND_ACTION_BATCH.format(env=self.batch_size, td=tensordict.batch_size)
                )
        if type(tensordict) is TensorDict and not td_is_locked(tensordict):
            leaves = self.__dict__["_cache"].get("root_action_leaves")
            if leaves is None:
                leaves = self._root_action_leaves()
            if (
                leaves
                and (tensordict.device is None or tensordict.device == self.device)
                and (shape or tensordict.batch_size == self.batch_size)
            ):
                # every action leaf sits at the root: sample and write each directly (about
                # twice as fast as sampling the composite and updating from it)
                for key, spec in leaves:
                    td_set_str(tensordict, key, spec.rand(shape))
                return tensordict
        action = self.full_action_spec.rand(shape)
        if tensordict is None:
            return action
        return tensordict.update(action)

    def _root_action_leaves(self) -> list | tuple:
        """``[(key, spec)]`` of the action leaves when all sit at the root, else ``()``."""

        def leaves() -> list | tuple:
            keys = self.action_keys
            if not all(type(key) is str for key in keys):
                return ()
            full = self.full_action_spec
            return [(key, full[key]) for key in keys]

        return self._cache_get("root_action_leaves", leaves)

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Steps with a random action."""
        return self.step(self.rand_action(tensordict))

    def fake_tensordict(self) -> TensorDictBase:
        """A zero-filled transition with the keys, shapes and dtypes of a rollout step."""
        observation = self.full_observation_spec.zero()
        done = self.full_done_spec.zero()
        data = self.full_state_spec.zero()
        data.update(self.full_action_spec.zero())
        data.update(observation)
        data.update(done.clone())
        next_data = observation.clone()
        next_data.update(self.full_reward_spec.zero())
        next_data.update(done)
        data.set("next", next_data)
        data.batch_size = self.batch_size
        if self.device is not None:
            data = data.to(self.device)
        return data

    def append_transform(self, transform: Any) -> EnvBase:
        """This env seen through `transform`: a new `TransformedEnv` (torchrl 0.4's shortcut).

        Examples:
            >>> from rlcore.transforms import StepCounter
            >>> env.append_transform(StepCounter()).reset()["step_count"]
            tensor([0])
        """
        from .transforms import TransformedEnv  # transforms build on this module

        return TransformedEnv(self, transform)

    # ------------------------------------------------------------------ lifecycle
    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seeds torch and the env; returns the seed for the next env (``seed`` if static).

        Examples:
            >>> next_seed = env.set_seed(0)
        """
        if seed is not None:
            torch.manual_seed(seed)
        self._set_seed(seed)
        if seed is None or static_seed:
            return seed
        return _next_seed(seed)

    @classmethod
    def register_gym(
        cls,
        id: str,  # noqa: A002 (torchrl's and gymnasium's name)
        *,
        entry_point: Callable[..., EnvBase] | None = None,
        transform: Any = None,
        info_keys: list[NestedKey] | None = None,
        backend: Any = None,
        to_numpy: bool = False,
        reward_threshold: float | None = None,
        nondeterministic: bool = False,
        max_episode_steps: int | None = None,
        order_enforce: bool = True,
        autoreset: bool = False,
        disable_env_checker: bool = False,
        apply_api_compatibility: bool = False,
        **kwargs: Any,
    ) -> None:
        """Registers this env class (or ``entry_point``) in gymnasium under ``id``.

        ``gymnasium.make(id)`` then returns a ``gymnasium.Env`` backed by a new env built with
        ``kwargs`` (``make_vec`` for batched envs). Implemented by ``rllibs`` (found through
        the ``rlcore.register_gym`` entry point; ``pip install "rllibs[gym]"``), whose
        ``register_gym`` documents each argument.

        Examples:
            >>> try:  # then gymnasium.make("MyEnv-v0") returns a gymnasium.Env of a new MyEnv
            ...     MyEnv.register_gym("MyEnv-v0", to_numpy=True)
            ... except ImportError:  # rllibs[gym] is not installed
            ...     pass
        """
        from rlcore._gym_registration import find_gym_registration

        find_gym_registration(f"{cls.__name__}.register_gym")(
            cls,
            id,
            entry_point=entry_point,
            transform=transform,
            info_keys=info_keys,
            backend=backend,
            to_numpy=to_numpy,
            reward_threshold=reward_threshold,
            nondeterministic=nondeterministic,
            max_episode_steps=max_episode_steps,
            order_enforce=order_enforce,
            autoreset=autoreset,
            disable_env_checker=disable_env_checker,
            apply_api_compatibility=apply_api_compatibility,
            **kwargs,
        )

    def to(self, device: torch.device | str | int) -> EnvBase:
        """Moves the specs, parameters and buffers to ``device``."""
        device = parse_device(device)
        if device == self.device:
            return self
        self._spec_store("_output_spec", self.output_spec.to(device))
        self._spec_store("_input_spec", self.input_spec.to(device))
        self.__dict__["_device"] = device
        self.empty_cache()
        return super().to(device)

    def cpu(self) -> EnvBase:
        """Moves the env to the CPU (specs included)."""
        return self.to("cpu")

    def cuda(self, device: int | None = None) -> EnvBase:
        """Moves the env to a CUDA device (specs included)."""
        return self.to("cuda" if device is None else torch.device("cuda", device))

    def close(self) -> None:
        """Releases the env's resources; ``is_closed`` becomes True."""
        self.__dict__["is_closed"] = True

    def __del__(self) -> None:
        if self.__dict__.get("is_closed", True):
            return
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown may have torn down globals
            pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}(batch_size={self.batch_size}, device={self.device})"


def _entry(tensordict: TensorDictBase, key: NestedKey) -> Any:
    """``tensordict.get(key, None)``, without its key parsing for a plain td and a str key."""
    if type(tensordict) is TensorDict and type(key) is str:
        return td_entries(tensordict).get(key)
    return tensordict.get(key, None)


def _set_next(tensordict: TensorDictBase, next_td: TensorDictBase) -> None:
    plain = type(tensordict) is TensorDict
    preset = td_entries(tensordict).get("next") if plain else tensordict.get("next", None)
    if preset is not None:
        next_td.update(preset.exclude(*next_td.keys(True, True)))
    if (
        plain
        and next_td.batch_size == tensordict.batch_size
        and (tensordict.device is None or next_td.device == tensordict.device)
    ):
        td_set_str(tensordict, "next", next_td)
    else:
        tensordict.set("next", next_td)


def _prevailing_done_keys(spec: Composite, prefix: tuple[str, ...]) -> list:
    names = [name for name, item in spec.items() if not isinstance(item, Composite)]
    if names:
        # "done" is terminated | truncated by contract: it alone tells whether the level ended
        if "done" in names:
            names = ["done"]
        return [(*prefix, name) if prefix else name for name in names]
    keys = []
    for name, item in spec.items():
        keys.extend(_prevailing_done_keys(item, (*prefix, name)))
    return keys

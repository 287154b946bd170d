"""``EnvBase``: the environment base class (reset / step / rollout on TensorDicts)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rlcore import _plugins
from rlcore._env_meta import EnvMeta
from rlcore._env_specs import EnvSpecsMixin
from rlcore._partial_steps import PARTIAL_STEP, partial_step
from rlcore._resets import any_true, flag_done
from rlcore._rollout import run_rollout
from rlcore._step_mdp import set_next
from rlcore._step_plan import StepPlanMixin
from rlcore._stepper import Stepper
from rlspecs import parse_device
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
RAND_ACTION_BATCH = (
    "The input tensordict and the env have different batch sizes: env.batch_size={env} and "
    "tensordict.batch_size={td}; an env that is not batch-locked needs an empty batch_size or "
    "the tensordict's"
)


def _next_seed(seed: int) -> int:
    generator = torch.Generator().manual_seed(seed)
    return int(torch.randint(0, 2**32 - 1, (), generator=generator))


class EnvBase(StepPlanMixin, EnvSpecsMixin, nn.Module, metaclass=EnvMeta):
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
    - ``_stepper()``: optional, None here; an env whose step is a library call returns a
      ``Stepper`` (``rlcore._stepper``) that fills buffers straight from the library, which
      the rollout and the batched envs use in place of a tensordict per step.

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
        if "_batch_locked" in kwargs:  # current torchrl's constructor keyword
            self.__dict__["_batch_locked"] = bool(kwargs["_batch_locked"])
        # Specs set on the class before this (current torchrl's mocks do it in their __new__:
        # ``cls._output_spec = ...``) belong to this env: taken off the class, applied through
        # the setters once __init__ has set the batch size and device
        pending = {}
        for name in ("_output_spec", "_input_spec"):
            spec = cls.__dict__.get(name)
            if spec is not None:
                pending[name.strip("_")] = spec.clone()
                delattr(cls, name)
        if pending:
            self.__dict__["_class_specs"] = pending
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
        self._apply_class_specs()

    def _apply_class_specs(self) -> None:
        """Set the specs taken off the class in ``__new__`` (current torchrl's mock pattern)."""
        pending = self.__dict__.pop("_class_specs", None)
        for name, spec in (pending or {}).items():
            device = self.__dict__["_device"]
            setattr(self, name, spec.to(device) if device is not None else spec)

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

    def _stepper(self) -> Stepper | None:
        """A ``Stepper`` filling this env's step buffers straight from its library, or None.

        Optional (None: every path builds a tensordict per step); see ``rlcore._stepper``,
        whose ``stepper_of(env)`` decides whether it applies and caches the answer.
        """
        return None

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
        The input is checked first (``rlcore.step_inputs``): every action leaf present, action
        and state leaves of their spec's shape, with values their spec's dtype represents. A
        ``"_step"`` mask in the input steps only the rows it flags (``rlcore._partial_steps``).

        Raises:
            RuntimeError: the tensordict's batch size is not the env's (when batch-locked or the
                env batch is not empty).
            KeyError: an action leaf is missing (the message names it).
            ValueError: an action or state leaf has another shape than its spec's, or values its
                spec's dtype cannot represent (the message names the key, what was given and
                what was expected).
        """
        state = self.__dict__
        if tensordict.batch_size != state["_batch_size"]:
            self._assert_tensordict_shape(tensordict)
        plain = type(tensordict) is TensorDict
        partial = td_entries(tensordict).get(PARTIAL_STEP) if plain else None
        if partial is not None or (not plain and PARTIAL_STEP in tensordict.keys()):
            return self._partial_step(tensordict)
        rules = state["_cache"].get("step_inputs")
        if rules is None:
            rules = self._step_inputs
        if rules is not False:
            rules.check(tensordict)
        next_td = self._step(tensordict)
        if type(next_td) is not TensorDict and not isinstance(next_td, TensorDictBase):
            raise TypeError(
                STEP_NOT_TD.format(cls=type(self).__name__, type=type(next_td).__name__)
            )
        next_td = self._step_proc_data(next_td)
        set_next(tensordict, next_td)
        return tensordict

    # Whether _step reads a "_step" mask and steps only the rows it flags (batched envs do)
    _supports_partial_steps = False

    def _partial_step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """``step`` of an input holding a ``"_step"`` mask (``rlcore._partial_steps``)."""
        return partial_step(self, tensordict)

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
        actions: Iterable[Any] | None = None,
        auto_reset: bool = True,
        auto_cast_to_device: bool = False,
        break_when_any_done: bool | None = None,
        break_when_all_done: bool | None = None,
        return_contiguous: bool = True,
        tensordict: TensorDictBase | None = None,
        set_truncated: bool = False,
        out: TensorDictBase | None = None,
        trust_policy: bool = False,
        storing_device: torch.device | str | None = None,
    ) -> TensorDictBase:
        """Runs up to ``max_steps`` steps and returns them stacked: shape ``(*batch, T)``.

        The last dim is named ``"time"``. ``policy`` may be a TensorDict module or any callable
        taking and returning (or filling) a tensordict, or an ``nn.Module`` on tensors (called on
        the observations, its output becomes the action); None draws random actions.

        Args:
            max_steps: number of steps.
            policy: the policy (default: random actions from the action spec).
            callback: called as ``callback(env, transition)`` after every step.
            actions: pre-computed actions, one per step, written under the top-level action key
                (instead of a ``policy``; a sized iterable caps ``max_steps`` at its length).
            auto_reset: reset first (with ``tensordict`` as input); otherwise ``tensordict`` is
                the first root (done sub-envs in it are reset).
            auto_cast_to_device: move data to the policy's device for the policy and back.
            break_when_any_done: stop at the first done (default, unless
                ``break_when_all_done``); False: done sub-envs are reset in place and the
                rollout goes on.
            break_when_all_done: run until every sub-env is done: a finished sub-env stops
                stepping (a ``"_step"`` mask, ``rlcore._partial_steps``) and repeats its last
                transition until the others finish.
            return_contiguous: stack densely; False gives lazy stacks for heterogeneous data.
            tensordict: the input of reset (or the first root when ``auto_reset=False``).
            set_truncated: mark the last step of the rollout truncated (and done); the env needs
                a ``"truncated"`` entry (``add_truncated_keys``).
            out: a tensordict of the result's shape to write the rollout into (returned).
            trust_policy: accepted for current torchrl's signature (policies are not wrapped).
            storing_device: the device of the returned data.

        Examples:
            >>> env.rollout(5, actions=[torch.ones(1, dtype=torch.int8)] * 3).batch_size
            torch.Size([3])
        """
        return run_rollout(
            self,
            max_steps,
            policy,
            callback,
            actions=actions,
            auto_reset=auto_reset,
            auto_cast_to_device=auto_cast_to_device,
            break_when_any_done=break_when_any_done,
            break_when_all_done=break_when_all_done,
            return_contiguous=return_contiguous,
            tensordict=tensordict,
            set_truncated=set_truncated,
            out=out,
            trust_policy=trust_policy,
            storing_device=storing_device,
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

        The transforms live in ``rltransforms`` (``pip install rltransforms``), found when first
        needed: ``rlcore`` does not depend on it.

        Examples:
            >>> from rltransforms import StepCounter
            >>> env.append_transform(StepCounter()).reset()["step_count"]
            tensor([0])
        """
        return _plugins.transforms("EnvBase.append_transform").TransformedEnv(self, transform)

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
        _plugins.find_gym_registration(f"{cls.__name__}.register_gym")(
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

"""Spec properties and cached key lists of ``EnvBase`` (a mixin, kept apart for size).

Specs users may edit in place, as in torchrl 0.4: ``output_spec`` and ``input_spec`` are locked
at their top level only (their ``full_*_spec`` entries are replaced through the setters), and
everything inside is writable (``env.observation_spec["pixels"] = spec``, ``del
env.full_done_spec["truncated"]``, ``env.action_spec.dtype = ...``). Unlike torchrl 0.4, no cache
goes stale: the env observes both containers (``Composite.observe_``) and every change inside
them empties its cache (key lists, done plans, step plans, a batched env's input rules) and tells
the envs built on it (a ``TransformedEnv`` rebuilds its specs on next use). Nothing is checked
per step: work happens only when a spec changes.
"""

from __future__ import annotations

import weakref
from typing import Any

import torch
from tensordict.utils import NestedKey

from rlspecs import Categorical, Composite, TensorSpec, Unbounded

__all__ = ["EnvSpecsMixin", "SpecDependents", "SpecObserver", "sort_keys"]

SPEC_BATCH_MISMATCH = (
    "The {name} spec has shape {shape} but its leading dims must match the env batch_size "
    "{batch_size}; build the spec with shape=(*batch_size, ...)"
)
NOT_A_SPEC = "The {name} spec must be a TensorSpec (or a Composite), got {type}"
NOT_A_COMPOSITE = "The {name} must be a Composite, got {type}"
MANY_KEYS = (
    "{name}_key requested but the env has {n} {name} keys {keys}; use env.{name}_keys instead"
)

OUTPUT_ENTRIES = ("full_observation_spec", "full_reward_spec", "full_done_spec")
INPUT_ENTRIES = ("full_action_spec", "full_state_spec")


def _depth_order(key: NestedKey) -> tuple[int, str]:
    if isinstance(key, str):
        return (0, key)
    return (len(key) - 1, ".".join(key))


def sort_keys(keys: Any) -> list[NestedKey]:
    """Sorts nested keys root first, then by depth, alphabetically within a depth."""
    return sorted(keys, key=_depth_order)


def complete_done_spec(spec: Composite) -> Composite:
    """At every level of ``spec`` holding ``done`` or ``terminated`` only, adds the other one."""
    for item in list(spec.values()):
        if isinstance(item, Composite):
            complete_done_spec(item)
    names = set(spec.keys())
    if "done" in names and "terminated" not in names:
        spec["terminated"] = spec["done"].clone()
    elif "terminated" in names and "done" not in names:
        spec["done"] = spec["terminated"].clone()
    return spec


class SpecObserver:
    """The callback an env attaches to its specs: a change empties the env's cache.

    Holds only a weak reference to the env. It pickles (with the env's ``__dict__``) as a
    callback bound to no env; the env attaches a new one to its specs when next read.

    Examples:
        >>> from rlspecs import Composite, Unbounded
        >>> class Env(EnvSpecsMixin):
        ...     batch_size, device = torch.Size(()), None
        >>> env = Env()
        >>> env.empty_cache()
        >>> env.observation_keys
        []
        >>> env.full_observation_spec["x"] = Unbounded(1)  # observed: the cache is emptied
        >>> env.observation_keys
        ['x']
    """

    __slots__ = ("env", "__weakref__")

    def __init__(self, env: Any = None) -> None:
        self.env = weakref.ref(env) if env is not None else _no_env

    def __call__(self, spec: Any = None) -> None:
        env = self.env()
        if env is not None:
            env.empty_cache()

    def __reduce__(self) -> tuple:
        return (SpecObserver, ())


def _no_env() -> None:
    return None


class SpecDependents:
    """Weak references to the envs derived from an env's specs (``TransformedEnv``).

    ``EnvSpecsMixin.empty_cache`` calls ``dependent._on_base_spec_change()`` on each live one.
    It pickles empty: a dependent registers again when it is unpickled.

    Examples:
        >>> deps = SpecDependents()
        >>> class Env:
        ...     def _on_base_spec_change(self):
        ...         print("base changed")
        >>> env = Env()
        >>> deps.add(env)
        >>> deps.call()
        base changed
    """

    __slots__ = ("refs",)

    def __init__(self) -> None:
        self.refs: list[weakref.ref] = []

    def add(self, env: Any) -> None:
        """Register ``env`` (once)."""
        self.refs = [ref for ref in self.refs if ref() is not None]
        if not any(ref() is env for ref in self.refs):
            self.refs.append(weakref.ref(env))

    def discard(self, env: Any) -> None:
        """Forget ``env``."""
        self.refs = [ref for ref in self.refs if ref() is not None and ref() is not env]

    def call(self) -> None:
        """Tell every live dependent that the specs it was built from changed."""
        for ref in list(self.refs):
            env = ref()
            if env is not None:
                env._on_base_spec_change()

    def __reduce__(self) -> tuple:
        return (SpecDependents, ())


class EnvSpecsMixin:
    """Spec properties with setters and key lists cached from the specs.

    Storage: ``self.__dict__["_output_spec"]`` (``full_observation_spec``, ``full_reward_spec``,
    ``full_done_spec``) and ``self.__dict__["_input_spec"]`` (``full_action_spec``,
    ``full_state_spec``), both Composites of shape ``batch_size`` locked at their top level only;
    the key cache lives in ``self.__dict__["_cache"]``.

    What empties the cache (``empty_cache()``, which also tells the envs built on this one):
    the setters, ``batch_size``/``device``/``to``, and any change inside the two containers
    (observed with a ``SpecObserver``): an entry set or deleted at any depth, a nested
    composite's ``shape``/``device`` assigned, a leaf's ``shape``/``dtype``/``device``
    assigned. Not tracked: in-place changes of a spec's tensors (bounds, masks), which no cache
    holds.
    """

    batch_size: torch.Size
    device: torch.device | None

    # ------------------------------------------------------------------ construction helpers
    def add_truncated_keys(self) -> Any:
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

    def _spec_empty(self) -> Composite:
        return Composite(shape=self.batch_size, device=self.device)

    def _spec_default_done(self) -> Composite:
        leaf = Categorical(2, shape=(*self.batch_size, 1), dtype=torch.bool, device=self.device)
        return Composite(
            done=leaf, terminated=leaf.clone(), shape=self.batch_size, device=self.device
        )

    def _spec_default_reward(self) -> Composite:
        leaf = Unbounded(shape=(*self.batch_size, 1), device=self.device)
        return Composite(reward=leaf, shape=self.batch_size, device=self.device)

    def _spec_check_batch(self, name: str, spec: TensorSpec) -> None:
        batch_size = self.batch_size
        if tuple(spec.shape[: len(batch_size)]) != tuple(batch_size):
            raise ValueError(
                SPEC_BATCH_MISMATCH.format(
                    name=name, shape=tuple(spec.shape), batch_size=tuple(batch_size)
                )
            )

    def _spec_as_group(self, name: str, spec: TensorSpec, default_key: str) -> Composite:
        """Wraps a leaf under ``default_key``; checks shapes; moves to the env device."""
        if not isinstance(spec, TensorSpec):
            raise TypeError(NOT_A_SPEC.format(name=name, type=type(spec).__name__))
        self._spec_check_batch(name, spec)
        device = self.device
        if device is not None and spec.device != device:
            spec = spec.to(device)
        if isinstance(spec, Composite):
            return spec.clone()
        return Composite({default_key: spec}, shape=self.batch_size, device=device)

    def _spec_default_output(self) -> Composite:
        spec = Composite(
            full_observation_spec=self._spec_empty(),
            full_reward_spec=self._spec_default_reward(),
            full_done_spec=self._spec_default_done(),
            shape=self.batch_size,
            device=self.device,
        )
        return spec.lock_(recurse=False)

    def _spec_default_input(self) -> Composite:
        spec = Composite(
            full_action_spec=self._spec_empty(),
            full_state_spec=self._spec_empty(),
            shape=self.batch_size,
            device=self.device,
        )
        return spec.lock_(recurse=False)

    def _spec_set_entry(self, parent: str, name: str, spec: Composite) -> None:
        container = self.output_spec if parent == "_output_spec" else self.input_spec
        container.unlock_(recurse=False)
        try:
            container[name] = spec  # observed: empties the cache
        finally:
            container.lock_(recurse=False)
        if self.is_spec_locked:
            container[name].lock_(recurse=True)
        self.empty_cache()

    # ------------------------------------------------------------------ locking (current torchrl)
    @property
    def is_spec_locked(self) -> bool:
        """Whether the specs are locked: edits inside them raise until ``set_spec_lock_(False)``
        (the spec setters, ``env.observation_spec = ...``, still work). Current torchrl locks
        them by default; here they start unlocked, as in torchrl 0.4 (``spec_locked=True`` at
        construction, or this property set to True, locks them).

        Examples:
            >>> env = MyEnv().set_spec_lock_()
            >>> env.is_spec_locked
            True
            >>> env.observation_spec["extra"] = env.observation_spec["observation"].clone()
            Traceback (most recent call last):
            ...
            RuntimeError: Cannot modify a locked CompositeSpec. Call unlock_() first (key 'extra')
        """
        return self.__dict__.get("_is_spec_locked", False)

    @is_spec_locked.setter
    def is_spec_locked(self, value: bool) -> None:
        self.set_spec_lock_(value)

    def set_spec_lock_(self, mode: bool = True) -> Any:
        """Locks (``mode=True``) or unlocks the specs, at every depth; returns the env."""
        for container in (self.output_spec, self.input_spec):
            if mode:
                container.lock_(recurse=True)
            else:
                container.unlock_(recurse=True).lock_(recurse=False)  # its top level stays
        self.__dict__["_is_spec_locked"] = bool(mode)
        self.empty_cache()
        return self

    # ------------------------------------------------------------------ observation of the specs
    def _spec_observer(self) -> SpecObserver:
        """This env's observer (a new one when the ``__dict__`` was copied from another env)."""
        state = self.__dict__
        observer = state.get("_spec_callback")
        if observer is None or observer.env() is not self:
            observer = state["_spec_callback"] = SpecObserver(self)
        return observer

    def _spec_watch(self, spec: Composite) -> Composite:
        """``spec``, observed by this env (attached once; copies and pickles drop observers)."""
        observer = self._spec_observer()
        if observer not in spec.observers:
            spec.observe_(observer)
        return spec

    def _spec_store(self, name: str, spec: Composite) -> None:
        """Store a container (``_output_spec``/``_input_spec``): top-level lock (every level
        when the specs are locked), observed."""
        self.__dict__[name] = self._spec_watch(spec.lock_(recurse=self.is_spec_locked))
        self.empty_cache()

    def _spec_add_dependent(self, env: Any) -> None:
        """Call ``env._on_base_spec_change()`` whenever this env's specs change."""
        dependents = self.__dict__.get("_spec_dependents")
        if dependents is None:
            dependents = self.__dict__["_spec_dependents"] = SpecDependents()
        dependents.add(env)

    def _spec_remove_dependent(self, env: Any) -> None:
        dependents = self.__dict__.get("_spec_dependents")
        if dependents is not None:
            dependents.discard(env)

    # ------------------------------------------------------------------ containers
    @property
    def output_spec(self) -> Composite:
        """Composite with ``full_observation_spec``, ``full_reward_spec``, ``full_done_spec``.

        Locked at its top level (set those three through their setters); what is inside may be
        edited in place and the env's caches follow.
        """
        if "_class_specs" in self.__dict__:  # specs set on the class, __init__ not run yet
            self._apply_class_specs()
        spec = self.__dict__.get("_output_spec")
        if spec is None:
            spec = self.__dict__["_output_spec"] = self._spec_default_output()
        return self._spec_watch(spec)

    @output_spec.setter
    def output_spec(self, value: Composite) -> None:
        if not isinstance(value, Composite):
            raise TypeError(NOT_A_COMPOSITE.format(name="output_spec", type=type(value).__name__))
        self._spec_check_batch("output_spec", value)
        value = value.clone().unlock_()
        defaults = {
            "full_observation_spec": self._spec_empty,
            "full_reward_spec": self._spec_default_reward,
            "full_done_spec": self._spec_default_done,
        }
        for name, make in defaults.items():
            if name not in value.keys():
                value[name] = make()
        complete_done_spec(value["full_done_spec"])
        self._spec_store("_output_spec", value)

    @property
    def input_spec(self) -> Composite:
        """Composite with ``full_action_spec`` and ``full_state_spec`` (top level locked)."""
        if "_class_specs" in self.__dict__:  # specs set on the class, __init__ not run yet
            self._apply_class_specs()
        spec = self.__dict__.get("_input_spec")
        if spec is None:
            spec = self.__dict__["_input_spec"] = self._spec_default_input()
        return self._spec_watch(spec)

    @input_spec.setter
    def input_spec(self, value: Composite) -> None:
        if not isinstance(value, Composite):
            raise TypeError(NOT_A_COMPOSITE.format(name="input_spec", type=type(value).__name__))
        self._spec_check_batch("input_spec", value)
        value = value.clone().unlock_()
        for name in INPUT_ENTRIES:
            if name not in value.keys():
                value[name] = self._spec_empty()
        self._spec_store("_input_spec", value)

    # ------------------------------------------------------------------ observation / state
    @property
    def full_observation_spec(self) -> Composite:
        """The observation Composite."""
        return self.output_spec["full_observation_spec"]

    @full_observation_spec.setter
    def full_observation_spec(self, value: TensorSpec) -> None:
        self._spec_set_entry(
            "_output_spec",
            "full_observation_spec",
            self._spec_as_group("observation", value, "observation"),
        )

    observation_spec = full_observation_spec

    @property
    def full_state_spec(self) -> Composite:
        """The state Composite: inputs of ``_step`` other than actions."""
        return self.input_spec["full_state_spec"]

    @full_state_spec.setter
    def full_state_spec(self, value: TensorSpec | None) -> None:
        if value is None:
            value = self._spec_empty()
        elif not isinstance(value, Composite):
            raise TypeError(NOT_A_COMPOSITE.format(name="state_spec", type=type(value).__name__))
        self._spec_set_entry(
            "_input_spec", "full_state_spec", self._spec_as_group("state", value, "state")
        )

    state_spec = full_state_spec

    # ------------------------------------------------------------------ action
    @property
    def full_action_spec(self) -> Composite:
        """The action Composite."""
        return self.input_spec["full_action_spec"]

    @full_action_spec.setter
    def full_action_spec(self, value: TensorSpec) -> None:
        self._spec_set_entry(
            "_input_spec", "full_action_spec", self._spec_as_group("action", value, "action")
        )

    @property
    def action_spec(self) -> TensorSpec:
        """The action leaf when there is a single action key, the action Composite otherwise."""
        keys = self.action_keys
        full = self.full_action_spec
        return full[keys[0]] if len(keys) == 1 else full

    @action_spec.setter
    def action_spec(self, value: TensorSpec) -> None:
        self.full_action_spec = value

    # ------------------------------------------------------------------ reward
    @property
    def full_reward_spec(self) -> Composite:
        """The reward Composite."""
        return self.output_spec["full_reward_spec"]

    @full_reward_spec.setter
    def full_reward_spec(self, value: TensorSpec) -> None:
        self._spec_set_entry(
            "_output_spec", "full_reward_spec", self._spec_as_group("reward", value, "reward")
        )

    @property
    def reward_spec(self) -> TensorSpec:
        """The reward leaf when there is a single reward key, the reward Composite otherwise."""
        keys = self.reward_keys
        full = self.full_reward_spec
        return full[keys[0]] if len(keys) == 1 else full

    @reward_spec.setter
    def reward_spec(self, value: TensorSpec) -> None:
        self.full_reward_spec = value

    # ------------------------------------------------------------------ done
    @property
    def full_done_spec(self) -> Composite:
        """The done Composite (``done`` and ``terminated`` at every level, maybe ``truncated``)."""
        return self.output_spec["full_done_spec"]

    @full_done_spec.setter
    def full_done_spec(self, value: TensorSpec) -> None:
        if isinstance(value, TensorSpec) and not isinstance(value, Composite):
            self._spec_check_batch("done", value)
            value = Composite(
                done=value.clone(),
                terminated=value.clone(),
                shape=self.batch_size,
                device=value.device,
            )
        group = self._spec_as_group("done", value, "done")
        self._spec_set_entry("_output_spec", "full_done_spec", complete_done_spec(group))

    @property
    def done_spec(self) -> TensorSpec:
        """The done leaf when there is a single done key, the done Composite otherwise."""
        keys = self.done_keys
        full = self.full_done_spec
        return full[keys[0]] if len(keys) == 1 else full

    @done_spec.setter
    def done_spec(self, value: TensorSpec) -> None:
        self.full_done_spec = value

    # ------------------------------------------------------------------ cached keys
    def empty_cache(self) -> None:
        """Forgets the key lists and step plans derived from the specs; tells dependent envs.

        Called by the setters and by any change inside the specs (see the class docstring).
        """
        state = self.__dict__
        state["_cache"] = {}
        dependents = state.get("_spec_dependents")
        if dependents is not None:
            dependents.call()

    def _cache_get(self, name: str, compute: Any) -> Any:
        value = self.__dict__["_cache"].get(name)
        if value is None:
            value = compute()
            # into the cache as it is now: a compute that changed the env emptied it
            self.__dict__["_cache"][name] = value
        return value

    @property
    def action_keys(self) -> list[NestedKey]:
        """Leaf keys of the action spec, root first."""
        return self._cache_get(
            "action_keys", lambda: sort_keys(self.full_action_spec.keys(True, True))
        )

    @property
    def reward_keys(self) -> list[NestedKey]:
        """Leaf keys of the reward spec, root first."""
        return self._cache_get(
            "reward_keys", lambda: sort_keys(self.full_reward_spec.keys(True, True))
        )

    @property
    def done_keys(self) -> list[NestedKey]:
        """Leaf keys of the done spec, root first."""
        return self._cache_get("done_keys", lambda: sort_keys(self.full_done_spec.keys(True, True)))

    @property
    def observation_keys(self) -> list[NestedKey]:
        """Leaf keys of the observation spec, root first."""
        return self._cache_get(
            "observation_keys", lambda: sort_keys(self.full_observation_spec.keys(True, True))
        )

    @property
    def state_keys(self) -> list[NestedKey]:
        """Leaf keys of the state spec, root first."""
        return self._cache_get(
            "state_keys", lambda: sort_keys(self.full_state_spec.keys(True, True))
        )

    def _spec_single_key(self, name: str, keys: list[NestedKey]) -> NestedKey:
        if len(keys) != 1:
            raise KeyError(MANY_KEYS.format(name=name, n=len(keys), keys=keys))
        return keys[0]

    @property
    def action_key(self) -> NestedKey:
        """The action key (KeyError when there are several)."""
        return self._spec_single_key("action", self.action_keys)

    @property
    def reward_key(self) -> NestedKey:
        """The reward key (KeyError when there are several)."""
        return self._spec_single_key("reward", self.reward_keys)

    @property
    def done_key(self) -> NestedKey:
        """The first done key, root first."""
        return self.done_keys[0]

    @property
    def done_keys_groups(self) -> list[list[NestedKey]]:
        """Done keys grouped by level, in the order of ``reset_keys``."""
        return self._cache_get("done_keys_groups", self._spec_done_groups)

    def _spec_done_groups(self) -> list[list[NestedKey]]:
        groups: dict[tuple[str, ...], list[NestedKey]] = {}
        for key in self.done_keys:
            prefix = () if isinstance(key, str) else key[:-1]
            groups.setdefault(prefix, []).append(key)
        return list(groups.values())

    @property
    def reset_keys(self) -> list[NestedKey]:
        """``"_reset"`` keys, one per done level (``(*prefix, "_reset")``), root first."""
        return self._cache_get("reset_keys", self._spec_reset_keys)

    def _spec_reset_keys(self) -> list[NestedKey]:
        keys = []
        for group in self.done_keys_groups:
            key = group[0]
            keys.append("_reset" if isinstance(key, str) else (*key[:-1], "_reset"))
        return keys

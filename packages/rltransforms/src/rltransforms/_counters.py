"""Per-episode trackers: `StepCounter` (step count and truncation) and `InitTracker`.

Both write one entry per reset group (a nesting level holding done flags): `("agent",
"step_count")` next to `("agent", "done")`. The keys come from the env's done spec when the
transform sits in an env, or default to the root (`"step_count"`, `"done"`, `"_reset"`, ...) when
it is called by hand; every key list can also be set (`counter.step_count_keys = [...]`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase

from rlspecs import Bounded, Categorical, Composite, TensorSpec

from ._base import Transform, _as_key_list, _expand_mask, _get, _join, _key_tuple, _set, done_roots

__all__ = ["InitTracker", "StepCounter"]

MAX_STEPS_ERROR = (
    "StepCounter: max_steps should have a value greater or equal to one (a positive integer), "
    "or be None; got {value!r}"
)
KEY_NAME_ERROR = (
    "StepCounter: {arg} must be a string (it is placed next to each done flag), got {value!r}"
)
INIT_KEY_ERROR = (
    "InitTracker: init_key can only be of type str (it is placed next to each done flag), "
    "got {value!r}"
)
NO_STEP_COUNT_ERROR = (
    "StepCounter: {key!r} not found in the step input; reset the env before stepping it "
    "(the step count is carried from reset by step_mdp)"
)
STEP_COUNTER_FORWARD_ERROR = (
    "StepCounter cannot be called independently, only its step and reset methods are "
    "functional: a step count needs the episode boundaries an env's reset and step give "
    "(use it in a TransformedEnv, or call its _reset/_step hooks)"
)
INIT_TRACKER_FORWARD_ERROR = (
    "class InitTracker cannot be executed without a parent environment: whether data comes "
    "from a reset is known to the env only (use it in a TransformedEnv, or call its "
    "_reset/_call hooks)"
)

# the leaves a reset group is made of, in the order of `_Groups` fields
_ROLES = ("done", "terminated", "truncated", "_reset")


class _KeyLists:
    """Per-role key lists of a tracker: given by the user, else derived from the env's done roots.

    `roots` are the done roots (`()` for the root level); a role's keys are `root + leaf`.
    """

    def __init__(self) -> None:
        self.given: dict[str, list[NestedKey]] = {}
        self.roots: list[tuple[str, ...]] | None = None
        self.shapes: list[torch.Size] | None = None  # done shapes, from the spec
        self.derived: dict[Any, list] = {}  # key lists (and step plans) computed once per roots

    def keys(self, role: str, leaf: str) -> list[NestedKey]:
        given = self.given.get(role)
        if given is not None:
            return given
        keys = self.derived.get((role, leaf))
        if keys is None:
            roots = self.roots if self.roots is not None else [()]
            keys = self.derived[role, leaf] = [_join(root, leaf) for root in roots]
        return keys

    def set_roots(self, roots: list[tuple[str, ...]] | None, shapes: list | None) -> None:
        self.roots, self.shapes, self.derived = roots, shapes, {}


def _done_shapes(full_done_spec: Composite, roots: list[tuple[str, ...]]) -> list[torch.Size]:
    """The shape of the done flags of each root (its `done` leaf, else its first leaf)."""
    shapes = []
    for root in roots:
        leaves = [k for k in full_done_spec.keys(True, True) if _key_tuple(k)[:-1] == root]
        done = _join(root, "done")
        shapes.append(full_done_spec[done if done in leaves else leaves[0]].shape)
    return shapes


class _Tracker(Transform):
    """Shared machinery: key lists per role and the done-shaped tensors of each group."""

    def __init__(self) -> None:
        super().__init__()
        self._key_lists = _KeyLists()
        self._shapes: list[torch.Size] | None = None

    def _role_keys(self, role: str, leaf: str) -> list[NestedKey]:
        if self._key_lists.roots is None and role not in self._key_lists.given:
            parent = self.parent
            if parent is not None:
                self._learn_groups(parent.output_spec)
        return self._key_lists.keys(role, leaf)

    def _set_role_keys(self, role: str, value: Any) -> None:
        self._key_lists.given[role] = _as_key_list(value)
        self._key_lists.derived = {}

    def _learn_groups(self, output_spec: Composite) -> None:
        full_done_spec = output_spec["full_done_spec"]
        roots = done_roots(full_done_spec)
        self._key_lists.set_roots(roots, _done_shapes(full_done_spec, roots))

    @property
    def reset_keys(self) -> list[NestedKey]:
        """The `_reset` entries read at reset, one per group (default: `"_reset"` at each root)."""
        return self._role_keys("_reset", "_reset")

    @reset_keys.setter
    def reset_keys(self, value: Sequence[NestedKey] | None) -> None:
        self._set_role_keys("_reset", value)

    @property
    def done_keys(self) -> list[NestedKey]:
        """The `done` entries of each group (their shape is the shape of what is written)."""
        return self._role_keys("done", "done")

    @done_keys.setter
    def done_keys(self, value: Sequence[NestedKey] | None) -> None:
        self._set_role_keys("done", value)

    @property
    def terminated_keys(self) -> list[NestedKey]:
        """The `terminated` entries of each group."""
        return self._role_keys("terminated", "terminated")

    @terminated_keys.setter
    def terminated_keys(self, value: Sequence[NestedKey] | None) -> None:
        self._set_role_keys("terminated", value)

    def set_container(self, container: Any) -> None:
        # a new env may have other done groups
        self._key_lists.set_roots(None, None)
        self._shapes = None
        super().set_container(container)

    def _done_like(
        self, index: int, key: NestedKey, *sources: TensorDictBase
    ) -> tuple[torch.Size, torch.device | None]:
        """Shape and device of the flags next to `key` (group `index`): from the data, else spec."""
        roots = [_key_tuple(key)[:-1]]
        done_keys = self.done_keys
        if index < len(done_keys):
            roots.insert(0, _key_tuple(done_keys[index])[:-1])
        for source in sources:
            for root in roots:
                for leaf in ("done", "terminated", "truncated"):
                    value = _get(source, _join(root, leaf))
                    if value is not None:
                        return value.shape, value.device
        shapes = self._key_lists.shapes
        source = sources[0]
        if shapes is not None and index < len(shapes):
            env_batch = self.parent.batch_size if self.parent is not None else torch.Size()
            tail = shapes[index][len(env_batch) :]
            return torch.Size([*source.batch_size, *tail]), source.device
        return torch.Size([*source.batch_size, 1]), source.device

    def _flag_spec(self, shape: torch.Size, device: Any) -> TensorSpec:
        return Categorical(2, shape=shape, dtype=torch.bool, device=device)

    def _group_shapes(self, output_spec: Composite) -> list[torch.Size]:
        """The done shape of each group of `output_spec` (remembered for the input spec)."""
        self._learn_groups(output_spec)
        full_done_spec = output_spec["full_done_spec"]
        done_leaves = set(full_done_spec.keys(True, True))
        shapes = []
        for done_key, default in zip(self.done_keys, self._key_lists.shapes):
            shapes.append(full_done_spec[done_key].shape if done_key in done_leaves else default)
        self._shapes = shapes
        return shapes


class StepCounter(_Tracker):
    """Counts the steps since the last reset and truncates episodes after `max_steps`.

    Writes `step_count` (int64, shaped like `done`) next to every done group, at reset (0, or the
    previous count for sub-envs a partial reset leaves running) and at each step (+1). With
    `max_steps`, `truncated_key` becomes True once the count reaches it and, with `update_done`,
    `done` is updated accordingly (`truncated_key="done"` writes the truncation into `done`).

    The per-group key lists (`step_count_keys`, `truncated_keys`, `done_keys`,
    `terminated_keys`, `reset_keys`) come from the env; outside an env they default to the root
    and can be set, so that `_reset(td, td_reset)` and `_step(td, next_td)` run on plain
    tensordicts. Calling the transform on stored data (`t(td)`) raises NotImplementedError: a
    count needs the episode boundaries that only reset and step give.

    Examples:
        >>> from rltransforms import StepCounter, TransformedEnv
        >>> env = TransformedEnv(base_env, StepCounter(max_steps=2))
        >>> env.rollout(5)["next", "truncated"].squeeze(-1)
        tensor([False,  True])
    """

    def __init__(
        self,
        max_steps: int | None = None,
        truncated_key: str = "truncated",
        step_count_key: str = "step_count",
        update_done: bool = True,
    ) -> None:
        if max_steps is not None and (not isinstance(max_steps, int) or max_steps < 1):
            raise ValueError(MAX_STEPS_ERROR.format(value=max_steps))
        for arg, value in (("truncated_key", truncated_key), ("step_count_key", step_count_key)):
            if not isinstance(value, str):
                raise ValueError(KEY_NAME_ERROR.format(arg=arg, value=value))
        super().__init__()
        self.max_steps = max_steps
        self.truncated_key = truncated_key
        self.step_count_key = step_count_key
        self.update_done = update_done

    @property
    def step_count_keys(self) -> list[NestedKey]:
        """Where the counts are written, one per done group."""
        return self._role_keys("step_count", self.step_count_key)

    @step_count_keys.setter
    def step_count_keys(self, value: Sequence[NestedKey] | None) -> None:
        self._set_role_keys("step_count", value)

    @property
    def truncated_keys(self) -> list[NestedKey]:
        """Where the truncation flags are written, one per done group."""
        return self._role_keys("truncated", self.truncated_key)

    @truncated_keys.setter
    def truncated_keys(self, value: Sequence[NestedKey] | None) -> None:
        self._set_role_keys("truncated", value)

    def _count_spec(self, shape: torch.Size, device: Any) -> Bounded:
        return Bounded(
            low=0, high=torch.iinfo(torch.int64).max, shape=shape, dtype=torch.int64, device=device
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        shapes = self._group_shapes(output_spec)
        observation_spec = output_spec["full_observation_spec"]
        done_spec = output_spec["full_done_spec"]
        for key, truncated_key, shape in zip(self.step_count_keys, self.truncated_keys, shapes):
            observation_spec[key] = self._count_spec(shape, observation_spec.device)
            if self.max_steps is not None:
                done_spec[truncated_key] = self._flag_spec(shape, done_spec.device)
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        # called alone (no env): one count per group, shaped like `done` (*batch, 1)
        if self.container_ref is None and isinstance(observation_spec, Composite):
            shape = torch.Size([*observation_spec.shape, 1])
            for key in self.step_count_keys:
                observation_spec[key] = self._count_spec(shape, observation_spec.device)
        return observation_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        input_spec = super().transform_input_spec(input_spec)
        state_spec = input_spec["full_state_spec"]
        shapes = self._shapes
        if shapes is None:
            parent = self.parent
            if parent is not None:
                shapes = self._group_shapes(parent.output_spec)
            else:
                shapes = [torch.Size([*state_spec.shape, 1])] * len(self.step_count_keys)
        for key, shape in zip(self.step_count_keys, shapes):
            state_spec[key] = self._count_spec(shape, state_spec.device)
        return input_spec

    def _truncate(
        self, data: TensorDictBase, truncated_key: NestedKey, done_key: NestedKey, count: Any
    ) -> None:
        truncated = count >= self.max_steps
        previous = _get(data, truncated_key)
        if previous is not None:
            truncated = truncated | previous
        if self.update_done:
            done = _get(data, done_key)
            _set(data, done_key, truncated if done is None else done | truncated)
        _set(data, truncated_key, truncated)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for index, (count_key, truncated_key, reset_key, done_key) in enumerate(
            zip(self.step_count_keys, self.truncated_keys, self.reset_keys, self.done_keys)
        ):
            reset = _get(tensordict, reset_key)
            previous = None if reset is None else _get(tensordict, count_key)
            if previous is None:
                shape, device = self._done_like(index, count_key, tensordict_reset, tensordict)
                step_count = torch.zeros(shape, dtype=torch.int64, device=device)
            else:
                step_count = torch.where(_expand_mask(reset, previous), 0, previous)
            tensordict_reset.set(count_key, step_count)
            if self.max_steps is not None:
                self._truncate(tensordict_reset, truncated_key, done_key, step_count)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        plan = self._key_lists.derived.get("step")
        if plan is None:  # (count, truncated, done) keys per group, once per key change
            plan = list(zip(self.step_count_keys, self.truncated_keys, self.done_keys))
            self._key_lists.derived["step"] = plan
        for count_key, truncated_key, done_key in plan:
            step_count = _get(tensordict, count_key)
            if step_count is None:
                raise KeyError(NO_STEP_COUNT_ERROR.format(key=count_key))
            step_count = step_count + 1
            _set(next_tensordict, count_key, step_count)
            if self.max_steps is not None:
                self._truncate(next_tensordict, truncated_key, done_key, step_count)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Not available: see the class docstring."""
        raise NotImplementedError(STEP_COUNTER_FORWARD_ERROR)

    def __repr__(self) -> str:
        return (
            f"StepCounter(max_steps={self.max_steps}, truncated_key={self.truncated_key!r}, "
            f"step_count_key={self.step_count_key!r})"
        )


class InitTracker(_Tracker):
    """Writes `init_key` (bool, shaped like `done`): True in reset outputs, False in step outputs.

    After a partial reset only the sub-envs that were reset carry True. `init_keys` (one per
    done group) come from the env, default to `[init_key]` outside one and can be set, so that
    `_reset` and `_call` run on plain tensordicts; calling the transform on stored data
    (`t(td)`) raises NotImplementedError.

    Examples:
        >>> from rltransforms import InitTracker, TransformedEnv
        >>> env = TransformedEnv(base_env, InitTracker())
        >>> env.reset()["is_init"], env.rand_step()["next", "is_init"]
        (tensor([True]), tensor([False]))
    """

    def __init__(self, init_key: str = "is_init") -> None:
        if not isinstance(init_key, str):
            raise ValueError(INIT_KEY_ERROR.format(value=init_key))
        super().__init__()
        self.init_key = init_key

    @property
    def init_keys(self) -> list[NestedKey]:
        """Where the flags are written, one per done group."""
        return self._role_keys("init", self.init_key)

    @init_keys.setter
    def init_keys(self, value: Sequence[NestedKey] | None) -> None:
        self._set_role_keys("init", value)

    @property
    def out_keys(self) -> list[NestedKey]:
        """The init keys."""
        return self.init_keys if "_key_lists" in self.__dict__ else []

    @out_keys.setter
    def out_keys(self, value: Any) -> None:
        if value not in (None, []):
            raise ValueError("InitTracker: out_keys are the init_keys; set init_keys instead")

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        shapes = self._group_shapes(output_spec)
        observation_spec = output_spec["full_observation_spec"]
        for key, shape in zip(self.init_keys, shapes):
            observation_spec[key] = self._flag_spec(shape, observation_spec.device)
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if self.container_ref is None and isinstance(observation_spec, Composite):
            shape = torch.Size([*observation_spec.shape, 1])
            for key in self.init_keys:
                observation_spec[key] = self._flag_spec(shape, observation_spec.device)
        return observation_spec

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for index, (init_key, reset_key) in enumerate(zip(self.init_keys, self.reset_keys)):
            shape, device = self._done_like(index, init_key, tensordict_reset, tensordict)
            reset = _get(tensordict, reset_key)
            if reset is None:
                init = torch.ones(shape, dtype=torch.bool, device=device)
            else:
                init = reset.reshape(shape).clone()
            tensordict_reset.set(init_key, init)
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for index, init_key in enumerate(self.init_keys):
            if _get(next_tensordict, init_key) is None:
                shape, device = self._done_like(index, init_key, next_tensordict)
                _set(next_tensordict, init_key, torch.zeros(shape, dtype=torch.bool, device=device))
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Not available: see the class docstring."""
        raise NotImplementedError(INIT_TRACKER_FORWARD_ERROR)

    def __repr__(self) -> str:
        return f"InitTracker(init_key={self.init_key!r})"

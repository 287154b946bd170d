"""Per-episode trackers: `StepCounter` (step count and truncation) and `InitTracker`."""

from __future__ import annotations

from typing import NamedTuple

import torch
from tensordict import NestedKey, TensorDictBase

from rlspecs import Bounded, Categorical, Composite

from ._base import Transform, _expand_mask, _get, _join, _set, done_roots

MAX_STEPS_ERROR = "StepCounter: max_steps must be a positive integer or None, got {value!r}"
KEY_NAME_ERROR = (
    "{cls}: {arg} must be a string (it is placed next to each done flag), got {value!r}"
)
NO_DONE_ERROR = "{cls}: the done spec has no {key!r} entry to attach {what} to (done keys: {keys})"
NO_STEP_COUNT_ERROR = (
    "StepCounter: {key!r} not found in the step input; reset the env before stepping it "
    "(the step count is carried from reset by step_mdp)"
)


class _Group(NamedTuple):
    """The keys of one reset group (a nesting level holding done flags)."""

    reset_key: NestedKey
    done_key: NestedKey
    out_key: NestedKey  # step_count (StepCounter) or is_init (InitTracker)
    truncated_key: NestedKey
    tail: torch.Size  # the done leaf's shape after the env batch dims
    spec_shape: torch.Size


def _groups(
    output_spec: Composite, out_leaf: str, truncated_leaf: str, cls: str, what: str
) -> list[_Group]:
    done_spec = output_spec["full_done_spec"]
    batch_ndim = len(output_spec.shape)
    keys = list(done_spec.keys(True, True))
    groups = []
    for root in done_roots(done_spec):
        done_key = _join(root, "done")
        if done_key not in keys:
            raise KeyError(NO_DONE_ERROR.format(cls=cls, key=done_key, what=what, keys=keys))
        shape = done_spec[done_key].shape
        groups.append(
            _Group(
                reset_key=_join(root, "_reset"),
                done_key=done_key,
                out_key=_join(root, out_leaf),
                truncated_key=_join(root, truncated_leaf),
                tail=shape[batch_ndim:],
                spec_shape=shape,
            )
        )
    return groups


class StepCounter(Transform):
    """Counts the steps since the last reset and truncates episodes after `max_steps`.

    Writes `step_count` (int64, shaped like `done`) next to every done group, at reset (0, or the
    previous count for sub-envs a partial reset leaves running) and at each step (+1). With
    `max_steps`, `truncated_key` becomes True once the count reaches it and `done` is updated
    accordingly (`truncated_key="done"` writes the truncation straight into `done`).

    Examples:
        >>> from rlcore.transforms import StepCounter, TransformedEnv
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
                raise ValueError(KEY_NAME_ERROR.format(cls="StepCounter", arg=arg, value=value))
        super().__init__()
        self.max_steps = max_steps
        self.truncated_key = truncated_key
        self.step_count_key = step_count_key
        self.update_done = update_done
        self._groups: list[_Group] | None = None

    def _group_list(self) -> list[_Group]:
        if self._groups is None:
            parent = self.parent
            if parent is None:
                raise RuntimeError("StepCounter needs an env: wrap it in a TransformedEnv")
            self._set_groups(parent.output_spec)
        return self._groups

    def _set_groups(self, output_spec: Composite) -> None:
        self._groups = _groups(
            output_spec, self.step_count_key, self.truncated_key, "StepCounter", "step_count"
        )

    def _count_spec(self, group: _Group, device: torch.device | None) -> Bounded:
        return Bounded(
            low=0,
            high=torch.iinfo(torch.int64).max,
            shape=group.spec_shape,
            dtype=torch.int64,
            device=device,
        )

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._set_groups(output_spec)
        observation_spec = output_spec["full_observation_spec"]
        done_spec = output_spec["full_done_spec"]
        for group in self._groups:
            observation_spec[group.out_key] = self._count_spec(group, observation_spec.device)
            if self.max_steps is not None:
                done_spec[group.truncated_key] = Categorical(
                    2, shape=group.spec_shape, dtype=torch.bool, device=done_spec.device
                )
        return super().transform_output_spec(output_spec)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        state_spec = input_spec["full_state_spec"]
        for group in self._group_list():
            state_spec[group.out_key] = self._count_spec(group, state_spec.device)
        return super().transform_input_spec(input_spec)

    def _truncate(self, group: _Group, data: TensorDictBase, step_count: torch.Tensor) -> None:
        truncated = step_count >= self.max_steps
        previous = _get(data, group.truncated_key)
        if previous is not None:
            truncated = truncated | previous
        if self.update_done:
            done = _get(data, group.done_key)
            _set(data, group.done_key, truncated if done is None else done | truncated)
        _set(data, group.truncated_key, truncated)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for group in self._group_list():
            reset = tensordict.get(group.reset_key, None)
            previous = None if reset is None else tensordict.get(group.out_key, None)
            if previous is None:
                step_count = torch.zeros(
                    (*tensordict_reset.batch_size, *group.tail),
                    dtype=torch.int64,
                    device=tensordict_reset.device,
                )
            else:
                step_count = torch.where(_expand_mask(reset, previous), 0, previous)
            tensordict_reset.set(group.out_key, step_count)
            if self.max_steps is not None:
                self._truncate(group, tensordict_reset, step_count)
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for group in self._group_list():
            step_count = _get(tensordict, group.out_key)
            if step_count is None:
                raise KeyError(NO_STEP_COUNT_ERROR.format(key=group.out_key))
            step_count = step_count + 1
            _set(next_tensordict, group.out_key, step_count)
            if self.max_steps is not None:
                self._truncate(group, next_tensordict, step_count)
        return next_tensordict

    def __repr__(self) -> str:
        return (
            f"StepCounter(max_steps={self.max_steps}, truncated_key={self.truncated_key!r}, "
            f"step_count_key={self.step_count_key!r})"
        )


class InitTracker(Transform):
    """Writes `init_key` (bool, shaped like `done`): True in reset outputs, False in step outputs.

    After a partial reset only the sub-envs that were reset carry True.

    Examples:
        >>> from rlcore.transforms import InitTracker, TransformedEnv
        >>> env = TransformedEnv(base_env, InitTracker())
        >>> env.reset()["is_init"], env.rand_step()["next", "is_init"]
        (tensor([True]), tensor([False]))
    """

    def __init__(self, init_key: str = "is_init") -> None:
        if not isinstance(init_key, str):
            raise ValueError(
                KEY_NAME_ERROR.format(cls="InitTracker", arg="init_key", value=init_key)
            )
        super().__init__()
        self.init_key = init_key
        self._groups: list[_Group] | None = None

    def _group_list(self) -> list[_Group]:
        if self._groups is None:
            parent = self.parent
            if parent is None:
                raise RuntimeError("InitTracker needs an env: wrap it in a TransformedEnv")
            self.transform_output_spec(parent.output_spec.clone())
        return self._groups

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        self._groups = _groups(output_spec, self.init_key, "truncated", "InitTracker", "is_init")
        observation_spec = output_spec["full_observation_spec"]
        for group in self._groups:
            observation_spec[group.out_key] = Categorical(
                2, shape=group.spec_shape, dtype=torch.bool, device=observation_spec.device
            )
        return super().transform_output_spec(output_spec)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for group in self._group_list():
            shape = (*tensordict_reset.batch_size, *group.tail)
            reset = tensordict.get(group.reset_key, None)
            if reset is None:
                init = torch.ones(shape, dtype=torch.bool, device=tensordict_reset.device)
            else:
                init = reset.reshape(shape).clone()
            tensordict_reset.set(group.out_key, init)
        return tensordict_reset

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for group in self._group_list():
            shape = (*next_tensordict.batch_size, *group.tail)
            init = torch.zeros(shape, dtype=torch.bool, device=next_tensordict.device)
            _set(next_tensordict, group.out_key, init)
        return next_tensordict

    def __repr__(self) -> str:
        return f"InitTracker(init_key={self.init_key!r})"

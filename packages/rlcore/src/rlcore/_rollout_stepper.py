"""The rollout's stepper path: an env's stepper fills each step, the step contract does the rest.

``EnvBase.rollout`` of an env that offers a stepper (``rlcore._stepper``: every CPU
``rllibs.GymEnv``) runs here. Per step, the stepper writes the library's observations into
the next row of chunks allocated ahead and returns the reward and end flags; everything else
is the contract's, as on the general path: the policy is called as ``rollout`` calls it, the input is checked with the
env's step rules (``rlcore.step_inputs``), missing done flags come from the done rule
(``fill_level``; whether any is set is read from the library's flags by the same rule), the
next root is the general path's shift (``StepMDP.shift_layout``, compiled for the layout),
finished rows are reset through the stepper and merged where their mask holds, and the
rollout stops where the general path stops (``break_when_any_done``, the last step). What
goes away is the tensordict per step and per sub-call: the transition tensordict is built
only where someone sees it (a callback, the caller's root), and the columns are stacked once.

The result is the general path's: keys and their order, values, shapes, dtypes, the
``"time"`` name, ``"next"`` written into the caller's tensordict. A policy that changes the
tensordict's layout mid-rollout (a new key, a nested entry) hands the rollout over to the
general path from that step on, with the steps so far kept.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

from rlcore._done_rule import done_from, done_sources, fill_level
from rlcore._resets import any_true
from rlcore._step_mdp import tuple_getter
from rlcore._stepper import Stepper, is_current, stepper_of
from rlspecs.private_apis import td_entries, td_has_names, td_is_locked, td_new, td_set_str

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["stepper_rollout"]

_TENSOR = frozenset((torch.Tensor,))
# observation rows allocated at a time: enough that a chunk costs a fraction of a µs a step,
# few enough (and at most CHUNK_BYTES) that a rollout stopping early leaves little unused
CHUNK_ROWS = 256
CHUNK_BYTES = 64 << 20

ROLLOUT_OPTIONS = {
    "auto_reset",
    "auto_cast_to_device",
    "break_when_any_done",
    "return_contiguous",
    "tensordict",
}


def _plain(td: Any, env: EnvBase) -> bool:
    return (
        type(td) is TensorDict
        and td.batch_size == env.batch_size
        and not td_is_locked(td)
        and not td_has_names(td)
        and all(type(value) is torch.Tensor for value in td_entries(td).values())
    )


def _module_on_tensors(policy: Any) -> bool:
    return (
        isinstance(policy, nn.Module)
        and not isinstance(policy, TensorDictModuleBase)
        and not hasattr(policy, "in_keys")
    )


def stepper_rollout(
    env: EnvBase,
    max_steps: Any,
    policy: Any,
    callback: Callable | None,
    options: dict[str, Any],
    general: Callable[..., TensorDictBase],
) -> TensorDictBase | None:
    """``env.rollout(max_steps, policy, callback, **options)`` through ``env``'s stepper, or
    None (decided before anything runs) where it does not apply.

    ``general(env, max_steps, policy, callback, **options)`` is the general path, which takes
    over if the policy changes the tensordict's layout.

    Examples:
        >>> stepper_rollout(env, 3, None, None, {}, general=None) is None  # EnvBase has none
        True
    """
    auto_reset = options.get("auto_reset", True)
    tensordict = options.get("tensordict")
    if (
        not options.keys() <= ROLLOUT_OPTIONS
        or not isinstance(max_steps, int)
        or max_steps < 1
        or options.get("auto_cast_to_device", False)
        or _module_on_tensors(policy)
        or (tensordict is None and not auto_reset)
        or (tensordict is not None and not _plain(tensordict, env))
    ):
        return None
    stepper = stepper_of(env)
    if stepper is None or len(env._done_levels) != 1:
        return None
    root = env.reset(tensordict) if auto_reset else env.maybe_reset(tensordict)
    if not is_current(env, stepper):  # the reset changed how the env steps (a batched env's plan)
        rest = {**options, "auto_reset": False, "tensordict": root}
        return general(env, max_steps, policy, callback, **rest)
    loop = _Loop(env, stepper, policy, callback, options, root is tensordict, general)
    return loop.run(root, max_steps)


class _Resume:
    """The policy for the general path taking over: the first root already went through it."""

    def __init__(self, act: Callable) -> None:
        self.act = act
        self.first = True

    def __call__(self, td: TensorDictBase) -> Any:
        if self.first:
            self.first = False
            return td
        return self.act(td)


class _ObsChunks:
    """Every step's observation leaves, written by the stepper straight into rows of NumPy
    chunks allocated ahead (``rows`` steps each): no array, tensor or stack per step.

    ``arrays[j]`` is the current chunk of leaf ``j`` (``[rows, *leaf.shape]``) and
    ``views[k]`` row ``k`` of every leaf as tensors followed by ``tail``, made once per chunk.
    """

    def __init__(self, leaves: tuple, max_steps: int, tail: tuple = ()) -> None:
        self.tail = tail
        self.specs = [(tuple(leaf.shape), leaf.numpy_dtype) for leaf in leaves]
        row_bytes = sum(dtype.itemsize * int(np.prod(shape)) for shape, dtype in self.specs)
        self.rows = max(1, min(max_steps, CHUNK_ROWS, CHUNK_BYTES // max(row_bytes, 1)))
        self.chunks: list[list[np.ndarray]] = []
        self.arrays: list[np.ndarray] = []
        self.views: list[tuple[torch.Tensor, ...]] = []
        self.new_chunk()

    def new_chunk(self) -> None:
        self.arrays = [np.empty((self.rows, *shape), dtype) for shape, dtype in self.specs]
        views = [torch.from_numpy(array).unbind(0) for array in self.arrays]
        tail = self.tail
        self.views = [(*row, *tail) for row in zip(*views)] if views else [tail] * self.rows
        self.chunks.append(self.arrays)

    def column(self, j: int, start: int, stop: int) -> np.ndarray:
        """Steps ``start:stop`` of leaf ``j`` as a new ``[stop - start, *shape]`` array."""
        rows = self.rows
        parts = [
            chunk[j][max(start - lo, 0) : min(stop - lo, rows)]
            for lo, chunk in zip(range(0, len(self.chunks) * rows, rows), self.chunks)
            if lo < stop and start < lo + rows
        ]
        if not parts:
            shape, dtype = self.specs[j]
            return np.empty((0, *shape), dtype)
        return np.concatenate(parts) if len(parts) > 1 else parts[0].copy()


class _Loop:
    """One rollout through a stepper: the recording state and the step loop."""

    def __init__(
        self,
        env: EnvBase,
        stepper: Stepper,
        policy: Any,
        callback: Callable | None,
        options: dict[str, Any],
        callers_root: bool,
        general: Callable[..., TensorDictBase],
    ) -> None:
        self.env = env
        self.stepper = stepper
        self.general = general
        self.act = env.rand_action if policy is None else policy
        self.callback = callback
        self.break_when_any_done = options.get("break_when_any_done", True)
        self.return_contiguous = options.get("return_contiguous", True)
        # the general path writes "next" into the caller's tensordict at the first step
        self.callers_root = callers_root
        self.batch = env.batch_size
        self.level = env._done_levels[0]  # the done leaves, all at the root
        self.obs_keys = tuple(leaf.key for leaf in stepper.obs_leaves)
        self.scalar_keys = tuple(leaf.key for leaf in stepper.scalar_leaves)
        self.scalar_dtypes = [leaf.numpy_dtype for leaf in stepper.scalar_leaves]
        self.scalar_shapes = [tuple(leaf.shape) for leaf in stepper.scalar_leaves]
        # the flags done is read from (the done rule's sources among those the library gives)
        self.done_keys = done_sources(self.level, self.scalar_keys)
        # "next" in the step contract's order: observations, rewards, done flags
        self.next_order = [
            *env.full_observation_spec.keys(),
            *env.full_reward_spec.keys(),
            *env.full_done_spec.keys(),
        ]
        self.layout: tuple[str, ...] = ()  # the root's keys, read at the first step
        self.root_rows: list[tuple[torch.Tensor, ...]] = []  # each step's root values
        self.obs: _ObsChunks | None = None
        self.scalar_rows: list[tuple] = []  # each step's scalar values as the library gave them
        self.root_device: torch.device | None = None

    # ------------------------------------------------------------------ the loop
    def run(self, root: TensorDictBase, max_steps: int) -> TensorDictBase:
        env, stepper, act = self.env, self.stepper, self.act
        batch, device = self.batch, env.device
        rules = env._step_inputs
        action_key = stepper.action_key
        numpy_action = stepper.numpy_action and not stepper.any_action
        step = stepper.step
        flag_names = self._flag_names()
        falses = tuple(torch.zeros(shape, dtype=torch.bool) for _, shape in flag_names)
        # each row: the step's observations, then False flags (what the shift moves up)
        self.obs = obs = _ObsChunks(stepper.obs_leaves, max_steps, falses)
        rows = obs.rows
        root_rows, scalar_rows = self.root_rows, self.scalar_rows
        callback, break_when_any_done = self.callback, self.break_when_any_done
        any_done_in = self._done_reader()
        layout: tuple[str, ...] = ()
        steps = row = action_at = 0
        for i in range(max_steps):
            out = act(root)
            if out is not None and out is not root:
                root.update(out)
            entries = td_entries(root) if type(root) is TensorDict else None
            if i == 0:
                if entries is None or not self._start(root, entries):
                    return self._hand_over(root, 0, max_steps)
                layout = self.layout
                values_of = tuple_getter(layout)
                action_at = layout.index(action_key)
                next_keys = (*self.obs_keys, *(name for name, _ in flag_names))
                shift = env._step_mdp.shift_layout(layout, next_keys)
            elif entries is None or len(entries) != len(layout):
                return self._hand_over(root, i, max_steps)
            try:
                values = values_of(entries)
            except KeyError:  # a key renamed
                return self._hand_over(root, i, max_steps)
            if not set(map(type, values)) <= _TENSOR:
                return self._hand_over(root, i, max_steps)
            action = values[action_at]
            if rules is not False:
                rules.check(root)
            root_rows.append(values)
            if numpy_action:
                try:
                    action = action.numpy()
                except (RuntimeError, TypeError):  # requires grad
                    action = action.detach().cpu().numpy()
            if row == rows:
                obs.new_chunk()
                row = 0
            scalars = step(action, obs.arrays, row)
            scalar_rows.append(scalars)
            observations = obs.views[row]
            row += 1
            any_done = any_done_in(scalars)
            steps = i + 1
            if i == 0 and self.callers_root or callback is not None:
                next_entries = self._next_entries(observations, scalars, self._flags(scalars))
                td_set_str(root, "next", td_new(next_entries, batch, device))
                if callback is not None:
                    callback(env, root)
            if i == max_steps - 1 or (break_when_any_done and any_done):
                break
            # the flags the shift moves up are False: none was set, or the rows where one was
            # start a new episode (maybe_reset)
            new_root = shift(values, observations)
            if any_done:
                self._reset_finished(new_root, scalars)
            root = td_new(new_root, batch, device)
        return self._result(steps)

    def _done_reader(self) -> Callable[[tuple], bool]:
        """``scalars -> bool(done.any())`` with ``done`` by the done rule (``fill_level``),
        read from the flags the library gave without building them."""
        keys = self.scalar_keys
        at = [keys.index(key) for key in self.done_keys]
        if not at:
            return lambda scalars: False
        if not self.batch:  # one flag each, a Python or NumPy bool (or a 1-element array)
            if len(at) == 1:
                return lambda scalars: bool(scalars[at[0]])
            first, second = at
            return lambda scalars: bool(scalars[first] or scalars[second])
        if len(at) == 1:
            return lambda scalars: any_true(scalars[at[0]])
        first, second = at
        return lambda scalars: any_true(scalars[first]) or any_true(scalars[second])

    def _done_in(self, scalars: tuple) -> np.ndarray:
        """This step's ``done`` (a new NumPy bool array), by the done rule from the flags the
        library gave (``done_sources``)."""
        keys = self.scalar_keys
        flags = [np.asarray(scalars[keys.index(key)], bool) for key in self.done_keys]
        done = flags[0].copy()
        for flag in flags[1:]:
            done = done_from(done, flag.reshape(done.shape))
        return done

    def _flag_names(self) -> list[tuple[str, torch.Size]]:
        return [(name, shape) for name, shape in zip(self.level.names, self.level.shapes)]

    def _flags(self, scalars: tuple) -> dict[str, Any]:
        """This step's done leaves as NumPy arrays of their shape, completed by the done rule."""
        present = {}
        for key, value, dtype, shape in zip(
            self.scalar_keys, scalars, self.scalar_dtypes, self.scalar_shapes
        ):
            if key in self.level.names:
                present[key] = np.asarray(value, dtype=dtype).reshape(shape)
        fill_level(self.level, present, lambda spec: np.zeros(tuple(spec.shape), dtype=bool))
        return present

    def _next_entries(self, observations: list, scalars: tuple, flags: dict) -> dict:
        """The step's ``"next"`` entries (tensors), in the contract's order."""
        values = dict(zip(self.obs_keys, observations))
        for key, value, dtype, shape in zip(
            self.scalar_keys, scalars, self.scalar_dtypes, self.scalar_shapes
        ):
            if key not in flags:
                values[key] = torch.from_numpy(np.asarray(value, dtype=dtype).reshape(shape))
        for key, value in flags.items():
            values[key] = torch.from_numpy(value)
        return {key: values[key] for key in self.next_order if key in values}

    def _start(self, root: TensorDict, entries: dict) -> bool:
        """Read the layout of the first root (after the policy): only tensors, no "next"."""
        if (
            self.stepper.action_key not in entries
            or "next" in entries
            or any(key in entries for key in self.env.reward_keys)
            or not all(type(value) is torch.Tensor for value in entries.values())
        ):
            return False
        self.layout = tuple(entries)
        self.root_device = root.device
        return True

    def _reset_finished(self, new_root: dict, scalars: tuple) -> None:
        """Start new episodes where this step's ``done`` holds (as ``maybe_reset``): their
        observations in ``new_root`` become the reset's."""
        stepper = self.stepper
        buffers = [np.empty((1, *shape), dtype) for shape, dtype in self.obs.specs]
        if not self.batch:
            stepper.reset(None, buffers, 0)
            for key, buffer in zip(self.obs_keys, buffers):
                new_root[key] = torch.from_numpy(buffer[0])
            return
        done = self._done_in(scalars)
        mask = torch.from_numpy(done.reshape(*self.batch, 1))
        request = td_new({"_reset": mask}, self.batch, self.env.device)
        stepper.reset(request if stepper.reset_reads_input else None, buffers, 0)
        rows = mask.reshape(-1)
        for key, buffer in zip(self.obs_keys, buffers):
            new, old = torch.from_numpy(buffer[0]), new_root[key]
            where = rows.reshape(-1, *([1] * (new.ndim - 1)))
            new_root[key] = torch.where(where, new, old)

    # ------------------------------------------------------------------ results
    def _next_columns(self, start: int, stop: int) -> dict[str, torch.Tensor]:
        """Steps ``start:stop`` of every ``"next"`` leaf, ``[*batch, T, ...]``, in order."""
        values = {
            key: self._time_after_batch(self.obs.column(j, start, stop))
            for j, key in enumerate(self.obs_keys)
        }
        rows = self.scalar_rows[start:stop]
        present = {}
        for j, (key, dtype, shape) in enumerate(
            zip(self.scalar_keys, self.scalar_dtypes, self.scalar_shapes)
        ):
            given = [row[j] for row in rows]
            try:
                array = np.asarray(given, dtype=dtype).reshape(len(given), *shape)
            except ValueError:  # steps of different shapes, e.g. scalars and (1,) arrays
                array = np.stack([np.asarray(v, dtype=dtype).reshape(shape) for v in given])
            if key in self.level.names:
                present[key] = array
            else:
                values[key] = self._time_after_batch(array)
        steps = len(rows)
        fill_level(self.level, present, lambda spec: np.zeros((steps, *spec.shape), dtype=bool))
        for key, array in present.items():
            values[key] = self._time_after_batch(array)
        return {key: values[key] for key in self.next_order if key in values}

    def _time_after_batch(self, array: np.ndarray) -> torch.Tensor:
        """A ``[T, *batch, ...]`` array as a ``[*batch, T, ...]`` tensor."""
        if self.batch:
            array = np.ascontiguousarray(np.moveaxis(array, 0, 1))
        return torch.from_numpy(array)

    def _result(self, steps: int) -> TensorDictBase:
        dim = len(self.batch)
        batch = torch.Size((*self.batch, steps))
        try:
            next_source = self._next_columns(0, steps)
            columns = zip(*self.root_rows)
            source = {key: torch.stack(column, dim) for key, column in zip(self.layout, columns)}
        except RuntimeError:  # entries whose shape changed between steps
            if self.return_contiguous:
                raise
            out = LazyStackedTensorDict.maybe_dense_stack(self._steps(steps), dim)
        else:
            source["next"] = td_new(next_source, batch, self.env.device)
            out = td_new(source, batch, self.root_device)
        out.refine_names(..., "time")
        return out

    def _steps(self, steps: int) -> list[TensorDict]:
        """The recorded steps as one transition tensordict each."""
        out = []
        dim = len(self.batch)
        for i in range(steps):
            source = dict(zip(self.layout, self.root_rows[i]))
            nxt = {key: value.select(dim, 0) for key, value in self._next_columns(i, i + 1).items()}
            source["next"] = td_new(nxt, self.batch, self.env.device)
            out.append(td_new(source, self.batch, self.root_device))
        return out

    def _hand_over(self, root: TensorDictBase, step: int, max_steps: int) -> TensorDictBase:
        """Run steps ``step:`` on the general path (its policy skips ``root``, already seen)."""
        del self.root_rows[step:]
        rest = self.general(
            self.env,
            max_steps - step,
            _Resume(self.act),
            self.callback,
            auto_reset=False,
            break_when_any_done=self.break_when_any_done,
            return_contiguous=self.return_contiguous,
            tensordict=root,
        )
        if step == 0:
            return rest
        dim = len(self.batch)
        steps = self._steps(step) + list(rest.unbind(dim))
        if self.return_contiguous:
            out = torch.stack(steps, dim)
        else:
            out = LazyStackedTensorDict.maybe_dense_stack(steps, dim)
        out.refine_names(..., "time")
        return out

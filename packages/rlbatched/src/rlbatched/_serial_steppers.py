"""SerialEnv's stepper path: sub-envs stepped straight into the batched output buffers.

When every sub-env offers a ``rlcore.Stepper`` with the same layout (every unbatched
``GymEnv`` does: see ``rlcore._stepper``), a batched step allocates one NumPy buffer
``[N, *shape]`` per observation leaf, lets each sub-env write its row, and wraps the buffers as
the step's tensors: no tensordict per sub-env, no stack. The scalar leaves (reward, the
library's end flags) are gathered a column at a time; the missing done flags come from the
step contract's rule (``fill_level``). Resets do the same, rows that are not reset taking the
input's values (or zeros), as the general path's templates do; a reset row's done flags are
the contract's (False).

The result is the general path's, leaf for leaf: keys in the contract's order, shapes, dtypes,
values and device; errors carry the same note naming the sub-env. Whether it applies is decided
when the sub-envs start; a step or reset checks, with one dict lookup per sub-env, that no
sub-env's specs changed since (a change makes the batched env decide again). A reset with
keyword arguments, or whose input holds values the buffers cannot take as they are (another
dtype, a gradient, another device), takes the general path.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rlcore import EnvBase, StepLeaf, Stepper, fill_level, is_current, stepper_of
from rlcore.step_inputs import get_many
from rlspecs.private_apis import td_new

from . import _tensordict_ops

__all__ = ["SUB_ENV_NOTE", "SerialStepper", "SteppedBatch", "note_sub_env", "step_rows"]

SUB_ENV_NOTE = "raised by sub-env {index} of {owner} during {phase}"


def note_sub_env(err: BaseException, index: int, phase: str, owner: str = "SerialEnv") -> None:
    """Add to ``err`` the note naming the sub-env that raised it (PEP 678's ``__notes__``).

    ``BaseException.add_note`` is Python 3.11+; on 3.10 the note goes into ``__notes__``
    directly, where pytest and the ``exceptiongroup`` backport's traceback show it.
    """
    note = SUB_ENV_NOTE.format(index=index, owner=owner, phase=phase)
    if hasattr(err, "add_note"):
        err.add_note(note)
    else:  # Python 3.10
        err.__notes__ = [*getattr(err, "__notes__", ()), note]


def step_rows(steppers: Sequence[Stepper], actions: Sequence, out: list) -> list[tuple]:
    """Step sub-env ``i`` with ``actions[i]`` into row ``i`` of ``out``; each one's scalars.

    An error gets the note naming the sub-env that raised it (``note_sub_env``).
    """
    scalars = []
    index = 0
    try:
        for index, (stepper, action) in enumerate(zip(steppers, actions)):
            scalars.append(stepper.step(action, out, index))
    except Exception as err:
        note_sub_env(err, index, "step")
        raise
    return scalars


class SteppedBatch:
    """The steppers of a SerialEnv's sub-envs and the batched buffers they fill.

    ``SerialEnv`` keeps one in ``_stepped`` while every sub-env offers a matching stepper (with
    unbatched ``rllibs.GymEnv`` sub-envs, for instance), None otherwise.

    Examples:
        >>> from rlbatched import SerialEnv
        >>> from rlmocks import CountingEnv
        >>> env = SerialEnv(2, CountingEnv)
        >>> env.start()
        >>> env._stepped is None  # CountingEnv offers no stepper: the general path
        True
    """

    def __init__(self, batched: EnvBase, envs: Sequence[EnvBase], steppers: list[Stepper]):
        first = steppers[0]
        num = batched.batch_size[0]
        devices = {env.device for env in envs}
        self.envs = list(envs)
        self.steppers = steppers
        self.batch_size = batched.batch_size
        self.device = devices.pop() if len(devices) == 1 else None
        self.action_key = first.action_key
        self.numpy_action = first.numpy_action
        self.reset_reads_input = first.reset_reads_input
        self.obs_keys = [leaf.key for leaf in first.obs_leaves]
        self.obs_buffers = _buffer_specs(first.obs_leaves, num)
        self.obs_leaves = first.obs_leaves
        self.level = batched._done_levels[0]  # the done leaves, all at the root
        self.scalars = [
            (leaf.key, (num, *leaf.shape), tuple(leaf.shape), leaf.numpy_dtype)
            for leaf in first.scalar_leaves
        ]
        spec = batched.output_spec
        # the step contract's order: observations, rewards, done flags (a reset: no rewards)
        obs = list(spec["full_observation_spec"].keys())
        done = list(spec["full_done_spec"].keys())
        self.next_order = [*obs, *spec["full_reward_spec"].keys(), *done]
        self.reset_order = [*obs, *done]

    @classmethod
    def build(cls, batched: EnvBase, envs: Sequence[EnvBase]) -> SteppedBatch | None:
        """The stepped batch of ``envs`` (``batched``'s sub-envs), or None when one of them has
        no stepper, is batched itself, or its stepper's layout differs from the others'."""
        steppers = [stepper_of(env) for env in envs]
        first = steppers[0]
        if first is None or len(batched._done_levels) != 1:
            return None
        if any(
            stepper is None
            or env.batch_size
            or stepper.action_key != first.action_key
            or stepper.numpy_action != first.numpy_action
            or stepper.reset_reads_input != first.reset_reads_input
            or stepper.obs_leaves != first.obs_leaves
            or stepper.scalar_leaves != first.scalar_leaves
            for env, stepper in zip(envs, steppers)
        ):
            return None
        return cls(batched, envs, steppers)

    def current(self) -> bool:
        """Whether every stepper still describes its sub-env (no spec changed since)."""
        for env, stepper in zip(self.envs, self.steppers):
            if not is_current(env, stepper):
                return False
        return True

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The next step of every sub-env (what the general path stacks), from the batched input."""
        action = get_many(tensordict, [(self.action_key,)])[0]
        if self.numpy_action:
            try:
                rows = action.numpy()
            except (RuntimeError, TypeError):  # requires grad, or not on the CPU
                rows = action.detach().cpu().numpy()
        else:
            rows = action.unbind(0)
        out = [np.empty(shape, dtype) for shape, dtype in self.obs_buffers]
        scalars = step_rows(self.steppers, rows, out)
        from_numpy = torch.from_numpy
        source = {key: from_numpy(buffer) for key, buffer in zip(self.obs_keys, out)}
        flags = {}
        names = self.level.names
        for (key, shape, leaf_shape, dtype), column in zip(self.scalars, zip(*scalars)):
            value = _column(column, shape, leaf_shape, dtype)
            if key in names:
                flags[key] = value
            else:
                source[key] = from_numpy(value)
        fill_level(self.level, flags, lambda spec: np.zeros(tuple(spec.shape), dtype=bool))
        for key, value in flags.items():
            source[key] = from_numpy(value)
        return td_new(_ordered(source, self.next_order), self.batch_size, self.device)

    def reset(
        self, tensordict: TensorDictBase | None, needs: list[bool], template_device: object
    ) -> TensorDictBase | None:
        """Reset the sub-envs flagged in ``needs``; None where the general path must do it.

        ``template_device``: the device of the general path's zero templates (the rows not
        reset).
        """
        leaves = [*self.obs_leaves, *self._flag_leaves()]
        given = []
        if tensordict is not None and not all(needs):
            for j, leaf in enumerate(leaves):
                value = tensordict.get(leaf.key, None)
                if value is None:
                    continue
                if not _fits(value, self.batch_size, leaf):
                    return None
                given.append((j, value.numpy()))
        rows = None
        if tensordict is not None and self.reset_reads_input:
            rows = _tensordict_ops.unbind(tensordict)
        out = [np.zeros(shape, dtype) for shape, dtype in _buffer_specs(leaves, self.batch_size[0])]
        row = 0
        try:
            for row, stepper in enumerate(self.steppers):
                if needs[row]:
                    stepper.reset(None if rows is None else rows[row], out, row)
                    # the done flags of a reset row: False by the step contract (zeros)
                else:
                    for j, values in given:
                        out[j][row] = values[row]
        except Exception as err:
            note_sub_env(err, row, "reset")
            raise
        source = {leaf.key: torch.from_numpy(buffer) for leaf, buffer in zip(leaves, out)}
        devices = {self.device if need else template_device for need in needs}
        device = devices.pop() if len(devices) == 1 else None
        return td_new(_ordered(source, self.reset_order), self.batch_size, device)

    def _flag_leaves(self) -> list[StepLeaf]:
        return [
            StepLeaf(name, torch.Size(shape[1:]), spec.dtype)
            for name, shape, spec in zip(self.level.names, self.level.shapes, self.level.specs)
        ]


class SerialStepper(Stepper):
    """A SerialEnv's sub-env steppers as one stepper of batch ``(N,)``, for its rollout.

    ``EnvBase.rollout`` runs its stepper loop on it (``rlcore._rollout_stepper``), as for a
    vector ``GymEnv``: row ``row`` of a buffer is the batched step's ``[N, ...]`` block, which
    sub-env ``i`` fills at ``[row, i]``; the scalar leaves come back a column at a time. A reset
    resets the sub-envs its ``"_reset"`` mask flags (all without one) and leaves the other rows
    as they are: the rollout merges by the mask. Offered where the sub-envs' resets read no
    input (``SerialEnv._stepper``).

    With ``rllibs.GymEnv`` sub-envs, ``stepper_of(SerialEnv(2, lambda: GymEnv("Pendulum-v1")))``
    is one, its observation leaf of shape ``(2, 3)``.

    Examples:
        >>> from rlbatched import SerialEnv
        >>> from rlcore import stepper_of
        >>> from rlmocks import CountingEnv
        >>> stepper_of(SerialEnv(2, CountingEnv)) is None  # its sub-envs offer no stepper
        True
    """

    def __init__(self, batch: SteppedBatch, open_for_step: Callable[[], None]) -> None:
        first = batch.steppers[0]
        self.open_for_step = open_for_step  # the env's: raises once it is closed
        num = batch.batch_size[0]
        self.batch = batch
        self.steppers = batch.steppers
        self.action_key = first.action_key
        self.numpy_action = first.numpy_action
        self.reset_reads_input = True  # the "_reset" mask
        self.obs_leaves = tuple(_batched(leaf, num) for leaf in first.obs_leaves)
        self.scalar_leaves = tuple(_batched(leaf, num) for leaf in first.scalar_leaves)
        self.columns = [(shape, leaf_shape, dtype) for _, shape, leaf_shape, dtype in batch.scalars]

    def step(self, action: Any, out: list, row: int) -> tuple:
        """Every sub-env's step with its row of ``action``, into block ``row`` of ``out``."""
        self.open_for_step()
        blocks = [buffer[row] for buffer in out]
        rows = action if self.numpy_action else action.unbind(0)
        scalars = step_rows(self.steppers, rows, blocks)
        return tuple(
            _column(column, *layout) for layout, column in zip(self.columns, zip(*scalars))
        )

    def reset(self, tensordict: TensorDictBase | None, out: list, row: int) -> None:
        """Reset the sub-envs ``tensordict["_reset"]`` flags (every one without it)."""
        mask = None if tensordict is None else tensordict.get("_reset", None)
        needs = [True] * len(self.steppers) if mask is None else _rows_flagged(mask)
        blocks = [buffer[row] for buffer in out]
        index = 0
        try:
            for index, (stepper, need) in enumerate(zip(self.steppers, needs)):
                if need:
                    stepper.reset(None, blocks, index)
        except Exception as err:
            note_sub_env(err, index, "reset")
            raise


def _batched(leaf: StepLeaf, num: int) -> StepLeaf:
    return StepLeaf(leaf.key, torch.Size((num, *leaf.shape)), leaf.dtype)


def _rows_flagged(mask: torch.Tensor) -> list[bool]:
    """Which rows a ``"_reset"`` mask flags (any of a row's flags), as Python bools."""
    if mask.numel() == mask.shape[0]:  # one flag a row: read them as they are
        return mask.reshape(-1).tolist()
    return mask.reshape(mask.shape[0], -1).any(-1).tolist()


def _ordered(source: dict, order: list) -> dict:
    """``source`` in ``order`` (its keys are exactly those of ``order``)."""
    return {key: source[key] for key in order}


def _column(values: tuple, shape: tuple, leaf_shape: tuple, dtype: np.dtype) -> np.ndarray:
    """One scalar leaf of every sub-env, ``[N, *leaf_shape]``; each value read as the general
    path reads it (``np.asarray(value, dtype).reshape(leaf_shape)``) when they differ in shape.
    """
    try:
        return np.array(values, dtype).reshape(shape)
    except ValueError:  # values of different shapes, e.g. floats and (1,) arrays
        return np.stack([np.asarray(value, dtype).reshape(leaf_shape) for value in values])


def _buffer_specs(leaves: Sequence[StepLeaf], num: int) -> list[tuple[tuple, np.dtype]]:
    return [((num, *leaf.shape), leaf.numpy_dtype) for leaf in leaves]


def _fits(value: object, batch_size: torch.Size, leaf: StepLeaf) -> bool:
    """Whether a given reset-input value can be copied into the buffers unchanged."""
    return (
        type(value) is torch.Tensor
        and value.dtype == leaf.dtype
        and value.shape == (*batch_size, *leaf.shape)
        and value.device.type == "cpu"
        and not value.requires_grad
    )

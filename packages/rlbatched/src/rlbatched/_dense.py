"""SerialEnv's fast path: sub-envs stepped straight into the batched output buffers.

When every sub-env offers a ``rlcore.DenseStepper`` with the same layout (every unbatched
``GymEnv`` does: see ``rlcore._dense_step``), a batched step allocates one NumPy buffer
``[N, *shape]`` per output leaf, lets each sub-env write its row, and wraps the buffers as the
step's tensors: no tensordict per sub-env, no stack. Resets do the same, rows that are not reset
taking the input's values (or zeros), as the general path's templates do.

The result is the general path's, leaf for leaf: keys in the same order, shapes, dtypes,
values and device; errors carry the same note naming the sub-env. Whether it applies is decided
when the sub-envs start; a step or reset checks, with one dict lookup per sub-env, that no
sub-env's specs changed since (a change makes the batched env decide again). A reset with
keyword arguments, or whose input holds values the buffers cannot take as they are (another
dtype, a gradient, another device), takes the general path.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from tensordict import TensorDictBase

from rlcore import DenseLeaf, DenseStepper, EnvBase, dense_stepper, is_current
from rlspecs.private_apis import td_new

from . import _td_fast

__all__ = ["DenseBatch", "SUB_ENV_NOTE", "note_sub_env"]

SUB_ENV_NOTE = "raised by sub-env {index} of SerialEnv during {phase}"


def note_sub_env(err: BaseException, index: int, phase: str) -> None:
    """Add to ``err`` the note naming the sub-env that raised it (PEP 678's ``__notes__``).

    ``BaseException.add_note`` is Python 3.11+; on 3.10 the note goes into ``__notes__``
    directly, where pytest and the ``exceptiongroup`` backport's traceback show it.
    """
    note = SUB_ENV_NOTE.format(index=index, phase=phase)
    if hasattr(err, "add_note"):
        err.add_note(note)
    else:  # Python 3.10
        err.__notes__ = [*getattr(err, "__notes__", ()), note]


def _numpy_dtype(dtype: torch.dtype) -> np.dtype:
    return torch.empty((), dtype=dtype).numpy().dtype


class DenseBatch:
    """The dense steppers of a SerialEnv's sub-envs and the batched buffers they fill.

    ``SerialEnv`` keeps one in ``_dense`` while every sub-env offers a matching stepper (with
    ``rllibs.GymEnv`` sub-envs, for instance), None otherwise.

    Examples:
        >>> from rlbatched import SerialEnv
        >>> from rlmocks import CountingEnv
        >>> env = SerialEnv(2, CountingEnv)
        >>> env.start()
        >>> env._dense is None  # CountingEnv has no dense stepper: the general path
        True
    """

    def __init__(
        self,
        envs: Sequence[EnvBase],
        steppers: list[DenseStepper],
        batch_size: torch.Size,
        reset_order: list[int],
        template_device: torch.device | None,
    ) -> None:
        first = steppers[0]
        devices = {env.device for env in envs}
        self.envs = list(envs)
        self.steppers = steppers
        self.batch_size = batch_size
        self.device = devices.pop() if len(devices) == 1 else None
        self.template_device = template_device
        self.action_key = first.action_key
        self.numpy_action = first.numpy_action
        self.reset_reads_input = first.reset_reads_input
        self.step_keys = [leaf.key for leaf in first.step_leaves]
        self.step_buffers = _buffer_specs(first.step_leaves, batch_size[0])
        self.scalars = [
            (leaf.key, (batch_size[0], *leaf.shape), tuple(leaf.shape), np_dtype)
            for leaf, (_, np_dtype) in zip(
                first.scalar_leaves, _buffer_specs(first.scalar_leaves, batch_size[0])
            )
        ]
        self.reset_leaves = first.reset_leaves
        self.reset_buffers = _buffer_specs(first.reset_leaves, batch_size[0])
        self.reset_order = reset_order  # output position -> stepper leaf

    @classmethod
    def build(
        cls,
        envs: Sequence[EnvBase],
        batch_size: torch.Size,
        reset_keys: list,
        template: TensorDictBase,
    ) -> DenseBatch | None:
        """The dense batch of ``envs``, or None when one of them has no (matching) stepper.

        ``reset_keys``: the keys the general path's reset returns, in its order; ``template``:
        its zero-filled reset output of one sub-env (leaves not reset take its shape and dtype).
        """
        steppers = [dense_stepper(env) for env in envs]
        first = steppers[0]
        if first is None or any(
            stepper is None
            or stepper.action_key != first.action_key
            or stepper.numpy_action != first.numpy_action
            or stepper.reset_reads_input != first.reset_reads_input
            or stepper.step_leaves != first.step_leaves
            or stepper.scalar_leaves != first.scalar_leaves
            or stepper.reset_leaves != first.reset_leaves
            for stepper in steppers
        ):
            return None
        by_key = {leaf.key: j for j, leaf in enumerate(first.reset_leaves)}
        if len(by_key) != len(reset_keys) or set(by_key) != set(reset_keys):
            return None
        for key, j in by_key.items():
            zero, leaf = template.get(key), first.reset_leaves[j]
            if zero.shape != leaf.shape or zero.dtype != leaf.dtype:
                return None
        order = [by_key[key] for key in reset_keys]
        return cls(envs, steppers, batch_size, order, template.device)

    def current(self) -> bool:
        """Whether every stepper still describes its sub-env (no spec changed since)."""
        for env, stepper in zip(self.envs, self.steppers):
            if not is_current(env, stepper):
                return False
        return True

    def step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """The next step of every sub-env (what the general path stacks), from the batched input."""
        action = _td_fast.get_many(tensordict, [(self.action_key,)])[0]
        if self.numpy_action:
            try:
                rows = action.numpy()
            except (RuntimeError, TypeError):  # requires grad, or not on the CPU
                rows = action.detach().cpu().numpy()
        else:
            rows = action.unbind(0)
        out = [np.empty(shape, dtype) for shape, dtype in self.step_buffers]
        scalars = []
        row = 0
        try:
            for row, (stepper, action_row) in enumerate(zip(self.steppers, rows)):
                scalars.append(stepper.step(action_row, out, row))
        except Exception as err:
            note_sub_env(err, row, "step")
            raise
        from_numpy = torch.from_numpy
        source = {key: from_numpy(buffer) for key, buffer in zip(self.step_keys, out)}
        for (key, shape, leaf_shape, dtype), column in zip(self.scalars, zip(*scalars)):
            source[key] = from_numpy(_column(column, shape, leaf_shape, dtype))
        return td_new(source, self.batch_size, self.device)

    def reset(self, tensordict: TensorDictBase | None, needs: list[bool]) -> TensorDictBase | None:
        """Reset the sub-envs flagged in ``needs``; None where the general path must do it."""
        given = []
        if tensordict is not None and not all(needs):
            for j, leaf in enumerate(self.reset_leaves):
                value = tensordict.get(leaf.key, None)
                if value is None:
                    continue
                if not _fits(value, self.batch_size, leaf):
                    return None
                given.append((j, value.numpy()))
        rows = None
        if tensordict is not None and self.reset_reads_input:
            rows = _td_fast.unbind(tensordict)
        out = [np.zeros(shape, dtype) for shape, dtype in self.reset_buffers]
        row = 0
        try:
            for row, stepper in enumerate(self.steppers):
                if needs[row]:
                    stepper.reset(None if rows is None else rows[row], out, row)
                else:
                    for j, values in given:
                        out[j][row] = values[row]
        except Exception as err:
            note_sub_env(err, row, "reset")
            raise
        leaves = self.reset_leaves
        source = {leaves[j].key: torch.from_numpy(out[j]) for j in self.reset_order}
        return td_new(source, self.batch_size, self._reset_device(needs))

    def _reset_device(self, needs: list[bool]) -> torch.device | None:
        """The device the general path's stack gives: a reset row's, or a template's."""
        devices = {self.device if need else self.template_device for need in needs}
        return devices.pop() if len(devices) == 1 else None


def _column(values: tuple, shape: tuple, leaf_shape: tuple, dtype: np.dtype) -> np.ndarray:
    """One scalar leaf of every sub-env, ``[N, *leaf_shape]``; each value read as the general
    path reads it (``np.asarray(value, dtype).reshape(leaf_shape)``) when they differ in shape.
    """
    try:
        return np.array(values, dtype).reshape(shape)
    except ValueError:  # values of different shapes, e.g. floats and (1,) arrays
        return np.stack([np.asarray(value, dtype).reshape(leaf_shape) for value in values])


def _buffer_specs(leaves: tuple[DenseLeaf, ...], num: int) -> list[tuple[tuple, np.dtype]]:
    return [((num, *leaf.shape), _numpy_dtype(leaf.dtype)) for leaf in leaves]


def _fits(value: object, batch_size: torch.Size, leaf: DenseLeaf) -> bool:
    """Whether a given reset-input value can be copied into the buffers unchanged."""
    return (
        type(value) is torch.Tensor
        and value.dtype == leaf.dtype
        and value.shape == (*batch_size, *leaf.shape)
        and value.device.type == "cpu"
        and not value.requires_grad
    )

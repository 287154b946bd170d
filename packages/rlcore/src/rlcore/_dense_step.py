"""Dense steps: a sub-env that writes its results straight into rows of batched buffers.

A batched env of ``N`` sub-envs (``rlbatched.SerialEnv``) steps each one and stacks the ``N``
tensordicts they return. A sub-env whose results have a fixed dense layout (the same root
leaves, of the same shapes and dtypes, at every step, on the CPU) can skip those tensordicts:
its ``EnvBase._dense_stepper()`` returns a ``DenseStepper``, which steps the underlying
simulator and writes each result into its row of NumPy buffers ``[N, *shape]`` that the
batched env allocates once per batched step and wraps as tensors (``torch.from_numpy``).
Envs that do not implement the hook (``EnvBase`` returns None) take the general path.

The contract, which the batched env relies on to give exactly what the general path gives:

- ``step(action, out, row)`` does what ``_step`` does on a tensordict holding ``action`` under
  ``action_key``. It writes each leaf of ``step_leaves`` (``(key, shape, dtype)``: the shape of
  one sub-env's value, its batch dims included; a torch dtype) into ``out[j][row]``, and returns
  the values of ``scalar_leaves`` (small leaves, such as a reward or a done flag of shape
  ``(1,)``) as a tuple of Python or NumPy values, which the batched env converts a column at a
  time (``np.array(column, dtype)``, reshaped to ``[N, *shape]``). ``_step``'s output is ``step_leaves`` then ``scalar_leaves``, in that
  order; ``_step_proc_data`` is left to the batched env, which runs it on the batch, as it does
  for stacked results. A value that does not have its leaf's shape raises ``ValueError``:
  nothing is broadcast into shape.
- ``action`` is a view of row ``row`` of the batched action: a tensor, or, where the stepper
  sets ``numpy_action``, a NumPy array (of the action's ``.numpy()``, detached and moved to the
  CPU first where needed), for steppers that convert it to NumPy anyway.
- ``reset_leaves`` and ``reset(tensordict, out, row)``: ``reset(tensordict)`` (seeding
  included, done flags complete), every leaf written into ``out[j][row]``. ``tensordict`` is
  the sub-env's row of the batched reset input, or None where there is none or where the
  stepper sets ``reset_reads_input = False`` (its reset ignores it: no per-row split needed).
- A stepper describes the env as its specs were when it was made: ``dense_stepper(env)`` keeps
  it in the env's spec cache, which every spec change empties, and ``is_current(env, stepper)``
  tells whether it still stands (one dict lookup, cheap enough for every step). An env whose
  results change for another reason (a new info reader, say) empties its cache itself.

``rllibs.GymLikeEnv`` implements it (every unbatched ``GymEnv`` whose observations are arrays,
labels or dicts of them).
"""

from __future__ import annotations

import abc
from typing import TYPE_CHECKING, Any, NamedTuple

import torch
from tensordict import TensorDictBase

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["DenseLeaf", "DenseStepper", "dense_stepper", "is_current"]

CACHE_KEY = "dense_stepper"


class DenseLeaf(NamedTuple):
    """One leaf a dense stepper writes: its key, its shape in one sub-env and its dtype.

    Examples:
        >>> DenseLeaf("reward", torch.Size([1]), torch.float32).shape
        torch.Size([1])
    """

    key: str
    shape: torch.Size
    dtype: torch.dtype


class DenseStepper(abc.ABC):
    """Steps and resets one sub-env into row ``row`` of a batched env's NumPy buffers.

    Subclasses set ``action_key``, ``step_leaves``, ``scalar_leaves``, ``reset_leaves`` (and
    ``numpy_action``, ``reset_reads_input`` where they differ from the defaults) and implement
    ``step`` and ``reset`` (the contract: the module docstring).

    Examples:
        >>> import numpy as np
        >>> class Echo(DenseStepper):  # the next observation is the action; reward 1
        ...     action_key, numpy_action = "action", True
        ...     step_leaves = (DenseLeaf("observation", torch.Size([1]), torch.float32),)
        ...     scalar_leaves = (DenseLeaf("reward", torch.Size([1]), torch.float32),)
        ...     reset_leaves = step_leaves
        ...     def step(self, action, out, row):
        ...         out[0][row] = action
        ...         return (1.0,)
        ...     def reset(self, tensordict, out, row):
        ...         out[0][row] = 0.0
        >>> out = [np.zeros((2, 1), np.float32)]
        >>> Echo().step(np.array([0.5], np.float32), out, 1), out[0].tolist()
        ((1.0,), [[0.0], [0.5]])
    """

    action_key: str
    numpy_action: bool = False
    reset_reads_input: bool = True
    step_leaves: tuple[DenseLeaf, ...]
    scalar_leaves: tuple[DenseLeaf, ...] = ()
    reset_leaves: tuple[DenseLeaf, ...]

    @abc.abstractmethod
    def step(self, action: Any, out: list[Any], row: int) -> tuple:
        """Step with this sub-env's ``action``; write ``step_leaves[j]`` into ``out[j][row]``.

        Returns the values of ``scalar_leaves``, in order.
        """

    @abc.abstractmethod
    def reset(self, tensordict: TensorDictBase | None, out: list[Any], row: int) -> None:
        """Reset as ``reset(tensordict)`` would; write ``reset_leaves[j]`` into ``out[j][row]``."""


def dense_stepper(env: EnvBase) -> DenseStepper | None:
    """``env``'s dense stepper (made once per spec version), or None when it has none.

    Examples:
        >>> dense_stepper(env) is None  # EnvBase's default: the general path
        True
    """
    stepper = env._cache_get(CACHE_KEY, lambda: env._dense_stepper() or False)
    return stepper or None


def is_current(env: EnvBase, stepper: DenseStepper) -> bool:
    """Whether ``stepper`` (from ``dense_stepper(env)``) still describes ``env``.

    Examples:
        >>> stepper = dense_stepper(env)  # None: EnvBase has no dense stepper
        >>> is_current(env, stepper)
        False
    """
    return env.__dict__["_cache"].get(CACHE_KEY) is stepper

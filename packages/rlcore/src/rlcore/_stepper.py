"""Steppers: a library env fills a step's buffers; the step contract does everything else.

An env whose step is a call into a library (every ``rllibs.GymEnv``, unbatched or vector, on
the CPU) offers a ``Stepper`` (``EnvBase._stepper()``): given row ``row`` of NumPy buffers, it
makes the library call, writes the observation leaves there and returns the values of its
scalar leaves (the reward and the end flags the library gave). Every path that steps such an
env uses it instead of building a tensordict per step: the rollout (``EnvBase.rollout``, one
fresh row per step), ``rlbatched.SerialEnv`` (one row per sub-env of the batched buffers) and
``rlbatched.ParallelEnv``'s workers (each sub-env's row of the shared buffers). What a step
means is not the stepper's to say: the input checks, ``done`` from ``terminated | truncated``
and the other missing done flags, which rows reset, the root/``"next"`` shift, recording and
when a rollout stops are the step contract's, on each of those paths as on ``EnvBase.step``.

The protocol:

- ``step(action, out, row)`` does what ``_step`` does on a tensordict holding ``action`` under
  ``action_key``: it writes leaf ``j`` of ``obs_leaves`` (``(key, shape, dtype)``, the shape of
  the env's value, its batch dims included) into ``out[j][row]`` and returns the values of
  ``scalar_leaves`` in order (Python or NumPy values, converted a column at a time). A value
  that does not have its leaf's shape raises ``ValueError``: nothing is broadcast into shape.
  ``action`` is a tensor, or a NumPy array where ``numpy_action`` is set; a stepper that
  sets ``any_action`` too takes either (a caller holding a tensor passes it as it is).
- ``reset(tensordict, out, row)`` does what ``_reset(tensordict)`` does (seeding included) and
  writes the observation leaves; the done flags after a reset are the contract's (False).
  ``tensordict`` is the row's reset input, or None where there is none or where
  ``reset_reads_input`` is False.
- A stepper stands for the ``_step`` and ``_reset`` of the class that defines ``_stepper``,
  as the env's specs were when it was made: ``stepper_of(env)`` gives it only where the env's
  class keeps those and every ``EnvBase`` step method, its leaves are the env's observation,
  reward and done leaves (all at the root), it has no state, one action leaf and at most one
  batch dim, on the CPU, without type checks. It is kept in the env's spec cache, which every
  spec change empties: ``is_current(env, stepper)`` tells whether it still stands.
"""

from __future__ import annotations

import abc
import functools
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from tensordict import TensorDictBase

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["StepLeaf", "Stepper", "is_current", "numpy_dtype", "stepper_of"]

CACHE_KEY = "stepper"
# EnvBase's methods a stepper's paths stand in for: a class changing one keeps the general path
STEP_METHODS = (
    "step",
    "reset",
    "_step_proc_data",
    "_reset_proc_data",
    "maybe_reset",
    "step_and_maybe_reset",
    "rollout",
    "_any_done",
)


class StepLeaf(NamedTuple):
    """One leaf a stepper writes: its key, its shape in the env (batch dims included), dtype.

    Examples:
        >>> leaf = StepLeaf("reward", torch.Size([1]), torch.float32)
        >>> leaf.shape, leaf.numpy_dtype
        (torch.Size([1]), dtype('float32'))
    """

    key: str
    shape: torch.Size
    dtype: torch.dtype

    @property
    def numpy_dtype(self) -> np.dtype:
        """The NumPy dtype of this leaf's buffers (``torch.from_numpy`` gives ``dtype``)."""
        return numpy_dtype(self.dtype)


@functools.cache
def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The NumPy dtype whose arrays ``torch.from_numpy`` turns into ``dtype`` tensors (cached:
    asking torch costs microseconds, too much for a step).

    Examples:
        >>> numpy_dtype(torch.float32), numpy_dtype(torch.bool)
        (dtype('float32'), dtype('bool'))
    """
    return torch.empty((), dtype=dtype).numpy().dtype


class Stepper(abc.ABC):
    """Steps and resets one env into row ``row`` of NumPy buffers (the protocol: module doc).

    Subclasses set ``action_key``, ``obs_leaves``, ``scalar_leaves`` (and ``numpy_action``,
    ``any_action``, ``reset_reads_input`` where they differ from the defaults) and implement ``step`` and
    ``reset``.

    Examples:
        >>> import numpy as np
        >>> class Echo(Stepper):  # the next observation is the action; reward 1, never done
        ...     action_key, numpy_action = "action", True
        ...     obs_leaves = (StepLeaf("observation", torch.Size([1]), torch.float32),)
        ...     scalar_leaves = (StepLeaf("reward", torch.Size([1]), torch.float32),)
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
    any_action: bool = False
    reset_reads_input: bool = True
    obs_leaves: tuple[StepLeaf, ...]
    scalar_leaves: tuple[StepLeaf, ...] = ()

    @abc.abstractmethod
    def step(self, action: Any, out: list[Any], row: int) -> tuple:
        """Step with ``action``; write ``obs_leaves[j]`` into ``out[j][row]``.

        Returns the values of ``scalar_leaves``, in order.
        """

    @abc.abstractmethod
    def reset(self, tensordict: TensorDictBase | None, out: list[Any], row: int) -> None:
        """Reset as ``_reset(tensordict)`` would; write ``obs_leaves[j]`` into ``out[j][row]``."""


def _definer(cls: type, name: str, first: bool) -> type | None:
    """The class of ``cls``'s MRO defining ``name``: the nearest one, or the first to (the
    base's own definition)."""
    classes = cls.__mro__ if first else reversed(cls.__mro__)
    for klass in classes:
        if name in vars(klass):
            return klass
    return None


def _class_allows(env: EnvBase) -> bool:
    """Whether ``env``'s class keeps the base's step methods, and ``_step`` and ``_reset`` of
    the class that offers its stepper."""
    cls = type(env)
    for name in STEP_METHODS:
        if _definer(cls, name, first=True) is not _definer(cls, name, first=False):
            return False
    owner = _definer(cls, "_stepper", first=True)
    return owner is not None and cls._step is owner._step and cls._reset is owner._reset


def _describes(env: EnvBase, stepper: Stepper) -> bool:
    """Whether ``stepper``'s leaves are exactly ``env``'s (all at the root, one action)."""
    if len(env.batch_size) > 1 or env.state_keys or env.action_keys != [stepper.action_key]:
        return False
    if any(type(key) is not str for key in (*env.reward_keys, *env.done_keys)):
        return False
    obs = {leaf.key for leaf in stepper.obs_leaves}
    scalars = {leaf.key for leaf in stepper.scalar_leaves}
    return (
        obs == set(env.observation_keys)
        and set(env.reward_keys) <= scalars <= {*env.reward_keys, *env.done_keys}
        and not obs & scalars
    )


def stepper_of(env: EnvBase) -> Stepper | None:
    """``env``'s stepper (made once per spec version), or None where the general path runs.

    Examples:
        >>> stepper_of(env) is None  # EnvBase offers none: every step builds a tensordict
        True
    """

    def make() -> Stepper | bool:
        device = env.device
        if (
            (device is not None and device.type != "cpu")
            or env.__dict__["_run_type_checks"]
            or not _class_allows(env)
        ):
            return False
        stepper = env._stepper()
        return stepper if stepper is not None and _describes(env, stepper) else False

    return env._cache_get(CACHE_KEY, make) or None


def is_current(env: EnvBase, stepper: Stepper) -> bool:
    """Whether ``stepper`` (from ``stepper_of(env)``) still describes ``env``.

    Examples:
        >>> stepper = stepper_of(env)  # None: EnvBase has no stepper
        >>> is_current(env, stepper)
        False
    """
    return env.__dict__["_cache"].get(CACHE_KEY) is stepper

"""``GymLikeEnv``'s dense stepper: library results written straight into a batched env's rows.

A ``SerialEnv`` of wrappers asks each one for a ``rlcore.DenseStepper`` (see
``rlcore._dense_step``); this is the one of ``GymLikeEnv``. Per step it converts the action
as ``_step`` does, calls the library (``frame_skip`` included) and writes the observation, the
reward and the done flags into row ``row`` of the batched env's NumPy buffers: no tensordict and
no tensor per sub-env. It exists where ``_step``'s output is fixed in advance:

- the wrapper is unbatched, on the CPU, runs no info dict reader and no type checks, and its
  class keeps ``GymLikeEnv``'s step and reset methods (as for the fast rollout,
  ``rllibs._gym_rollout``, whose layout plan it shares);
- its observations are written by an ``ObsRows`` made with the reader (``set_specs_from_spaces``
  does it for gymnasium spaces: Box, MultiBinary, Discrete and MultiDiscrete leaves, alone or in
  a flat Dict), and the reader is still the one it was made with.

An observation that does not have its spec's shape raises ``ValueError`` (the buffers never
broadcast a value into shape).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch
from tensordict import TensorDictBase

from rlcore import DenseLeaf, DenseStepper
from rlspecs import TensorSpec

from ._gym_rollout import class_allows, layout_plan
from ._gym_spaces import make_reader, to_numpy

if TYPE_CHECKING:
    from ._gym_like import GymLikeEnv

__all__ = [
    "ActionRows",
    "GymDenseStepper",
    "ObsRows",
    "action_rows",
    "gym_dense_stepper",
    "obs_rows",
]

BAD_OBSERVATION = (
    "{where}: observation {key!r} has shape {got}, but its spec has shape {expected}; the env "
    "must return values of its observation space's shape."
)
FLAG = torch.Size([1])
LeafWriter = Callable[[Any, np.ndarray, int], None]


class ObsRows:
    """How the observations of one unbatched env are written into rows of batched buffers.

    ``leaves``: one ``DenseLeaf`` per observation leaf, in the order ``read_obs`` returns them;
    ``write(obs, out, row)`` writes leaf ``j`` of the library observation ``obs`` into
    ``out[j][row]``; ``read_obs``: the reader it matches (the stepper is dropped if the env's
    reader is replaced).

    Examples:
        >>> from gymnasium.spaces import Box
        >>> from rllibs._gym_spaces import space_to_spec
        >>> space = Box(-1, 1, (2,))
        >>> rows = obs_rows(space, space_to_spec(space), "observation", None)
        >>> out = [np.zeros((3, 2), np.float32)]
        >>> rows.write(np.ones(2), out, 1)
        >>> out[0].tolist()
        [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    """

    __slots__ = ("leaves", "write", "read_obs")

    def __init__(
        self,
        leaves: tuple[DenseLeaf, ...],
        write: Callable[[Any, list, int], None],
        read_obs: Any,
    ) -> None:
        self.leaves = leaves
        self.write = write
        self.read_obs = read_obs


class ActionRows(NamedTuple):
    """An action writer that takes NumPy rows unchanged: ``write_numpy`` (None: the row as is).

    ``write``: the env's ``_write_action`` it stands for (the stepper checks it is still the
    env's).
    """

    write: Any
    write_numpy: Callable[[np.ndarray], Any] | None


def action_rows(space: Any, write: Any) -> ActionRows | None:
    """Where ``write`` (``make_writer(space, ...)``, unbatched) does the same on NumPy rows.

    A Box writer is ``to_numpy``: a NumPy row goes as it is. A Discrete writer reads the row
    with ``tolist()`` or ``int()``, which give the same on a NumPy row as on a tensor.

    Examples:
        >>> from gymnasium.spaces import Box
        >>> action_rows(Box(-1, 1, (2,)), to_numpy).write_numpy is None
        True
    """
    from gymnasium.spaces import Box, Discrete

    if isinstance(space, Box) and write is to_numpy:
        return ActionRows(write, None)
    if isinstance(space, Discrete):
        return ActionRows(write, write)
    return None


def obs_rows(space: Any, spec: TensorSpec, key: str | None, read_obs: Any) -> ObsRows | None:
    """The ``ObsRows`` of an unbatched observation ``space``, or None where none is offered.

    ``key``: where a non-Dict observation goes (a Dict space gives its own keys); ``read_obs``:
    the env's reader made from the same space and spec.
    """
    from gymnasium.spaces import Dict

    if isinstance(space, Dict):
        writers = [_leaf_writer(sub, spec[name], name) for name, sub in space.spaces.items()]
        if any(writer is None for writer in writers):
            return None
        keys = list(space.spaces)
        leaves = tuple(DenseLeaf(name, spec[name].shape, spec[name].dtype) for name in keys)
        pairs = list(zip(keys, writers))

        def write(obs: Any, out: list, row: int) -> None:
            for j, (name, write_leaf) in enumerate(pairs):
                write_leaf(obs[name], out[j], row)

        return ObsRows(leaves, write, read_obs)
    write_leaf = _leaf_writer(space, spec, key)
    if write_leaf is None:
        return None
    return ObsRows(
        (DenseLeaf(key, spec.shape, spec.dtype),),
        lambda obs, out, row: write_leaf(obs, out[0], row),
        read_obs,
    )


def _leaf_writer(space: Any, spec: TensorSpec, key: str) -> LeafWriter | None:
    """``(value, buffer, row) -> None`` for one leaf, giving what its reader gives."""
    from gymnasium.spaces import Box, Discrete, MultiBinary, MultiDiscrete

    shape = tuple(spec.shape)
    if isinstance(space, (Box, MultiBinary)) and tuple(space.shape) == shape:
        dtype = space.dtype  # the reader's: np.asarray(value, dtype) then from_numpy

        def write_array(value: Any, buffer: np.ndarray, row: int) -> None:
            array = np.asarray(value, dtype=dtype)
            if array.shape != shape:
                raise ValueError(_bad_shape(key, array.shape, shape))
            buffer[row] = array

        return write_array
    if isinstance(space, (Discrete, MultiDiscrete)) and spec.dtype == torch.int64:
        read = make_reader(space, spec)  # labels or one-hot vectors, always int64

        def write_labels(value: Any, buffer: np.ndarray, row: int) -> None:
            tensor = read(value)
            if tuple(tensor.shape) != shape:
                raise ValueError(_bad_shape(key, tuple(tensor.shape), shape))
            buffer[row] = tensor.numpy()

        return write_labels
    return None


def _bad_shape(key: str, got: tuple, expected: tuple) -> str:
    return BAD_OBSERVATION.format(
        where="GymLikeEnv dense step", key=key, got=got, expected=expected
    )


class GymDenseStepper(DenseStepper):
    """Steps and resets one ``GymLikeEnv`` into rows of a batched env's buffers.

    Made by ``gym_dense_stepper`` (through ``rlcore.dense_stepper(env)``), which checks that
    it applies. The observation leaves are written into rows; the reward and done flags are
    returned (``scalar_leaves``).

    Examples:
        >>> from rlcore import dense_stepper
        >>> from rllibs import GymEnv
        >>> stepper = dense_stepper(GymEnv("Pendulum-v1"))
        >>> [leaf.key for leaf in stepper.step_leaves + stepper.scalar_leaves]
        ['observation', 'reward', 'terminated', 'truncated', 'done']
        >>> out = [np.ones((2, 3), np.float32)]
        >>> stepper.step(np.array([0.5], np.float32), out, 1)[1:]  # terminated, truncated, done
        (False, False, False)
        >>> out[0][0].tolist()  # row 0 untouched
        [1.0, 1.0, 1.0]
    """

    action_key = "action"

    def __init__(self, env: GymLikeEnv, rows: ObsRows, actions: ActionRows | None) -> None:
        self.env = env
        self.write_obs = rows.write
        self.numpy_action = actions is not None
        self.reset_reads_input = not _reset_ignores_input(env)
        # NumPy rows: the env's writer minus its to_numpy (None: the row itself)
        self.write_numpy = actions.write_numpy if actions is not None else None
        self.n_obs = len(rows.leaves)
        reward_dtype = torch.from_numpy(np.zeros(0, dtype=env._reward_dtype)).dtype
        flags = tuple(DenseLeaf(name, FLAG, torch.bool) for name in DONE_ORDER)
        self.step_leaves = rows.leaves
        self.scalar_leaves = (DenseLeaf("reward", FLAG, reward_dtype), *flags)
        self.reset_leaves = (*rows.leaves, *flags)

    def step(self, action: Any, out: list, row: int) -> tuple:
        """``GymLikeEnv._step`` on ``action``: observations into row ``row``, flags returned."""
        env = self.env
        if not self.numpy_action:
            library_action = env._write_action(action)
        elif self.write_numpy is None:
            library_action = action
        else:
            library_action = self.write_numpy(action)
        if env.frame_skip == 1:
            obs, reward, terminated, truncated, _ = env._env_step(library_action)
        else:
            obs, reward, terminated, truncated, _ = env._library_step(library_action)
        self.write_obs(obs, out, row)
        return reward, terminated, truncated, terminated | truncated

    def reset(self, tensordict: TensorDictBase | None, out: list, row: int) -> None:
        """``GymLikeEnv._reset(tensordict)`` (the pending seed included), into row ``row``."""
        env = self.env
        obs, _ = env._env_reset(tensordict, env._take_seed(None))
        self.write_obs(obs, out, row)
        j = self.n_obs
        out[j][row] = False
        out[j + 1][row] = False
        out[j + 2][row] = False


DONE_ORDER = ("terminated", "truncated", "done")  # GymLikeEnv's order in _step and _reset


def _reset_ignores_input(env: GymLikeEnv) -> bool:
    """True where ``_env_reset`` is GymWrapper's, which reads no tensordict when unbatched."""
    from ._gym import GymWrapper

    return type(env)._env_reset is GymWrapper._env_reset


def gym_dense_stepper(env: GymLikeEnv) -> GymDenseStepper | None:
    """``env``'s dense stepper, or None where ``_step``'s output is not fixed in advance.

    Examples:
        >>> from rllibs import GymEnv
        >>> gym_dense_stepper(GymEnv("CartPole-v1")) is not None
        True
        >>> gym_dense_stepper(GymEnv("CartPole-v1", num_envs=2)) is None  # batched
        True
    """
    rows = env.__dict__.get("_obs_rows")
    device = env.device
    if (
        rows is None
        or rows.read_obs is not env.__dict__.get("_read_obs")
        or env.batch_size
        or env._info_dict_readers
        or env.__dict__["_run_type_checks"]
        or (device is not None and device.type != "cpu")
        or not class_allows(type(env))
        or layout_plan(env) is None
    ):
        return None
    actions = env.__dict__.get("_action_rows")
    if actions is not None and actions.write is not env.__dict__.get("_write_action"):
        actions = None  # the writer was replaced: tensors, through the env's writer
    return GymDenseStepper(env, rows, actions)

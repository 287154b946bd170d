"""Writing a library's observations into rows of NumPy buffers, as the env's reader would.

``GymLikeEnv``'s stepper (``rllibs._gym_stepper``) writes each step's observations with an
``ObsRows``: made from gymnasium spaces by ``obs_rows`` (Box, MultiBinary, Discrete and
MultiDiscrete leaves, alone or in a flat Dict; ``set_specs_from_spaces`` makes them beside the
reader), or through the env's own reader for any other flat observation spec
(``reader_rows``: pixels, DeepMind Control, EnvPool's asynchronous mode). ``action_rows`` says
where a NumPy row of the action can go to the library as it is.

An observation that does not have its spec's shape (or, through a reader, its dtype) raises
``ValueError``: the buffers never broadcast or cast a value into shape.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import torch

from rlcore import StepLeaf
from rlspecs import TensorSpec

from ._gym_spaces import make_reader, to_numpy

if TYPE_CHECKING:
    from ._gym_like import GymLikeEnv

__all__ = ["ActionRows", "ObsRows", "action_rows", "obs_rows", "reader_rows"]

BAD_OBSERVATION = (
    "{where}: observation {key!r} has shape {got}, but its spec has shape {expected}; the env "
    "must return values of its observation space's shape."
)
LeafWriter = Callable[[Any, np.ndarray, int], None]


class ObsRows:
    """How the observations of one env are written into rows of NumPy buffers.

    ``leaves``: one ``StepLeaf`` per observation leaf, in the order ``read_obs`` returns them
    (shapes with the env's batch dims: a vector env's observation of every sub-env is a row);
    ``write(obs, out, row)`` writes leaf ``j`` of the library observation ``obs`` into
    ``out[j][row]``; ``read_obs``: the reader it matches (the stepper is dropped if the env's
    reader is replaced).

    Examples:
        >>> from gymnasium.spaces import Box
        >>> from rllibs._gym_spaces import space_to_spec
        >>> space = Box(-1, 1, (2,))
        >>> rows = obs_rows(space, space_to_spec(space), "observation", None, ())
        >>> out = [np.zeros((3, 2), np.float32)]
        >>> rows.write(np.ones(2), out, 1)
        >>> out[0].tolist()
        [[0.0, 0.0], [1.0, 1.0], [0.0, 0.0]]
    """

    __slots__ = ("leaves", "write", "read_obs")

    def __init__(
        self,
        leaves: tuple[StepLeaf, ...],
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


def action_rows(space: Any, write: Any, batched: bool = False) -> ActionRows | None:
    """Where ``write`` (``make_writer(space, ...)``) does the same on NumPy rows.

    A Box writer is ``to_numpy``: a NumPy row goes as it is. An unbatched Discrete writer reads
    the row with ``tolist()`` or ``int()``, which give the same on a NumPy row as on a tensor.
    Other writers (a batched Discrete one calls tensor methods) take tensors.

    Examples:
        >>> from gymnasium.spaces import Box
        >>> action_rows(Box(-1, 1, (2,)), to_numpy).write_numpy is None
        True
    """
    from gymnasium.spaces import Box, Discrete

    if isinstance(space, Box) and write is to_numpy:
        return ActionRows(write, None)
    if isinstance(space, Discrete) and not batched:
        return ActionRows(write, write)
    return None


def obs_rows(
    space: Any, spec: TensorSpec, key: str | None, read_obs: Any, batch: tuple[int, ...]
) -> ObsRows | None:
    """The ``ObsRows`` of one sub-env's observation ``space``, or None where none is offered.

    ``spec``: the space's (unbatched) spec; ``key``: where a non-Dict observation goes (a Dict
    space gives its own keys); ``read_obs``: the env's reader made from the same space and spec;
    ``batch``: the env's batch size (a vector env's ``(num_envs,)``).
    """
    from gymnasium.spaces import Dict

    if isinstance(space, Dict):
        writers = [_leaf_writer(sub, spec[name], name, batch) for name, sub in space.spaces.items()]
        if any(writer is None for writer in writers):
            return None
        keys = list(space.spaces)
        leaves = tuple(
            StepLeaf(name, torch.Size((*batch, *spec[name].shape)), spec[name].dtype)
            for name in keys
        )
        pairs = list(zip(keys, writers))

        def write(obs: Any, out: list, row: int) -> None:
            for j, (name, write_leaf) in enumerate(pairs):
                write_leaf(obs[name], out[j], row)

        return ObsRows(leaves, write, read_obs)
    write_leaf = _leaf_writer(space, spec, key, batch)
    if write_leaf is None:
        return None
    return ObsRows(
        (StepLeaf(key, torch.Size((*batch, *spec.shape)), spec.dtype),),
        lambda obs, out, row: write_leaf(obs, out[0], row),
        read_obs,
    )


BAD_DTYPE = (
    "{where}: observation {key!r} has dtype {got}, but its spec has dtype {expected}; the env "
    "must return values of its observation spec's dtype."
)


def reader_rows(env: GymLikeEnv) -> ObsRows | None:
    """Rows written through the env's own reader (``_read_obs``), for a flat observation spec.

    Examples:
        >>> from rllibs import GymEnv
        >>> env = GymEnv("Pendulum-v1")
        >>> rows = reader_rows(env)
        >>> out = [np.zeros((1, 3), np.float32)]
        >>> rows.write(np.ones(3, np.float32), out, 0)
        >>> out[0].tolist()
        [[1.0, 1.0, 1.0]]
    """
    spec = env.full_observation_spec
    keys = list(spec.keys(True, True))
    if any(type(key) is not str for key in keys):
        return None
    read = env.__dict__.get("_read_obs")
    if read is None:
        return None
    leaves = tuple(StepLeaf(key, spec[key].shape, spec[key].dtype) for key in keys)

    def write(obs: Any, out: list, row: int) -> None:
        values = read(obs)
        for j, leaf in enumerate(leaves):
            value = values[leaf.key]
            if value.shape != leaf.shape:
                raise ValueError(_bad_shape(leaf.key, tuple(value.shape), tuple(leaf.shape)))
            if value.dtype != leaf.dtype:
                raise ValueError(
                    BAD_DTYPE.format(
                        where="GymLikeEnv stepper",
                        key=leaf.key,
                        got=value.dtype,
                        expected=leaf.dtype,
                    )
                )
            out[j][row] = value.numpy()

    return ObsRows(leaves, write, read)


def _leaf_writer(
    space: Any, spec: TensorSpec, key: str, batch: tuple[int, ...]
) -> LeafWriter | None:
    """``(value, buffer, row) -> None`` for one leaf, giving what its reader gives."""
    from gymnasium.spaces import Box, Discrete, MultiBinary, MultiDiscrete

    shape = (*batch, *spec.shape)
    if isinstance(space, (Box, MultiBinary)) and tuple(space.shape) == tuple(spec.shape):
        dtype = space.dtype  # the reader's: np.asarray(value, dtype) then from_numpy

        def write_array(value: Any, buffer: np.ndarray, row: int) -> None:
            array = np.asarray(value, dtype=dtype)
            if array.shape != shape:
                raise ValueError(_bad_shape(key, array.shape, shape))
            buffer[row] = array

        return write_array
    if isinstance(space, (Discrete, MultiDiscrete)) and spec.dtype == torch.int64:
        read = make_reader(space, spec, len(batch))  # labels or one-hot vectors, always int64

        def write_labels(value: Any, buffer: np.ndarray, row: int) -> None:
            tensor = read(value)
            if tuple(tensor.shape) != shape:
                raise ValueError(_bad_shape(key, tuple(tensor.shape), shape))
            buffer[row] = tensor.numpy()

        return write_labels
    return None


def _bad_shape(key: str, got: tuple, expected: tuple) -> str:
    return BAD_OBSERVATION.format(where="GymLikeEnv stepper", key=key, got=got, expected=expected)

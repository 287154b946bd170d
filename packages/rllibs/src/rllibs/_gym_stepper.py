"""``GymLikeEnv``'s stepper: library results written straight into rows of NumPy buffers.

The rollout, ``SerialEnv`` and ``ParallelEnv``'s workers ask an env for its ``rlcore.Stepper``
(see ``rlcore._stepper``, which also decides where one applies); this is ``GymLikeEnv``'s. Per
step it converts the action as ``_step`` does, calls the library (``frame_skip`` included),
writes the observations into row ``row`` of the buffers (``rllibs._gym_rows``) and returns the
reward and the ``terminated``/``truncated`` flags the library gave; ``done`` and everything
else a step means is the step contract's. It is offered where no info dict reader runs (their
entries have no fixed layout), for unbatched wrappers and vector envs (batch ``(num_envs,)``:
one library call fills the row of every sub-env) alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rlcore import StepLeaf, Stepper

from ._gym_rows import ActionRows, ObsRows, reader_rows

if TYPE_CHECKING:
    from ._gym_like import GymLikeEnv

__all__ = ["GymStepper", "gym_stepper"]


class GymStepper(Stepper):
    """Steps and resets one ``GymLikeEnv`` into row ``row`` of NumPy buffers.

    Made by ``gym_stepper`` (through ``rlcore.stepper_of(env)``, which checks that it applies).
    The observation leaves are written into rows; the reward and the library's
    ``terminated``/``truncated`` flags are returned (``scalar_leaves``): ``done`` is the step
    contract's.

    Examples:
        >>> from rlcore import stepper_of
        >>> from rllibs import GymEnv
        >>> stepper = stepper_of(GymEnv("Pendulum-v1"))
        >>> [leaf.key for leaf in stepper.obs_leaves + stepper.scalar_leaves]
        ['observation', 'reward', 'terminated', 'truncated']
        >>> out = [np.ones((2, 3), np.float32)]
        >>> stepper.step(np.array([0.5], np.float32), out, 1)[1:]  # terminated, truncated
        (False, False)
        >>> out[0][0].tolist()  # row 0 untouched
        [1.0, 1.0, 1.0]
    """

    action_key = "action"

    def __init__(self, env: GymLikeEnv, rows: ObsRows, actions: ActionRows | None) -> None:
        self.env = env
        self.write_obs = rows.write
        self.numpy_action = actions is not None
        self.reset_reads_input = env._reset_reads_input()
        # NumPy rows: the env's writer minus its to_numpy (None: the row itself)
        self.write_numpy = actions.write_numpy if actions is not None else None
        # a writer that reads rows with tolist() or int() takes a tensor as well
        self.any_action = self.write_numpy is not None and self.write_numpy is env._write_action
        reward_dtype = torch.from_numpy(np.zeros(0, dtype=env._reward_dtype)).dtype
        flag = torch.Size((*env.batch_size, 1))
        self.obs_leaves = rows.leaves
        self.scalar_leaves = (
            StepLeaf("reward", flag, reward_dtype),
            StepLeaf("terminated", flag, torch.bool),
            StepLeaf("truncated", flag, torch.bool),
        )

    def step(self, action: Any, out: list, row: int) -> tuple:
        """``GymLikeEnv._step`` on ``action``: observations into row ``row``, the rest returned."""
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
        return reward, terminated, truncated

    def reset(self, tensordict: TensorDictBase | None, out: list, row: int) -> None:
        """``GymLikeEnv._reset(tensordict)`` (the pending seed included), into row ``row``."""
        env = self.env
        obs, _ = env._env_reset(tensordict, env._take_seed(None))
        self.write_obs(obs, out, row)


def gym_stepper(env: GymLikeEnv) -> GymStepper | None:
    """``env``'s stepper, or None where its library's results have no fixed layout.

    Whether a stepper applies at all (the class keeps the step methods, CPU, no type
    checks, ...) is ``rlcore.stepper_of``'s to decide.

    Examples:
        >>> from rllibs import GymEnv
        >>> gym_stepper(GymEnv("CartPole-v1")) is not None
        True
    """
    if env._info_dict_readers:
        return None
    rows = env.__dict__.get("_obs_rows")
    if rows is None or rows.read_obs is not env.__dict__.get("_read_obs"):
        rows = reader_rows(env)  # the reader was replaced (pixels), or is another library's
        if rows is None:
            return None
    actions = env.__dict__.get("_action_rows")
    if actions is not None and actions.write is not env.__dict__.get("_write_action"):
        actions = None  # the writer was replaced: tensors, through the env's writer
    return GymStepper(env, rows, actions)

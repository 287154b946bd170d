"""``SpecDrivenEnv``: an env whose data is whatever its specs describe at the time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase

from rlcore import EnvBase
from rlspecs import Bounded, Composite, Unbounded

__all__ = ["SpecDrivenEnv"]


class SpecDrivenEnv(EnvBase):
    """Outputs exactly what its specs describe: zeros at reset, random observations at steps.

    Starts with an ``"obs"`` observation of shape ``(*batch_size, 3)``, a ``(*batch_size, 1)``
    action in ``[-1, 1]`` and a reward; edit its specs (in place or through the setters) and
    its resets and steps follow, which is what tests of code reacting to spec edits need.
    ``edit(env)``, when given, runs at the end of ``__init__`` (after the key caches were read
    once), as an env that edits its specs in its own constructor would.

    Examples:
        >>> from rlspecs import Unbounded
        >>> env = SpecDrivenEnv(batch_size=(2,))
        >>> env.observation_spec["pixels"] = Unbounded((2, 4, 4))
        >>> env.rollout(3)["next", "pixels"].shape
        torch.Size([2, 3, 4, 4])
    """

    def __init__(
        self,
        batch_size: tuple[int, ...] | torch.Size = (),
        edit: Callable[[SpecDrivenEnv], Any] | None = None,
    ) -> None:
        super().__init__(batch_size=batch_size)
        batch = self.batch_size
        self.observation_spec = Composite(obs=Unbounded((*batch, 3)), shape=batch)
        self.action_spec = Bounded(-1, 1, shape=(*batch, 1))
        self.reward_spec = Unbounded((*batch, 1))
        if edit is not None:
            _ = self.done_keys, self.observation_keys, self.action_keys  # warm the caches
            edit(self)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        out = self.full_observation_spec.zero()
        out.update(self.full_done_spec.zero())
        out.update(self.full_state_spec.zero())
        return out

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = self.full_observation_spec.rand()
        out.update(self.full_state_spec.zero())
        out.update(self.full_reward_spec.zero())
        out.update(self.full_done_spec.zero())
        return out

    def _set_seed(self, seed: int | None) -> None:
        pass

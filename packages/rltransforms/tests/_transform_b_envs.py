"""Envs for the frame / primer / normalisation / image transform tests (rlcore cannot use rlmocks)."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase
from rlspecs import Bounded, Categorical, Composite, Unbounded


class RandomDoneEnv(EnvBase):
    """Random observations `observation` (*B, 3) and `pixels` (*B, 2, 4, 4); random dones.

    Each sub-env ends its episode with probability `p_done` at each step, so batched rollouts
    hold partial resets. The observation of a reset is `-1 - episode index` (so resets are
    recognisable); steps draw from a seeded generator.
    """

    def __init__(self, batch_size=(), p_done: float = 0.3, seed: int = 0) -> None:
        super().__init__(batch_size=torch.Size(batch_size))
        b = self.batch_size
        self.p_done = p_done
        self.generator = torch.Generator().manual_seed(seed)
        self.observation_spec = Composite(
            observation=Unbounded((*b, 3)), pixels=Unbounded((*b, 2, 4, 4)), shape=b
        )
        self.action_spec = Bounded(-1.0, 1.0, (*b, 1))
        self.reward_spec = Unbounded((*b, 1))
        self.done_spec = Categorical(2, (*b, 1), dtype=torch.bool)
        self.episodes = torch.zeros(b)

    def _obs(self, values: torch.Tensor) -> dict:
        b = self.batch_size
        pixels = values.reshape(*b, 1, 1, 1).expand(*b, 2, 4, 4) + torch.arange(32.0).reshape(
            2, 4, 4
        )
        return {"observation": values.reshape(*b, 1).expand(*b, 3).clone(), "pixels": pixels}

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        reset = None if tensordict is None else tensordict.get("_reset", None)
        mask = torch.ones(self.batch_size, dtype=torch.bool)
        if reset is not None:
            mask = reset.reshape(self.batch_size)
        self.episodes = self.episodes + mask.float()
        out = self._obs(-self.episodes)
        out["done"] = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        return TensorDict(out, self.batch_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        b = self.batch_size
        values = torch.rand(b, generator=self.generator)
        done = torch.rand((*b, 1), generator=self.generator) < self.p_done
        out = self._obs(values)
        out["reward"] = torch.ones((*b, 1))
        out["done"] = done
        out["terminated"] = done.clone()
        return TensorDict(out, b)

    def _set_seed(self, seed: int | None) -> None:
        self.generator.manual_seed(0 if seed is None else seed)


class ImageEnv(EnvBase):
    """uint8 channel-last `pixels` (*B, 8, 6, 3) drawn at random, bounded in [0, 255]."""

    def __init__(self, batch_size=()) -> None:
        super().__init__(batch_size=torch.Size(batch_size))
        b = self.batch_size
        self.observation_spec = Composite(
            pixels=Bounded(0, 255, (*b, 8, 6, 3), dtype=torch.uint8), shape=b
        )
        self.action_spec = Unbounded((*b, 1))
        self.reward_spec = Unbounded((*b, 1))
        self.done_spec = Categorical(2, (*b, 1), dtype=torch.bool)

    def _pixels(self) -> torch.Tensor:
        return torch.randint(0, 256, (*self.batch_size, 8, 6, 3), dtype=torch.uint8)

    def _reset(self, tensordict):
        b = self.batch_size
        return TensorDict(
            {"pixels": self._pixels(), "done": torch.zeros((*b, 1), dtype=torch.bool)}, b
        )

    def _step(self, tensordict):
        b = self.batch_size
        return TensorDict(
            {
                "pixels": self._pixels(),
                "reward": torch.ones((*b, 1)),
                "done": torch.zeros((*b, 1), dtype=torch.bool),
            },
            b,
        )

    def _set_seed(self, seed):
        torch.manual_seed(0 if seed is None else seed)

"""`FastImageEnv`: image observations at almost no cost per step, for benchmarks."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase
from rlspecs import Bounded, Composite, Unbounded

__all__ = ["FastImageEnv"]


class FastImageEnv(EnvBase):
    """An env returning one pre-drawn image at every reset and step (a copy each time).

    Specs (``*B`` = batch_size): observation ``pixels`` Unbounded float32
    (*B, *img_shape), default img_shape (4, 84, 84); action ``action`` Bounded[-1, 1]
    float32 (*B, 4), ignored; reward Unbounded float32 (*B, 1); done/terminated
    Unbounded bool (*B, 1).

    The image is drawn once, at construction, from the global RNG (``torch.rand``); reset
    and step return clones of it, a step also a reward of 1, and the episode never ends.
    Meant for benchmarks of collectors and storages, where the env must cost little.

    Examples:
        >>> env = FastImageEnv(img_shape=(3, 8, 8), batch_size=(2,))
        >>> td = env.rollout(5)
        >>> td["next", "pixels"].shape, td["next", "reward"].sum().item()
        (torch.Size([2, 5, 3, 8, 8]), 10.0)
    """

    def __init__(
        self,
        img_shape: Sequence[int] = (4, 84, 84),
        device: torch.device | str | None = None,
        batch_size: Sequence[int] = (),
    ) -> None:
        super().__init__(device=device, batch_size=batch_size)
        self.img_shape = tuple(img_shape)
        self._make_spec()
        self._obs = torch.rand(*self.batch_size, *self.img_shape, device=self.device)

    def _make_spec(self) -> None:
        batch_size = self.batch_size
        self.observation_spec = Composite(
            pixels=Unbounded(shape=(*batch_size, *self.img_shape), dtype=torch.float32),
            shape=batch_size,
            device=self.device,
        )
        self.action_spec = Bounded(
            -1, 1, shape=(*batch_size, 4), dtype=torch.float32, device=self.device
        )
        self.reward_spec = Unbounded(
            shape=(*batch_size, 1), dtype=torch.float32, device=self.device
        )
        self.done_spec = Unbounded(shape=(*batch_size, 1), dtype=torch.bool, device=self.device)

    def _flags(self) -> dict[str, torch.Tensor]:
        false = torch.zeros((*self.batch_size, 1), dtype=torch.bool, device=self.device)
        return {"done": false, "terminated": false.clone()}

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        return TensorDict(
            {"pixels": self._obs.clone(), **self._flags()},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        reward = torch.ones((*self.batch_size, 1), dtype=torch.float32, device=self.device)
        return TensorDict(
            {"pixels": self._obs.clone(), "reward": reward, **self._flags()},
            batch_size=self.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed)

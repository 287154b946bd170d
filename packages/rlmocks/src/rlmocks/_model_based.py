"""A model-based mock env and the linear world-model block the tests feed it."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDict, TensorDictBase
from torch import nn

from rlcore import ModelBasedEnvBase
from rlspecs import Categorical, Composite, Unbounded

__all__ = ["ActionObsMergeLinear", "DummyModelBasedEnvBase"]


class ActionObsMergeLinear(nn.Module):
    """``linear(cat([observation, action], -1))``: a world-model block taking both inputs.

    Examples:
        >>> block = ActionObsMergeLinear(5, 4)
        >>> block(torch.zeros(2, 4), torch.zeros(2, 1)).shape
        torch.Size([2, 4])
    """

    def __init__(self, in_size: int, out_size: int) -> None:
        super().__init__()
        self.linear = nn.Linear(in_size, out_size)

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.cat([observation, action], dim=-1))


class DummyModelBasedEnvBase(ModelBasedEnvBase):
    """A `ModelBasedEnvBase` over a 4-dim hidden state that its ``world_model`` advances.

    Specs (``*B`` = batch_size): observation and state ``hidden_observation`` Unbounded
    (*B, 4); action ``action`` Unbounded (*B, 1); reward ``reward`` Unbounded (*B, 1);
    done/terminated bool (*B, 1). The env is not batch-locked.

    Reset draws ``hidden_observation`` from its spec (global RNG); a step is
    `ModelBasedEnvBase`'s: the world model maps (hidden_observation, action) to the
    next hidden_observation and reward. ``device``, ``dtype`` and ``batch_size`` go to
    `ModelBasedEnvBase`.

    Examples:
        >>> from tensordict.nn import TensorDictModule, TensorDictSequential
        >>> world_model = TensorDictSequential(
        ...     TensorDictModule(ActionObsMergeLinear(5, 4), ["hidden_observation", "action"],
        ...                      ["hidden_observation"]),
        ...     TensorDictModule(nn.Linear(4, 1), ["hidden_observation"], ["reward"]),
        ... )
        >>> env = DummyModelBasedEnvBase(world_model, batch_size=[3])
        >>> env.rollout(5)["next", "hidden_observation"].shape
        torch.Size([3, 5, 4])
    """

    def __init__(
        self,
        world_model: nn.Module,
        device: torch.device | str | None = "cpu",
        dtype: torch.dtype | None = None,
        batch_size: Sequence[int] | None = None,
    ) -> None:
        super().__init__(world_model, device=device, dtype=dtype, batch_size=batch_size)
        shape = (*self.batch_size, 4)
        scalar = (*self.batch_size, 1)
        self.full_observation_spec = Composite(
            hidden_observation=Unbounded(shape=shape), shape=self.batch_size
        ).to(self.device)
        self.full_state_spec = Composite(
            hidden_observation=Unbounded(shape=shape), shape=self.batch_size
        ).to(self.device)
        self.full_action_spec = Composite(action=Unbounded(shape=scalar), shape=self.batch_size).to(
            self.device
        )
        self.full_reward_spec = Composite(reward=Unbounded(shape=scalar), shape=self.batch_size).to(
            self.device
        )
        done = Categorical(2, shape=scalar, dtype=torch.bool)
        self.full_done_spec = Composite(
            done=done, terminated=done.clone(), shape=self.batch_size
        ).to(self.device)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        return TensorDict(
            {"hidden_observation": self.full_state_spec["hidden_observation"].rand()},
            batch_size=self.batch_size,
            device=self.device,
        )

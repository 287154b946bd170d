"""WorldModelWrapper: a transition model followed by a reward model."""

from __future__ import annotations

from tensordict.nn import TensorDictModule, TensorDictSequential


class WorldModelWrapper(TensorDictSequential):
    """Runs a transition model then a reward model on the same tensordict.

    Args:
        transition_model: maps a (state, action) to the next state.
        reward_model: maps the (next) state to a reward.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlmodules import SafeModule
        >>> model = WorldModelWrapper(
        ...     SafeModule(torch.nn.Linear(4, 4), in_keys=["hidden"], out_keys=["hidden"]),
        ...     SafeModule(torch.nn.Linear(4, 1), in_keys=["hidden"], out_keys=["reward"]),
        ... )
        >>> model(TensorDict(hidden=torch.zeros(2, 4), batch_size=[2]))["reward"].shape
        torch.Size([2, 1])
    """

    def __init__(self, transition_model: TensorDictModule, reward_model: TensorDictModule) -> None:
        super().__init__(transition_model, reward_model)

    def get_transition_model_operator(self) -> TensorDictModule:
        """Returns the transition model."""
        return self.module[0]

    def get_reward_operator(self) -> TensorDictModule:
        """Returns the reward model."""
        return self.module[1]

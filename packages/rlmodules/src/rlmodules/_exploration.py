"""torchrl's exploration-type names for tensordict's interaction type.

`ExplorationType`, `set_exploration_type` and `exploration_type` are the very objects
tensordict calls `InteractionType`, `set_interaction_type` and `interaction_type`: they choose
how probabilistic modules turn a distribution into an action (its mode, its mean, a random
sample, ...). Scripts ported from torchrl 0.4 keep their imports.

Examples:
    >>> from rlmodules import ExplorationType, exploration_type, set_exploration_type
    >>> with set_exploration_type(ExplorationType.RANDOM):
    ...     exploration_type()
    <InteractionType.RANDOM: 'random'>
    >>> ExplorationType.from_str("mode")
    <InteractionType.MODE: 'mode'>
"""

from __future__ import annotations

from tensordict.nn import InteractionType, set_interaction_type
from tensordict.nn.probabilistic import interaction_type

__all__ = ["ExplorationType", "exploration_type", "set_exploration_type"]

ExplorationType = InteractionType
set_exploration_type = set_interaction_type
exploration_type = interaction_type

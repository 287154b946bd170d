"""Policy and value modules on tensordict.nn: SafeModule, Actor, MLP, ..."""

from ._actors import Actor, ActorCriticOperator, ActorValueOperator, ValueOperator
from ._exploration import ExplorationType, exploration_type, set_exploration_type
from ._mlp import MLP
from ._random import RandomPolicy
from ._safe import SafeModule
from ._version import __version__
from ._world_model import WorldModelWrapper

__all__ = [
    # modules
    "SafeModule",
    "Actor",
    "ValueOperator",
    "ActorValueOperator",
    "ActorCriticOperator",
    "WorldModelWrapper",
    "RandomPolicy",
    # networks
    "MLP",
    # exploration (torchrl's names for tensordict's interaction type)
    "ExplorationType",
    "set_exploration_type",
    "exploration_type",
    "__version__",
]

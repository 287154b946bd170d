"""Policy and value modules on tensordict.nn: SafeModule, Actor, MLP, ..."""

from ._actors import (
    Actor,
    ActorCriticOperator,
    ActorValueOperator,
    ProbabilisticActor,
    ValueOperator,
)
from ._continuous_dists import Delta, IndependentNormal, TanhDelta, TanhNormal
from ._discrete_dists import MaskedCategorical, OneHotCategorical, ReparamGradientStrategy
from ._exploration import ExplorationType, exploration_type, set_exploration_type
from ._gru import GRUModule
from ._lstm import LSTMModule
from ._mlp import MLP
from ._param_extractor import NormalParamExtractor
from ._primers import get_primer_specs_from_module, get_primers_from_module
from ._probabilistic import SafeProbabilisticModule, SafeProbabilisticTensorDictSequential
from ._random import RandomPolicy
from ._recurrent_mode import recurrent_mode, set_recurrent_mode
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
    # probabilistic modules
    "ProbabilisticActor",
    "SafeProbabilisticModule",
    "SafeProbabilisticTensorDictSequential",
    # distributions
    "TanhNormal",
    "IndependentNormal",
    "Delta",
    "TanhDelta",
    "OneHotCategorical",
    "MaskedCategorical",
    "ReparamGradientStrategy",
    # recurrent modules
    "LSTMModule",
    "GRUModule",
    "set_recurrent_mode",
    "recurrent_mode",
    "get_primers_from_module",
    "get_primer_specs_from_module",
    # networks
    "MLP",
    "NormalParamExtractor",
    # exploration (torchrl's names for tensordict's interaction type)
    "ExplorationType",
    "set_exploration_type",
    "exploration_type",
    "__version__",
]

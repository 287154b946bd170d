"""torchrl's exploration-type names are tensordict's interaction-type objects, and drive sampling."""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import (
    InteractionType,
    ProbabilisticTensorDictModule,
    TensorDictModule,
    TensorDictSequential,
    set_interaction_type,
)
from tensordict.nn.probabilistic import interaction_type
from torch import distributions, nn

from rlmodules import ExplorationType, exploration_type, set_exploration_type

pytestmark = pytest.mark.filterwarnings("error")


def test_names_are_tensordicts_objects():
    assert ExplorationType is InteractionType
    assert set_exploration_type is set_interaction_type
    assert exploration_type is interaction_type
    assert {e.name for e in ExplorationType} >= {"MODE", "MEAN", "RANDOM"}


@pytest.mark.parametrize("value", [ExplorationType.MODE, "mode", "MODE"])
def test_set_exploration_type_sets_and_restores_the_type(value):
    before = exploration_type()
    with set_exploration_type(value):
        assert exploration_type() is ExplorationType.MODE
    assert exploration_type() is before

    @set_exploration_type(ExplorationType.MEAN)
    def decorated():
        return exploration_type()

    assert decorated() is ExplorationType.MEAN


def test_exploration_type_chooses_how_a_policy_samples():
    torch.manual_seed(0)
    policy = TensorDictSequential(
        TensorDictModule(nn.Linear(2, 2), in_keys=["obs"], out_keys=["loc"]),
        ProbabilisticTensorDictModule(
            in_keys=["loc"],
            out_keys=["action"],
            distribution_class=lambda loc: distributions.Normal(loc, 1.0),
        ),
    )
    td = TensorDict(obs=torch.ones(2))
    with set_exploration_type(ExplorationType.MEAN):
        first = policy(td.clone())["action"]
        second = policy(td.clone())["action"]
    assert torch.equal(first, second) and torch.equal(first, policy[0](td.clone())["loc"])
    with set_exploration_type(ExplorationType.RANDOM):
        assert not torch.equal(policy(td.clone())["action"], first)

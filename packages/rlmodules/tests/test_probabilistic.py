"""Probabilistic modules and actors: exploration types, log-probs, specs, errors, a rollout."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict
from tensordict.nn import CompositeDistribution, TensorDictModule
from torch import distributions as D
from torch import nn

from rlmodules import (
    Delta,
    ExplorationType,
    MaskedCategorical,
    NormalParamExtractor,
    OneHotCategorical,
    ProbabilisticActor,
    SafeProbabilisticModule,
    SafeProbabilisticTensorDictSequential,
    TanhNormal,
    set_exploration_type,
)
from rlspecs import Bounded, Composite, OneHot, Unbounded

pytestmark = pytest.mark.filterwarnings("error")


def _params(n=5, loc=0.0):
    return TensorDict(loc=torch.full((n, 2), loc), scale=torch.ones(n, 2), batch_size=[n])


def _normal_module(**kwargs):
    return SafeProbabilisticModule(
        in_keys=["loc", "scale"], out_keys=["action"], distribution_class=D.Normal, **kwargs
    )


def _tanh_actor(**kwargs):
    net = nn.Sequential(nn.Linear(3, 4), NormalParamExtractor())
    return ProbabilisticActor(
        TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        in_keys=["loc", "scale"],
        spec=Bounded(-2.0, 2.0, shape=(2,)),
        distribution_class=TanhNormal,
        distribution_kwargs={"low": -2.0, "high": 2.0},
        **kwargs,
    )


class _PointEnv:
    """A batch of points moved by bounded actions; reward is minus the distance to 0.

    Built from rlspecs only: reset/step move TensorDicts the way an env's rollout does.
    """

    def __init__(self, batch=4):
        self.batch = batch
        self.observation_spec = Composite(observation=Unbounded((batch, 3)), shape=(batch,))
        self.action_spec = Bounded(-2.0, 2.0, shape=(batch, 2))

    def reset(self):
        return self.observation_spec.rand()

    def step(self, td):
        assert self.action_spec.is_in(td["action"])
        obs = td["observation"].clone()
        obs[:, :2] += 0.1 * td["action"]
        td["next"] = TensorDict(
            observation=obs, reward=-obs.norm(dim=-1, keepdim=True), batch_size=[self.batch]
        )
        return td

    def rollout(self, policy, steps):
        td, out = self.reset(), []
        for _ in range(steps):
            td = self.step(policy(td))
            out.append(td)
            td = td["next"].exclude("reward")
        return torch.stack(out, -1)


# ---- exploration types


def test_default_interaction_type_is_mode():
    module = _normal_module()
    assert module.default_interaction_type is ExplorationType.MODE
    assert (module(_params(loc=3.0))["action"] == 3.0).all()


def test_random_exploration_samples():
    torch.manual_seed(0)
    module = _normal_module()
    with set_exploration_type(ExplorationType.RANDOM):
        first = module(_params())["action"]
        second = module(_params())["action"]
    assert not torch.equal(first, second)


@pytest.mark.parametrize(
    "exploration", [ExplorationType.MODE, ExplorationType.DETERMINISTIC, "mode"]
)
def test_deterministic_types_give_the_squashed_location_of_tanh_normal(exploration):
    module = SafeProbabilisticModule(
        ["loc", "scale"],
        ["action"],
        distribution_class=TanhNormal,
        default_interaction_type="random",
    )
    with set_exploration_type(exploration):
        action = module(_params(loc=0.5))["action"]
    torch.testing.assert_close(action, torch.full((5, 2), 0.5).tanh())


def test_mean_exploration_of_tanh_normal_averages_samples():
    torch.manual_seed(0)
    module = SafeProbabilisticModule(
        ["loc", "scale"], ["action"], distribution_class=TanhNormal, n_empirical_estimate=2000
    )
    with set_exploration_type(ExplorationType.MEAN):
        action = module(_params(n=1, loc=0.0))["action"]
    assert action.abs().max() < 0.1


def test_mean_exploration_uses_a_closed_form_mean():
    with set_exploration_type(ExplorationType.MEAN):
        assert (_normal_module()(_params(loc=-1.5))["action"] == -1.5).all()


def test_default_distribution_is_delta():
    module = SafeProbabilisticModule(in_keys=["param"], out_keys=["action"])
    assert module.distribution_class is Delta
    td = module(TensorDict(param=torch.arange(3.0)))
    assert torch.equal(td["action"], torch.arange(3.0))


def test_default_interaction_mode_is_deprecated_but_honoured():
    with pytest.warns(DeprecationWarning, match="default_interaction_mode is deprecated"):
        module = _normal_module(default_interaction_mode="random")
    assert module.default_interaction_type is ExplorationType.RANDOM


# ---- log-probabilities


def test_return_log_prob_writes_sample_log_prob():
    module = _normal_module(return_log_prob=True)
    with set_exploration_type(ExplorationType.RANDOM):
        td = module(_params())
    expected = D.Normal(td["loc"], td["scale"]).log_prob(td["action"])
    torch.testing.assert_close(td["sample_log_prob"], expected)
    assert "sample_log_prob" in module.out_keys


def test_log_prob_key_none_gives_tensordicts_per_sample_key():
    td = _normal_module(return_log_prob=True, log_prob_key=None)(_params())
    assert "action_log_prob" in td.keys() and "sample_log_prob" not in td.keys()


# ---- specs


def test_safe_projects_samples_into_the_spec():
    module = _normal_module(spec=Bounded(-1.0, 1.0, shape=(2,)), safe=True)
    assert (module(_params(loc=10.0))["action"] == 1.0).all()


def test_unsafe_module_keeps_samples_outside_the_spec():
    module = _normal_module(spec=Bounded(-1.0, 1.0, shape=(2,)))
    assert (module(_params(loc=10.0))["action"] == 10.0).all()
    assert module.spec["action"] == Bounded(-1.0, 1.0, shape=(2,))


def test_spec_describes_samples_not_the_log_prob():
    module = _normal_module(spec=Bounded(-1.0, 1.0, shape=(2,)), safe=True, return_log_prob=True)
    assert list(module.spec.keys()) == ["action"]


def test_safe_without_spec_raises():
    with pytest.raises(RuntimeError, match=re.escape("safe=True needs a spec")):
        _normal_module(safe=True)


def test_spec_key_outside_out_keys_raises():
    with pytest.raises(RuntimeError, match=re.escape("spec has key 'other' which is not among")):
        _normal_module(spec=Composite(other=Unbounded(2)))


def test_leaf_spec_with_several_out_keys_raises():
    with pytest.raises(RuntimeError, match=re.escape("A single leaf spec was given for out_keys")):
        SafeProbabilisticModule(
            ["params"],
            ["a", "b"],
            spec=Unbounded(2),
            distribution_class=CompositeDistribution,
            distribution_kwargs={"distribution_map": {"a": D.Normal, "b": D.Normal}},
        )


def test_random_writes_a_sample_of_the_spec():
    spec = Bounded(-1.0, 1.0, shape=(2,))
    td = _normal_module(spec=spec).random(TensorDict(batch_size=[3]))
    assert td["action"].shape == (3, 2) and spec.is_in(td["action"][0])


def test_missing_parameter_key_is_named():
    with pytest.raises(
        KeyError, match=re.escape("SafeProbabilisticModule could not find the in_key(s) ['scale']")
    ):
        _normal_module()(TensorDict(loc=torch.zeros(2)))


# ---- sequences and actors


def test_sequence_spec_gathers_module_specs_and_get_dist_builds_the_distribution():
    seq = SafeProbabilisticTensorDictSequential(
        TensorDictModule(nn.Linear(3, 2), in_keys=["obs"], out_keys=["loc"]),
        SafeProbabilisticModule(
            {"param": "loc"},
            ["action"],
            spec=Bounded(-1.0, 1.0, shape=(2,)),
            distribution_class=Delta,
        ),
    )
    assert list(seq.spec.keys()) == ["action"]
    dist = seq.get_dist(TensorDict(obs=torch.zeros(4, 3), batch_size=[4]))
    assert isinstance(dist, Delta) and dist.mode.shape == (4, 2)
    assert seq.random(TensorDict(batch_size=[4]))["action"].shape == (4, 2)


def test_probabilistic_actor_writes_action_and_wraps_a_leaf_spec():
    actor = _tanh_actor()
    assert actor.out_keys[-1] == "action"
    assert isinstance(actor.spec, Composite)
    assert actor.spec["action"] == Bounded(-2.0, 2.0, shape=(2,))
    td = actor(TensorDict(observation=torch.randn(6, 3), batch_size=[6]))
    assert td["action"].shape == (6, 2)


def test_probabilistic_actor_deterministic_action_is_tanh_of_loc():
    actor = _tanh_actor()
    td = TensorDict(observation=torch.randn(6, 3), batch_size=[6])
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        td = actor(td)
    torch.testing.assert_close(td["action"], 2.0 * td["loc"].tanh())


def test_probabilistic_actor_rejects_a_plain_network():
    with pytest.raises(
        TypeError, match=re.escape("ProbabilisticActor needs `module` to be a tensordict module")
    ):
        ProbabilisticActor(nn.Linear(3, 4), in_keys=["loc", "scale"])


def test_probabilistic_actor_composite_distribution_takes_out_keys_from_the_map():
    class _Split(nn.Module):
        def forward(self, x):
            return x[..., :2], x[..., 2:4].exp(), x[..., 4:]

    module = TensorDictModule(
        _Split(),
        in_keys=["x"],
        out_keys=[
            ("params", "move", "loc"),
            ("params", "move", "scale"),
            ("params", "pick", "logits"),
        ],
    )
    actor = ProbabilisticActor(
        module,
        in_keys=["params"],
        distribution_class=CompositeDistribution,
        distribution_kwargs={"distribution_map": {"move": D.Normal, "pick": D.Categorical}},
    )
    with set_exploration_type(ExplorationType.RANDOM):
        td = actor(TensorDict(x=torch.randn(3, 7), batch_size=[3]))
    assert td["move"].shape == (3, 2) and td["pick"].shape == (3,)


def test_probabilistic_actor_composite_distribution_needs_a_map():
    with pytest.raises(KeyError, match="'distribution_map' must be provided"):
        ProbabilisticActor(
            TensorDictModule(nn.Identity(), in_keys=["x"], out_keys=["params"]),
            in_keys=["params"],
            distribution_class=CompositeDistribution,
        )


def test_masked_categorical_actor_reads_the_mask_from_the_tensordict():
    actor = ProbabilisticActor(
        TensorDictModule(nn.Linear(3, 4), in_keys=["observation"], out_keys=["logits"]),
        in_keys={"logits": "logits", "mask": "action_mask"},
        distribution_class=MaskedCategorical,
    )
    mask = torch.tensor([[False, True, False, True]]).expand(50, 4)
    td = TensorDict(observation=torch.randn(50, 3), action_mask=mask, batch_size=[50])
    with set_exploration_type(ExplorationType.RANDOM):
        action = actor(td)["action"]
    assert set(action.tolist()) <= {1, 3}


def test_one_hot_actor_with_one_hot_spec_writes_one_hot_actions():
    actor = ProbabilisticActor(
        TensorDictModule(nn.Linear(3, 4), in_keys=["observation"], out_keys=["logits"]),
        in_keys=["logits"],
        spec=OneHot(4, dtype=torch.long),
        distribution_class=OneHotCategorical,
        return_log_prob=True,
    )
    with set_exploration_type(ExplorationType.RANDOM):
        td = actor(TensorDict(observation=torch.randn(5, 3), batch_size=[5]))
    assert OneHot(4, dtype=torch.long).is_in(td["action"][0]) and td["sample_log_prob"].shape == (
        5,
    )


# ---- a rollout


def test_tanh_normal_actor_drives_a_rollout_inside_the_action_spec():
    torch.manual_seed(0)
    env = _PointEnv(batch=4)
    actor = _tanh_actor(safe=True, return_log_prob=True)
    with set_exploration_type(ExplorationType.RANDOM):
        data = env.rollout(actor, steps=10)
    assert data.batch_size == (4, 10)
    assert env.action_spec.is_in(data["action"][:, 0])
    assert (data["action"].abs() < 2.0).all()
    assert torch.isfinite(data["sample_log_prob"]).all() and data["sample_log_prob"].shape == (
        4,
        10,
    )
    recomputed = actor.get_dist(data.select("observation")).log_prob(data["action"])
    torch.testing.assert_close(recomputed, data["sample_log_prob"])
    assert not torch.equal(data["next", "observation"][:, -1], data["observation"][:, 0])


def test_deterministic_rollouts_repeat_and_random_ones_differ():
    env = _PointEnv(batch=2)
    actor = _tanh_actor()
    torch.manual_seed(1)
    start = env.reset()
    env.reset = lambda: start.clone()
    with set_exploration_type(ExplorationType.DETERMINISTIC):
        first, second = env.rollout(actor, 5), env.rollout(actor, 5)
    assert torch.equal(first["action"], second["action"])
    with set_exploration_type(ExplorationType.RANDOM):
        assert not torch.equal(env.rollout(actor, 5)["action"], first["action"])

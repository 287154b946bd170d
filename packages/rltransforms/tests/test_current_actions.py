"""Action-space transforms of current torchrl: ActionDiscretizer, ActionScaling, FlattenAction."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlcore import check_env_specs
from rlmocks import ContinuousActionVecMockEnv, CountingEnv, GenericTestEnv
from rlspecs import Bounded, Categorical, MultiCategorical, MultiOneHot, OneHot, Unbounded
from rltransforms import ActionDiscretizer, ActionScaling, FlattenAction, TransformedEnv

pytestmark = pytest.mark.filterwarnings("error")

Sampling = ActionDiscretizer.SamplingStrategy


def _recording_env(action_spec, batch_size=()):
    """An env that records the action each step receives."""
    seen = []

    def step(env, td):
        seen.append(td["action"].clone())
        obs = env.observation_spec["observation"].zero()
        return td.empty().update({"observation": obs, "reward": torch.zeros(*batch_size, 1)})

    env = GenericTestEnv(
        observation_spec=Unbounded((*batch_size, 1)),
        action_spec=action_spec,
        step_func=step,
        batch_size=batch_size,
    )
    return env, seen


# ---------------------------------------------------------------- ActionDiscretizer
@pytest.mark.parametrize("categorical", [True, False])
@pytest.mark.parametrize("sampling", list(Sampling))
def test_action_discretizer_env_specs_hold(categorical, sampling):
    env = TransformedEnv(
        ContinuousActionVecMockEnv(),
        ActionDiscretizer(torch.arange(2, 9), sampling=sampling, categorical=categorical),
    )
    spec_type = MultiCategorical if categorical else MultiOneHot
    assert isinstance(env.action_spec, spec_type)
    check_env_specs(env)


@pytest.mark.parametrize(
    ("sampling", "expected"),
    [
        (Sampling.MEDIAN, [-0.75, -0.25, 0.25, 0.75]),
        (Sampling.LOW, [-1.0, -0.5, 0.0, 0.5]),
        (Sampling.HIGH, [-0.5, 0.0, 0.5, 1.0]),
    ],
)
def test_action_discretizer_maps_labels_into_their_interval(sampling, expected):
    base, seen = _recording_env(Bounded(-1.0, 1.0, (1,)))
    env = TransformedEnv(base, ActionDiscretizer(4, sampling=sampling))
    for label in range(4):
        env.step(env.reset().set("action", torch.tensor([label])))
    assert [round(a.item(), 4) for a in seen] == expected


def test_action_discretizer_random_sampling_stays_in_the_interval():
    base, seen = _recording_env(Bounded(0.0, 4.0, (1,)))
    env = TransformedEnv(base, ActionDiscretizer(4, sampling=Sampling.RANDOM))
    for _ in range(20):
        env.step(env.reset().set("action", torch.tensor([2])))
    values = torch.cat(seen)
    assert ((values >= 2.0) & (values <= 3.0)).all() and values.unique().numel() > 1


def test_action_discretizer_one_hot_actions_pick_each_entry_interval():
    base, seen = _recording_env(Bounded(-1.0, 1.0, (2,)))
    env = TransformedEnv(base, ActionDiscretizer(torch.tensor([2, 3]), categorical=False))
    assert env.action_spec.shape == (5,)
    one_hot = torch.tensor([0, 1, 1, 0, 0], dtype=torch.bool)  # label 1 of 2, label 0 of 3
    env.step(env.reset().set("action", one_hot))
    torch.testing.assert_close(seen[-1], torch.tensor([0.5, -2 / 3]))


def test_action_discretizer_scalar_action_becomes_categorical():
    base, seen = _recording_env(Bounded(0.0, 1.0, ()))
    env = TransformedEnv(base, ActionDiscretizer(2))
    assert isinstance(env.action_spec, Categorical) and env.action_spec.shape == ()
    env.step(env.reset().set("action", torch.tensor(1)))
    assert seen[-1].item() == 0.75
    one_hot = TransformedEnv(
        _recording_env(Bounded(0.0, 1.0, ()))[0], ActionDiscretizer(2, categorical=False)
    )
    assert isinstance(one_hot.action_spec, OneHot)


def test_action_discretizer_one_dim_action_rolls_out_with_random_labels():
    """A (1,) action discretized is a MultiCategorical of shape (1,), whose samples have no
    trailing dim (torchrl 0.4): the env takes them, and labels with the dim too."""
    env, seen = _recording_env(Bounded(-1.0, 1.0, (1,)))
    env = TransformedEnv(env, ActionDiscretizer(5))
    assert env.rollout(3)["action"].shape == (3,)
    assert env.rollout(2, lambda td: td.set("action", torch.tensor([4])))["action"].shape == (2, 1)
    assert all(a.shape == (1,) for a in seen) and seen[-1].item() == pytest.approx(0.8)
    with pytest.raises(ValueError, match=re.escape("has shape (2,), expected (1,)")):
        env.rollout(1, lambda td: td.set("action", torch.tensor([4, 0])))


def test_action_discretizer_batched_env_expands_the_discrete_spec():
    env = TransformedEnv(ContinuousActionVecMockEnv(batch_size=[3]), ActionDiscretizer(5))
    assert env.action_spec.shape == (3, 7)
    check_env_specs(env)


def test_action_discretizer_out_key_records_the_continuous_action():
    env = TransformedEnv(
        ContinuousActionVecMockEnv(), ActionDiscretizer(4, out_action_key="action_disc")
    )
    assert "action" in env.full_state_spec.keys() and "action" not in env.full_action_spec.keys()
    check_env_specs(env)
    rollout = env.rollout(3)
    assert rollout["action_disc"].dtype == torch.int64
    intervals = torch.tensor([-0.75, -0.25, 0.25, 0.75])
    torch.testing.assert_close(rollout["action"], intervals[rollout["action_disc"]])


def test_action_discretizer_custom_arange_in_a_subclass():
    class Ends(ActionDiscretizer):
        def custom_arange(self, nint, device):
            return torch.linspace(0, 1, nint, device=device)

    base, seen = _recording_env(Bounded(0.0, 2.0, (1,)))
    env = TransformedEnv(base, Ends(3))
    env.step(env.reset().set("action", torch.tensor([2])))
    assert seen[-1].item() == 2.0


def test_action_discretizer_refuses_an_unbounded_action():
    with pytest.raises(TypeError, match="The action spec type must be Bounded"):
        TransformedEnv(
            ContinuousActionVecMockEnv(action_spec=Unbounded((7,))), ActionDiscretizer(3)
        )


def test_action_discretizer_refuses_a_wrong_number_of_counts():
    with pytest.raises(
        ValueError, match="num_intervals has 3 entries but the action 'action' has 7"
    ):
        TransformedEnv(ContinuousActionVecMockEnv(), ActionDiscretizer(torch.tensor([2, 3, 4])))


def test_action_discretizer_refuses_two_dim_counts():
    with pytest.raises(RuntimeError, match=re.escape("Cannot use num_intervals with shape")):
        ActionDiscretizer(torch.ones(2, 2, dtype=torch.int64))


def test_action_discretizer_without_env_has_no_intervals():
    with pytest.raises(RuntimeError, match="without a parent env"):
        ActionDiscretizer(3)._inv_call(TensorDict(action=torch.tensor([1])))


# ---------------------------------------------------------------- ActionScaling
def test_action_scaling_exposes_unit_bounds_and_rescales_actions():
    base, seen = _recording_env(Bounded(-2.0, 4.0, (1,)))
    env = TransformedEnv(base, ActionScaling())
    assert env.action_spec.space.low.item() == -1 and env.action_spec.space.high.item() == 1
    env.step(env.reset().set("action", torch.tensor([1.0])))
    env.step(env.reset().set("action", torch.tensor([-1.0])))
    assert [a.item() for a in seen] == [4.0, -2.0]
    check_env_specs(env)


def test_action_scaling_zero_one_range():
    base, seen = _recording_env(Bounded(-2.0, 4.0, (1,)))
    env = TransformedEnv(base, ActionScaling(standard_normal=False))
    assert env.action_spec.space.low.item() == 0 and env.action_spec.space.high.item() == 1
    env.step(env.reset().set("action", torch.tensor([0.5])))
    assert seen[-1].item() == 1.0


def test_action_scaling_forward_normalises_env_actions():
    t = ActionScaling(loc=torch.tensor([1.0, 2.0]), scale=torch.tensor([2.0, 4.0]))
    td = t(TensorDict(action=torch.tensor([[3.0, -2.0]]), batch_size=[1]))
    assert td["action"].tolist() == [[1.0, -1.0]]
    assert t.denormalize(torch.tensor([1.0, -1.0])).tolist() == [3.0, -2.0]


def test_action_scaling_explicit_stats_map_bounds_and_keep_unbounded_specs():
    bounded = TransformedEnv(
        _recording_env(Bounded(-1.0, 3.0, (1,)))[0], ActionScaling(loc=1.0, scale=4.0)
    )
    assert bounded.action_spec.space.low.item() == -0.5
    unbounded = TransformedEnv(
        _recording_env(Unbounded((1,)))[0], ActionScaling(loc=1.0, scale=4.0)
    )
    assert isinstance(unbounded.action_spec, Unbounded)


def test_action_scaling_from_stats_floors_the_scale():
    t = ActionScaling.from_stats(mean=torch.zeros(2), std=torch.tensor([0.0, 2.0]), eps=0.5)
    assert t.scale.tolist() == [0.5, 2.0]
    t = ActionScaling.from_stats(low=torch.tensor([0.0]), high=torch.tensor([4.0]))
    assert (t.loc.item(), t.scale.item()) == (2.0, 2.0)


def test_action_scaling_forward_only_leaves_the_env_action_alone():
    base, _ = _recording_env(Bounded(-2.0, 4.0, (1,)))
    env = TransformedEnv(base, ActionScaling(in_keys_inv=[], loc=1.0, scale=3.0))
    assert env.action_spec.space.high.item() == 4.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"in_keys_inv": ["a", "b"]}, "only supports a single action key"),
        ({"loc": 1.0}, "loc and scale must either both be provided or both be None."),
        ({"in_keys_inv": []}, "requires explicit loc and scale"),
        ({"loc": 0.0, "scale": 0.0}, "scale must not contain zero entries"),
    ],
)
def test_action_scaling_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ActionScaling(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mean": torch.zeros(1)}, "mean and std must be provided together."),
        ({"low": torch.zeros(1)}, "low and high must be provided together."),
        ({}, "Provide exactly one of (mean, std) or (low, high)."),
        ({"mean": torch.zeros(2), "std": torch.ones(3)}, "loc and scale must have the same shape"),
    ],
)
def test_action_scaling_from_stats_rejects_bad_pairs(kwargs, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        ActionScaling.from_stats(**kwargs)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (Unbounded((1,)), "cannot be used with an Unbounded action spec"),
        (Bounded(torch.tensor([-1.0]), torch.tensor([float("inf")])), "finite lower and upper"),
        (Bounded(torch.tensor([1.0]), torch.tensor([1.0])), "requires high > low"),
    ],
)
def test_action_scaling_refuses_specs_without_finite_bounds(spec, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        TransformedEnv(_recording_env(spec)[0], ActionScaling())


def test_action_scaling_refuses_a_discrete_action():
    with pytest.raises(RuntimeError, match="requires a bounded continuous action spec"):
        TransformedEnv(CountingEnv(), ActionScaling())


def test_action_scaling_without_stats_or_env_cannot_run():
    with pytest.raises(RuntimeError, match="has not been initialized"):
        ActionScaling().normalize(torch.zeros(1))


def test_action_scaling_checks_the_action_dim():
    t = ActionScaling(loc=torch.zeros(2), scale=torch.ones(2))
    with pytest.raises(ValueError, match=re.escape("action shape (3,) does not match")):
        t.normalize(torch.zeros(3))


# ---------------------------------------------------------------- FlattenAction
def test_flatten_action_flat_for_the_policy_shaped_for_the_env():
    base, seen = _recording_env(Bounded(-1.0, 1.0, (2, 3, 4, 5)), batch_size=(2,))
    env = TransformedEnv(base, FlattenAction())
    assert env.action_spec.shape == (2, 3, 20)
    check_env_specs(env)
    assert seen[-1].shape == (2, 3, 4, 5)


def test_flatten_action_positive_dims_count_after_the_batch_dims():
    base, seen = _recording_env(Bounded(-1.0, 1.0, (2, 3, 4, 5)), batch_size=(2,))
    env = TransformedEnv(base, FlattenAction(0, 1, allow_positive_dim=True))
    assert env.action_spec.shape == (2, 12, 5)
    check_env_specs(env)
    assert seen[-1].shape == (2, 3, 4, 5)


def test_flatten_action_unflattens_values_in_order():
    base, seen = _recording_env(Bounded(-1.0, 1.0, (2, 2)))
    env = TransformedEnv(base, FlattenAction())
    env.step(env.reset().set("action", torch.tensor([0.1, 0.2, 0.3, 0.4])))
    torch.testing.assert_close(seen[-1], torch.tensor([[0.1, 0.2], [0.3, 0.4]]))


def test_flatten_action_discrete_spec_keeps_its_type():
    env = TransformedEnv(_recording_env(Categorical(3, (2, 2)))[0], FlattenAction(-2, -1))
    assert isinstance(env.action_spec, Categorical) and env.action_spec.shape == (4,)


def test_flatten_action_forward_and_inverse_outside_an_env():
    t = FlattenAction(action_shape=(2, 3))
    flat = t(TensorDict(action=torch.arange(6.0).view(2, 3)))["action"]
    assert flat.shape == (6,)
    assert t.inv(TensorDict(action=flat))["action"].shape == (2, 3)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, -1), "first_dim should be smaller than 0"),
        ((-2, 0), "last_dim should be smaller than 0"),
        ((-1, -2), "first_dim (-1) must be <= last_dim (-2)."),
    ],
)
def test_flatten_action_rejects_bad_dims(args, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        FlattenAction(*args)


def test_flatten_action_span_must_fit_the_action():
    with pytest.raises(RuntimeError, match="is not compatible with an action of shape"):
        TransformedEnv(_recording_env(Bounded(-1.0, 1.0, (3,)))[0], FlattenAction(-3, -1))


def test_flatten_action_without_shape_cannot_unflatten():
    with pytest.raises(RuntimeError, match="has no stored unflatten shape for key 'action'"):
        FlattenAction().inv(TensorDict(action=torch.zeros(4)))

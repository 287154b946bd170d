"""torchrl 0.4's reading of positive dims in UnsqueezeTransform, SqueezeTransform and
FlattenObservation: after the parent env's batch dims in an env, as given without env."""

from __future__ import annotations

import pytest
import torch
from _transform_envs import CountEnv
from tensordict import TensorDict
from torch import nn

from rlcore import check_env_specs
from rlspecs import Bounded
from rltransforms import (
    Compose,
    FlattenObservation,
    SqueezeTransform,
    TransformedEnv,
    UnsqueezeTransform,
)

pytestmark = pytest.mark.filterwarnings("error")


@pytest.mark.parametrize(
    ("batch", "dim"), [([], 0), ([], 2), ([1], 0), ([2], 1), ([2], 3), ([2, 4], 2), ([2, 4], 4)]
)
def test_unsqueeze_positive_dim_without_env_is_used_as_given(batch, dim):
    t = UnsqueezeTransform(dim, in_keys=["obs"], allow_positive_dim=True)
    td = TensorDict(obs=torch.randn(*batch, 3, 16, 16), batch_size=batch)
    expected = [*batch, 3, 16, 16]
    expected.insert(dim, 1)
    assert t(td)["obs"].shape == torch.Size(expected)
    assert t.unsqueeze_dim == dim


@pytest.mark.parametrize(
    "wrap", [Compose, lambda t: nn.Sequential(t, nn.Identity())], ids=["compose", "model"]
)
def test_unsqueeze_positive_dim_in_a_compose_or_model_without_env(wrap):
    t = UnsqueezeTransform(1, in_keys=["obs"], allow_positive_dim=True)
    td = TensorDict(obs=torch.randn(2, 3, 4), batch_size=[2])
    assert wrap(t)(td)["obs"].shape == (2, 1, 3, 4)


def test_unsqueeze_positive_dim_spec_without_env_is_used_as_given():
    t = UnsqueezeTransform(0, in_keys=["obs"], allow_positive_dim=True)
    spec = t.transform_observation_spec(Bounded(-1, 1, (3, 4)))
    assert spec.shape == (1, 3, 4) and (spec.high == 1).all()


@pytest.mark.parametrize("batch_size", [(), (2,), (2, 5)])
def test_unsqueeze_positive_dim_in_an_env_counts_after_its_batch_dims(batch_size):
    t = UnsqueezeTransform(0, in_keys=["observation"], allow_positive_dim=True)
    env = TransformedEnv(CountEnv(batch_size=batch_size), t)
    assert t.unsqueeze_dim == len(batch_size)
    assert env.observation_spec["observation"].shape == (*batch_size, 1, 3)
    check_env_specs(env)
    rollout = env.rollout(3)
    assert rollout["next", "observation"].shape == (*batch_size, 3, 1, 3)
    # data of another batch size go through the env's reading of the dim (torchrl 0.4)
    assert t(TensorDict(observation=torch.zeros(*batch_size, 3)))["observation"].shape == (
        *batch_size,
        1,
        3,
    )


def test_squeeze_positive_dim_in_an_env_and_without_env():
    t = SqueezeTransform(1, in_keys=["observation"], allow_positive_dim=True)
    td = TensorDict(observation=torch.zeros(2, 1, 3), batch_size=[2])
    assert t(td)["observation"].shape == (2, 3)  # dim 1 of the tensor
    assert t.squeeze_dim == 1
    base = TransformedEnv(
        CountEnv(batch_size=(2,)), UnsqueezeTransform(-2, in_keys=["observation"])
    )
    env = TransformedEnv(
        base,
        SqueezeTransform(0, in_keys=["observation"], allow_positive_dim=True),
        auto_unwrap=True,
    )
    assert env.transform[-1].squeeze_dim == 1
    assert env.observation_spec["observation"].shape == (2, 3)
    check_env_specs(env)


def test_flatten_positive_dims_without_env_are_used_as_given():
    t = FlattenObservation(1, 2, in_keys=["pixels"], allow_positive_dim=True)
    td = TensorDict(pixels=torch.zeros(2, 3, 4, 5), batch_size=[2])
    assert t(td)["pixels"].shape == (2, 12, 5)
    assert (t.first_dim, t.last_dim) == (1, 2)


@pytest.mark.parametrize(
    ("make", "arg"),
    [
        (lambda: UnsqueezeTransform(0), "unsqueeze_dim"),
        (lambda: SqueezeTransform(1), "squeeze_dim"),
        (lambda: FlattenObservation(0, -1), "first_dim"),
        (lambda: FlattenObservation(-2, 0), "last_dim"),
    ],
)
def test_positive_dims_need_allow_positive_dim(make, arg):
    # torchrl 0.4 raises RuntimeError for the (un)squeeze transforms, ValueError for the flatten
    message = f"{arg} should be smaller than 0 to accomodate for envs of different batch_sizes"
    with pytest.raises(RuntimeError, match=message):
        make()
    with pytest.raises(ValueError, match="Turn allow_positive_dim"):
        make()

"""Every mock passes ``check_env_specs`` (the seed's ``test_mocking_envs`` list), and exports."""

from __future__ import annotations

from functools import partial

import cloudpickle
import pytest
import torch
from tensordict.nn import TensorDictModule, TensorDictSequential
from torch import nn

import rlmocks
from rlcore import EnvBase, check_env_specs
from rlmocks import (
    ActionObsMergeLinear,
    ContinuousActionConvMockEnv,
    ContinuousActionConvMockEnvNumpy,
    ContinuousActionVecMockEnv,
    CountingBatchedEnv,
    CountingEnv,
    DiscreteActionConvMockEnv,
    DiscreteActionConvMockEnvNumpy,
    DiscreteActionVecMockEnv,
    DummyModelBasedEnvBase,
    HeterogeneousCountingEnv,
    IncrementingEnv,
    MockBatchedLockedEnv,
    MockBatchedUnLockedEnv,
    MockSerialEnv,
    MultiKeyCountingEnv,
    NestedCountingEnv,
)


def world_model() -> TensorDictSequential:
    return TensorDictSequential(
        TensorDictModule(
            ActionObsMergeLinear(5, 4), ["hidden_observation", "action"], ["hidden_observation"]
        ),
        TensorDictModule(nn.Linear(4, 1), ["hidden_observation"], ["reward"]),
    )


def model_based_env(**kwargs) -> DummyModelBasedEnvBase:
    """A `DummyModelBasedEnvBase` over a fresh world model (moving an env moves its model)."""
    return DummyModelBasedEnvBase(world_model(), **kwargs)


MOCK_CLASSES = [
    ContinuousActionConvMockEnv,
    ContinuousActionConvMockEnvNumpy,
    ContinuousActionVecMockEnv,
    CountingBatchedEnv,
    CountingEnv,
    DiscreteActionConvMockEnv,
    DiscreteActionConvMockEnvNumpy,
    DiscreteActionVecMockEnv,
    DummyModelBasedEnvBase,
    MockBatchedLockedEnv,
    MockBatchedUnLockedEnv,
    MockSerialEnv,
    NestedCountingEnv,
    HeterogeneousCountingEnv,
    MultiKeyCountingEnv,
    IncrementingEnv,
]
MOCKING_ENVS = [model_based_env if cls is DummyModelBasedEnvBase else cls for cls in MOCK_CLASSES]


def _name(factory) -> str:
    return getattr(factory, "__name__", None) or factory.func.__name__


@pytest.mark.filterwarnings("ignore:Setting a seed has no effect")
@pytest.mark.parametrize("factory", MOCKING_ENVS, ids=_name)
def test_mock_passes_check_env_specs(factory):
    env = factory()
    env.set_seed(100)
    reset = env.reset()
    env.rand_step(reset)
    check_env_specs(env, seed=100, return_contiguous=False)


BATCHED_ENVS = [
    partial(CountingEnv, batch_size=(4,)),
    partial(CountingBatchedEnv, max_steps=torch.tensor([1, 2, 3]), batch_size=(3,)),
    partial(NestedCountingEnv, batch_size=(2, 3), nested_dim=5),
    partial(NestedCountingEnv, batch_size=(2,), has_root_done=True),
    partial(HeterogeneousCountingEnv, batch_size=(2, 1)),
    partial(MultiKeyCountingEnv, batch_size=(2,)),
    partial(MockBatchedLockedEnv, batch_size=(3,)),
    partial(model_based_env, batch_size=(10,)),
    partial(ContinuousActionVecMockEnv, batch_size=(2,)),
    partial(DiscreteActionConvMockEnv, batch_size=(2,)),
]


@pytest.mark.filterwarnings("ignore:Setting a seed has no effect")
@pytest.mark.parametrize("factory", BATCHED_ENVS, ids=lambda f: f"{_name(f)}-{f.keywords}")
def test_batched_mock_passes_check_env_specs(factory):
    env = factory()
    env.set_seed(1)
    check_env_specs(env, seed=1, return_contiguous=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.filterwarnings("ignore:Setting a seed has no effect")
@pytest.mark.parametrize("factory", MOCKING_ENVS, ids=_name)
def test_mock_passes_check_env_specs_on_cuda(factory):
    env = factory(device="cuda:0")
    env.set_seed(100)
    check_env_specs(env, seed=100, return_contiguous=False)
    rollout = env.rollout(3, return_contiguous=False)
    assert all(t.device.type == "cuda" for t in rollout.values(True, True))


def test_every_exported_name_is_a_class_with_a_docstring():
    for name in rlmocks.__all__:
        if name == "__version__":
            continue
        obj = getattr(rlmocks, name)
        assert isinstance(obj, type), name
        assert obj.__doc__ and obj.__doc__.strip(), name


@pytest.mark.parametrize("cls", MOCK_CLASSES, ids=lambda cls: cls.__name__)
def test_mock_is_an_env_importable_by_module_path(cls):
    assert issubclass(cls, EnvBase)
    assert getattr(rlmocks, cls.__name__) is cls
    assert "<locals>" not in cls.__qualname__


@pytest.mark.filterwarnings("ignore:Setting a seed has no effect")
@pytest.mark.parametrize("factory", MOCKING_ENVS, ids=_name)
def test_mock_instances_pickle_with_cloudpickle(factory):
    env = factory()
    env.set_seed(3)
    copy = cloudpickle.loads(cloudpickle.dumps(env))
    assert type(copy) is type(env)
    assert copy.full_observation_spec == env.full_observation_spec
    check_env_specs(copy, seed=3, return_contiguous=False)

"""Current torchrl's mocks (``torchrl.testing.mocking_classes``): spec checks, exports, pickling.

The behaviour of each mock is tested beside its module (test_auto_reset.py, test_edge_cases.py,
test_fast_image.py, test_multi_agent.py, test_non_tensor.py, test_stateless.py); cases through
``rlbatched.SerialEnv`` are in test_current_mocks_batched.py.
"""

from __future__ import annotations

from functools import partial

import cloudpickle
import pytest
import torch
from tensordict import LazyStackedTensorDict, is_non_tensor, is_tensor_collection

import rlmocks
from rlcore import EnvBase, MarlGroupMapType, check_env_specs
from rlmocks import (
    AutoResetHeteroCountingEnv,
    AutoResettingCountingEnv,
    CountingEnvWithString,
    EnvThatDoesNothing,
    EnvThatErrorsAfter10Iters,
    EnvThatErrorsBecauseOfStack,
    EnvWithMetadata,
    EnvWithScalarAction,
    FastImageEnv,
    MockNestedResetEnv,
    MultiAgentCountingEnv,
    StateLessCountingEnv,
    Str2StrEnv,
)

NEW_CLASSES = [
    AutoResetHeteroCountingEnv,
    AutoResettingCountingEnv,
    CountingEnvWithString,
    EnvThatDoesNothing,
    EnvThatErrorsAfter10Iters,
    EnvThatErrorsBecauseOfStack,
    EnvWithMetadata,
    EnvWithScalarAction,
    FastImageEnv,
    MockNestedResetEnv,
    MultiAgentCountingEnv,
    StateLessCountingEnv,
    Str2StrEnv,
]

# the mocks whose torchrl counterpart passes check_env_specs (StateLessCountingEnv's does not,
# because its reset returns a reward; ours leaves it out and passes too)
CHECKED = [
    AutoResetHeteroCountingEnv,
    partial(AutoResetHeteroCountingEnv, batch_size=(2, 1)),
    AutoResettingCountingEnv,
    partial(AutoResettingCountingEnv, batch_size=(3,)),
    CountingEnvWithString,
    partial(CountingEnvWithString, batch_size=(2,)),
    EnvThatDoesNothing,
    partial(EnvThatDoesNothing, batch_size=(2, 3)),
    EnvWithMetadata,
    EnvWithScalarAction,
    partial(EnvWithScalarAction, singleton=True),
    partial(EnvWithScalarAction, batch_size=(4,)),
    partial(FastImageEnv, img_shape=(3, 8, 8)),
    partial(FastImageEnv, img_shape=(1, 4, 4), batch_size=(2,)),
    partial(MockNestedResetEnv, num_steps=3, done_at_root=True),
    partial(MockNestedResetEnv, num_steps=3, done_at_root=False),
    partial(MultiAgentCountingEnv, n_agents=3),
    partial(MultiAgentCountingEnv, n_agents=2, group_map=MarlGroupMapType.ONE_GROUP_PER_AGENT),
    partial(MultiAgentCountingEnv, n_agents=2, batch_size=(2,)),
    StateLessCountingEnv,
    Str2StrEnv,
]


def _name(factory) -> str:
    if isinstance(factory, partial):
        return f"{factory.func.__name__}-{factory.keywords}"
    return factory.__name__


@pytest.mark.parametrize("factory", CHECKED, ids=_name)
def test_current_mock_passes_check_env_specs(factory):
    check_env_specs(factory(), seed=0)


ON_DEVICE = [
    AutoResetHeteroCountingEnv,
    AutoResettingCountingEnv,
    CountingEnvWithString,
    EnvThatDoesNothing,
    EnvWithScalarAction,
    partial(FastImageEnv, img_shape=(1, 4, 4)),
    partial(MultiAgentCountingEnv, n_agents=2),
]


def _leaf_devices(td):
    """The devices of the tensor leaves, walking into lazy stacks of heterogeneous agents."""
    if is_non_tensor(td):
        return
    if isinstance(td, LazyStackedTensorDict):
        for sub in td.tensordicts:
            yield from _leaf_devices(sub)
        return
    for value in td.values():
        if is_tensor_collection(value):
            yield from _leaf_devices(value)
        else:
            yield value.device


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("factory", ON_DEVICE, ids=_name)
def test_current_mock_passes_check_env_specs_on_cuda(factory):
    env = factory(device="cuda:0")
    check_env_specs(env, seed=0)
    rollout = env.rollout(3, return_contiguous=False)
    devices = list(_leaf_devices(rollout))
    assert devices and all(device.type == "cuda" for device in devices)


@pytest.mark.parametrize("cls", NEW_CLASSES, ids=lambda cls: cls.__name__)
def test_current_mock_is_exported_env_at_module_level(cls):
    assert issubclass(cls, EnvBase)
    assert getattr(rlmocks, cls.__name__) is cls
    assert cls.__name__ in rlmocks.__all__
    assert "<locals>" not in cls.__qualname__


@pytest.mark.parametrize("factory", CHECKED, ids=_name)
def test_current_mock_instances_pickle_with_cloudpickle(factory):
    env = factory()
    copy = cloudpickle.loads(cloudpickle.dumps(env))
    assert type(copy) is type(env)
    assert copy.full_done_spec == env.full_done_spec
    assert copy.full_observation_spec == env.full_observation_spec

"""Small deterministic mock environments and policies for testing code built on the env API."""

from ._auto_reset import AutoResetHeteroCountingEnv, AutoResettingCountingEnv
from ._counting import CountingBatchedEnv, CountingEnv, IncrementingEnv
from ._edge_cases import (
    EnvThatDoesNothing,
    EnvThatErrorsAfter10Iters,
    EnvThatErrorsBecauseOfStack,
    EnvWithScalarAction,
)
from ._fast_image import FastImageEnv
from ._generic import GenericTestEnv
from ._heterogeneous import HeterogeneousCountingEnv
from ._model_based import ActionObsMergeLinear, DummyModelBasedEnvBase
from ._multi_agent import MockNestedResetEnv, MultiAgentCountingEnv
from ._multikey import MultiKeyCountingEnv
from ._nested import NestedCountingEnv
from ._non_tensor import CountingEnvWithString, EnvWithMetadata, Str2StrEnv
from ._policies import (
    CountingEnvCountModule,
    CountingEnvCountPolicy,
    DiscreteActionConvPolicy,
    DiscreteActionVecPolicy,
    HeterogeneousCountingEnvPolicy,
    MultiKeyCountingEnvPolicy,
)
from ._serial_batched import MockBatchedLockedEnv, MockBatchedUnLockedEnv, MockSerialEnv
from ._spec_driven import SpecDrivenEnv
from ._stateless import StateLessCountingEnv
from ._vec_conv import (
    ContinuousActionConvMockEnv,
    ContinuousActionConvMockEnvNumpy,
    ContinuousActionVecMockEnv,
    DiscreteActionConvMockEnv,
    DiscreteActionConvMockEnvNumpy,
    DiscreteActionVecMockEnv,
)
from ._version import __version__

__all__ = [
    "__version__",
    # counting envs
    "CountingBatchedEnv",
    "CountingEnv",
    "HeterogeneousCountingEnv",
    "IncrementingEnv",
    "MultiKeyCountingEnv",
    "NestedCountingEnv",
    # vector / image envs
    "ContinuousActionConvMockEnv",
    "ContinuousActionConvMockEnvNumpy",
    "ContinuousActionVecMockEnv",
    "DiscreteActionConvMockEnv",
    "DiscreteActionConvMockEnvNumpy",
    "DiscreteActionVecMockEnv",
    # action-ignoring counters
    "MockBatchedLockedEnv",
    "MockBatchedUnLockedEnv",
    "MockSerialEnv",
    # configurable
    "GenericTestEnv",
    "SpecDrivenEnv",
    # model-based
    "ActionObsMergeLinear",
    "DummyModelBasedEnvBase",
    # current torchrl's mocks (torchrl.testing.mocking_classes)
    "AutoResetHeteroCountingEnv",
    "AutoResettingCountingEnv",
    "CountingEnvWithString",
    "EnvThatDoesNothing",
    "EnvThatErrorsAfter10Iters",
    "EnvThatErrorsBecauseOfStack",
    "EnvWithMetadata",
    "EnvWithScalarAction",
    "FastImageEnv",
    "MockNestedResetEnv",
    "MultiAgentCountingEnv",
    "StateLessCountingEnv",
    "Str2StrEnv",
    # policies and modules
    "CountingEnvCountModule",
    "CountingEnvCountPolicy",
    "DiscreteActionConvPolicy",
    "DiscreteActionVecPolicy",
    "HeterogeneousCountingEnvPolicy",
    "MultiKeyCountingEnvPolicy",
]

"""Small deterministic mock environments and policies for testing code built on the env API."""

from ._counting import CountingBatchedEnv, CountingEnv, IncrementingEnv
from ._generic import GenericTestEnv
from ._heterogeneous import HeterogeneousCountingEnv
from ._model_based import ActionObsMergeLinear, DummyModelBasedEnvBase
from ._multikey import MultiKeyCountingEnv
from ._nested import NestedCountingEnv
from ._policies import (
    CountingEnvCountModule,
    CountingEnvCountPolicy,
    DiscreteActionConvPolicy,
    DiscreteActionVecPolicy,
    HeterogeneousCountingEnvPolicy,
    MultiKeyCountingEnvPolicy,
)
from ._serial_batched import MockBatchedLockedEnv, MockBatchedUnLockedEnv, MockSerialEnv
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
    # model-based
    "ActionObsMergeLinear",
    "DummyModelBasedEnvBase",
    # policies and modules
    "CountingEnvCountModule",
    "CountingEnvCountPolicy",
    "DiscreteActionConvPolicy",
    "DiscreteActionVecPolicy",
    "HeterogeneousCountingEnvPolicy",
    "MultiKeyCountingEnvPolicy",
]

"""A real local Ray for the RayCollector tests, one start per test module, and their helpers.

Ray is sized for this 2-core machine: 2 CPUs, half a CPU per actor. The helpers here and in the
test modules cannot be imported by the actors: ``ship_by_value`` makes cloudpickle send them by
value.
"""

from __future__ import annotations

import os
import sys

import pytest
import torch
from tensordict.nn import TensorDictModuleBase
from torch import nn

from rlcollectors import RayCollector
from rlmocks import CountingEnv

# Before Ray starts: no usage-stats prompt or upload, no token-auth notice on a private machine.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

RAY_INIT = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}
ACTOR = {"num_cpus": 0.5}  # two actors fit beside the driver on 2 cores
PROVENANCE = [("collector", "actor"), ("collector", "restart"), ("collector", "chunk")]
_BUILT: list[RayCollector] = []  # by ray_collector, shut down after each test


class StepPolicy(TensorDictModuleBase):
    """Plays its ``step`` parameter (rounded) as CountingEnv's action: the weights are visible."""

    in_keys = []
    out_keys = ["action"]

    def __init__(self, step: float = 1.0):
        super().__init__()
        self.step = nn.Parameter(torch.tensor(float(step)))

    def forward(self, tensordict):
        action = self.step.detach().round().to(torch.int8).expand(*tensordict.batch_size, 1)
        return tensordict.set("action", action.clone())


def set_step(policy: StepPolicy, value: float) -> None:
    with torch.no_grad():
        policy.step.fill_(value)


def ray_collector(create_env_fn=CountingEnv, policy=None, **kwargs) -> RayCollector:
    """A RayCollector of 2 half-CPU actors unless ``kwargs`` say otherwise."""
    kwargs.setdefault("num_collectors", 2)
    kwargs.setdefault("remote_configs", ACTOR)
    collector = RayCollector(create_env_fn, policy, **kwargs)
    _BUILT.append(collector)
    return collector


@pytest.fixture(autouse=True)
def _shut_down_collectors():
    """Shuts down every collector ``ray_collector`` built, also when the test failed: the
    module's Ray has room for four half-CPU actors, so the actors left by two failed tests
    would leave none for the next tests' (which would time out unscheduled)."""
    yield
    while _BUILT:
        _BUILT.pop().shutdown()  # idempotent


def chunk_ids(batch) -> set[tuple[int, int, int]]:
    """The (actor, restart, chunk) of the chunks in ``batch``, read from every frame."""
    flat = torch.stack([batch.get(key).reshape(-1) for key in PROVENANCE], -1)
    return {tuple(row) for row in flat.tolist()}


def ship_by_value(module_name: str) -> None:
    """Lets actors unpickle what test module ``module_name`` (and this conftest) define."""
    import ray.cloudpickle

    for name in (module_name, __name__):
        ray.cloudpickle.register_pickle_by_value(sys.modules[name])


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance for the whole module, stopped after its last test."""
    ray = pytest.importorskip("ray")
    ray.init(**RAY_INIT)
    yield ray
    ray.shutdown()

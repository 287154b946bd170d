"""A real local Ray for the RayCollector tests: one start per test module, sized for 2 cores.

Test helpers (policies, envs) live in the test modules, which the actors cannot import: each
module registers itself with ``ship_by_value`` so cloudpickle sends its classes by value.
"""

from __future__ import annotations

import os
import sys

import pytest

# Before Ray starts: no usage-stats prompt or upload, no token-auth notice on a private machine.
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

RAY_INIT = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}
# two actors must fit beside the driver on 2 cores
ACTOR = {"num_cpus": 0.5}


def ship_by_value(module_name: str) -> None:
    """Lets actors unpickle the classes and functions defined in test module ``module_name``."""
    import ray.cloudpickle

    ray.cloudpickle.register_pickle_by_value(sys.modules[module_name])


@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance for the whole module, stopped after its last test."""
    ray = pytest.importorskip("ray")
    ray.init(**RAY_INIT)
    yield ray
    ray.shutdown()

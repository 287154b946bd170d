"""RayCollector without Ray installed, and with a Ray of its own: started by it, stopped by it."""

from __future__ import annotations

import re
import sys

import pytest
from conftest import ACTOR, RAY_INIT

from rlcollectors import RayCollector
from rlcollectors._ray import MISSING_RAY
from rlmocks import CountingEnv

pytestmark = pytest.mark.timeout(300)


def test_missing_ray_names_the_extra(monkeypatch):
    """Without Ray, constructing a RayCollector says which extra to install."""
    monkeypatch.setitem(sys.modules, "ray", None)  # what `import ray` meets when it is absent
    with pytest.raises(ImportError, match=re.escape(MISSING_RAY)):
        RayCollector(CountingEnv, frames_per_batch=8, total_frames=8)
    assert "rlcollectors[ray]" in MISSING_RAY and "install it with: pip install" in MISSING_RAY


def test_collector_starts_and_stops_its_own_ray():
    """With Ray not initialized, ray_init_config starts a local Ray that shutdown() stops."""
    ray = pytest.importorskip("ray")
    assert not ray.is_initialized()
    collector = RayCollector(
        CountingEnv,
        num_collectors=2,
        frames_per_batch=8,
        total_frames=16,
        ray_init_config=RAY_INIT,
        remote_configs=ACTOR,
    )
    assert ray.is_initialized()
    assert sum(batch.numel() for batch in collector) == 16
    collector.shutdown()
    assert not ray.is_initialized()

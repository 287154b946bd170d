"""RayCollector on an existing multi-node cluster: joined by address, surviving a lost node.

The cluster is Ray's own ``ray.cluster_utils.Cluster``: a head and a worker node, each a real
raylet on this machine, started once for the module. The driver is not connected to it between
tests: each collector joins it through ``ray_init_config={"address": ...}``.
"""

from __future__ import annotations

import sys
import time

import pytest
import torch

from rlcollectors import RayCollector
from rlmocks import CountingEnv

pytestmark = pytest.mark.timeout(300)

PROVENANCE = [("collector", "actor"), ("collector", "restart"), ("collector", "chunk")]
# Ray notices a lost node after health_check_failure_threshold missed checks: a few seconds here
FAST_NODE_CHECKS = {"health_check_period_ms": 500, "health_check_failure_threshold": 4}
LOST_NODE_BOUND_S = 90.0


@pytest.fixture(scope="module")
def cluster():
    """A head node (1 CPU) and a worker node (1 CPU), shut down after the module."""
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    cluster = cluster_utils.Cluster(
        initialize_head=True,
        head_node_args={
            "num_cpus": 1,
            "include_dashboard": False,
            "_system_config": FAST_NODE_CHECKS,
        },
    )
    cluster.add_node(num_cpus=1)
    yield cluster
    cluster.shutdown()


_BUILT: list[RayCollector] = []  # by _collector, shut down after each test


@pytest.fixture(autouse=True)
def _disconnected():
    """After each test, its collectors shut down and the driver disconnected, also when the
    test failed: a driver left connected to this cluster would fail the ``ray.init`` of the
    next modules' Ray (and their checks that Ray is not initialized)."""
    yield
    while _BUILT:
        _BUILT.pop().shutdown()  # idempotent; disconnects the driver it connected
    ray = sys.modules.get("ray")  # None where Ray is not installed (the tests were skipped)
    if ray is not None and ray.is_initialized():
        ray.shutdown()


def _collector(cluster, **kwargs):
    collector = RayCollector(
        CountingEnv,
        num_collectors=2,
        sync=True,
        frames_per_batch=20,
        ray_init_config={"address": cluster.address, "log_to_driver": False},
        # one actor per node
        remote_configs={"num_cpus": 0.5, "scheduling_strategy": "SPREAD"},
        **kwargs,
    )
    _BUILT.append(collector)
    return collector


def _nodes(collector):
    import ray

    infos = ray.get([actor.info.remote() for actor in collector.remote_collectors()], timeout=60)
    return [info["node_id"] for info in infos]


def test_joins_a_cluster_by_address_and_leaves_it_running(cluster):
    """The collector connects by address, spreads its actors, and only disconnects on shutdown."""
    import ray

    collector = _collector(cluster, total_frames=40)
    assert ray.is_initialized()
    assert len(set(_nodes(collector))) == 2
    assert sum(batch.numel() for batch in collector) == 40
    collector.shutdown()
    assert not ray.is_initialized()
    ray.init(address=cluster.address, log_to_driver=False)  # the cluster is still up
    assert len([node for node in ray.nodes() if node["Alive"]]) == 2
    ray.shutdown()


def test_actor_on_a_lost_node_comes_back_on_another(cluster):
    """A node dies with its actor: the actor restarts elsewhere and collection goes on."""
    collector = _collector(cluster, total_frames=-1)
    head = cluster.head_node.node_id
    nodes = _nodes(collector)
    lost = [idx for idx, node in enumerate(nodes) if node != head]
    assert len(lost) == 1
    (worker,) = [node for node in cluster.list_all_nodes() if node.node_id != head]
    seen, frames = [], 0
    batches = iter(collector)
    frames += next(batches).numel()
    cluster.remove_node(worker, allow_graceful=False)
    deadline = time.monotonic() + LOST_NODE_BOUND_S
    while collector._restarts[lost[0]] == 0:
        assert time.monotonic() < deadline, "the lost node's actor never came back"
        batch = next(batches)
        frames += batch.numel()
        flat = torch.stack([batch.get(k).reshape(-1) for k in PROVENANCE], -1)
        seen += {tuple(row) for row in flat.tolist()}
    batch = next(batches)  # a whole batch after the recovery, the new actor's chunk in it
    frames += batch.numel()
    assert batch["collector", "restart"][lost[0]].eq(1).all()
    assert len(seen) == len(set(seen)) and frames == collector.frames
    assert _nodes(collector) == [head, head]
    collector.shutdown()
    cluster.add_node(num_cpus=1)  # as the fixture made it, for any later test

"""The seed's cases that skip without CUDA although their bodies run on the CPU, on the CPU.

``test_env.py`` (the seed port, unchanged) skips every ``test_parallel_devices`` case and the
whole of ``TestConcurrentEnvs`` on a machine without CUDA. Sixteen of the former (every
device ``cpu`` or ``None``) and the latter's bodies need no GPU: here they run the seed's own
test functions, not copies, with the CPU parameters.
"""

from __future__ import annotations

import pytest
import test_env as seed  # a module, not its classes: pytest would collect those again here


@pytest.mark.parametrize("parallel", [True, False])
@pytest.mark.parametrize("hetero", [True, False])
@pytest.mark.parametrize("pdevice", [None, "cpu"])
@pytest.mark.parametrize("bwad", [True, False])
def test_parallel_devices_on_cpu(parallel, hetero, pdevice, bwad, maybe_fork_ParallelEnv):
    seed.TestParallel().test_parallel_devices(
        parallel, hetero, pdevice, "cpu", bwad, maybe_fork_ParallelEnv
    )


@pytest.mark.parametrize("nproc", [3, 1])
def test_concurrent_parallel_envs_on_cpu(nproc):
    seed.TestConcurrentEnvs().test_mp_concurrent(nproc)


@pytest.mark.parametrize("nproc", [3, 1])
def test_concurrent_collectors_on_cpu(nproc):
    seed.TestConcurrentEnvs().test_mp_collector(nproc)

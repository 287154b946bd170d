"""The pytest plugin every nox session loads (``-p pytest_rlstack``, ``tools/`` on the path).

- **A per-test timeout is required**: a run without one (pytest-timeout's ``--timeout`` or
  ``timeout`` ini value) stops at once with a usage error, so no session can hang until CI is
  killed. ``@pytest.mark.timeout(n)`` on a test still overrides it.
- **``slow``**: the marker of tests the contributor's loop (``nox -s dev``, ``-m "not slow"``)
  leaves out; the full run takes them all. Tests that start worker processes with ``spawn`` or
  ``forkserver`` (a parameter of that value; each such worker imports torch afresh) are slow
  by rule, others by an explicit ``@pytest.mark.slow``.
- **``--cuda-only``** (``nox -s cuda``): keeps only the tests that exercise CUDA (a ``cuda``
  in their id, or a skip condition about CUDA) and fails at once without a CUDA device, so the
  session cannot pass by skipping everything.
- **A Ray of its own**: each pytest run gets its own ``RAY_TMPDIR`` (unless one is set), so a
  ``ray.init()`` in it never joins another run's cluster. Ray's ``ray.init()`` connects to the
  last cluster recorded in ``<tmp>/ray/ray_current_cluster``, which a ``ray.cluster_utils.Cluster``
  in a session running beside this one writes; ``ray.init(num_cpus=...)`` then refuses.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile

import pytest

SLOW_START_METHODS = frozenset({"spawn", "forkserver"})
CUDA_WORD = re.compile(r"cuda", re.IGNORECASE)
NO_TIMEOUT = (
    "pytest_rlstack: no per-test timeout is set; pass --timeout=<seconds> (pytest-timeout) so "
    "that a hanging test fails and names itself"
)
NO_CUDA = "--cuda-only: torch sees no CUDA device here; run the cuda session on a GPU machine"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cuda-only",
        action="store_true",
        default=False,
        help="run only the tests that exercise CUDA; fail without a CUDA device",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: a slow test (left out of the contributor's loop, nox -s dev)"
    )
    timeout = (
        config.getoption("timeout", None) if config.pluginmanager.has_plugin("timeout") else None
    )
    if not timeout:
        raise pytest.UsageError(NO_TIMEOUT)
    if "RAY_TMPDIR" not in os.environ:
        # short: Ray's socket paths live under it and a Unix socket path is at most 107 bytes
        config._rlstack_ray_tmpdir = os.environ["RAY_TMPDIR"] = tempfile.mkdtemp(
            prefix="ray-", dir="/tmp"
        )
    if config.getoption("cuda_only"):
        import torch

        if not torch.cuda.is_available():
            raise pytest.UsageError(NO_CUDA)


def pytest_unconfigure(config: pytest.Config) -> None:
    ray_tmpdir = getattr(config, "_rlstack_ray_tmpdir", None)
    if ray_tmpdir is not None:
        shutil.rmtree(ray_tmpdir, ignore_errors=True)


def starts_slow_workers(item: pytest.Item) -> bool:
    """Whether a test is parametrized with the ``spawn`` or ``forkserver`` start method."""
    callspec = getattr(item, "callspec", None)
    if callspec is None:
        return False
    return any(
        isinstance(value, str) and value in SLOW_START_METHODS for value in callspec.params.values()
    )


def exercises_cuda(item: pytest.Item) -> bool:
    """Whether a test is about CUDA: ``cuda`` in its id, or a skip condition about CUDA.

    The id is read from the test's file name on, not its directories: a temporary or checkout
    directory with ``cuda`` in its name says nothing about the tests below it.
    """
    if CUDA_WORD.search(f"{item.path.name}::{item.nodeid.partition('::')[2]}"):
        return True
    for mark in item.iter_markers("skipif"):
        if CUDA_WORD.search(str(mark.kwargs.get("reason", ""))):
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if starts_slow_workers(item):
            item.add_marker(pytest.mark.slow)
    if config.getoption("cuda_only"):
        kept = [item for item in items if exercises_cuda(item)]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept

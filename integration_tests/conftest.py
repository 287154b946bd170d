"""Fixtures and options the seed's tests expect (see ../shared/spec/MOCKS.md §1)."""

from __future__ import annotations

import functools
import sys
import warnings

import pytest
import torch


def pytest_addoption(parser):
    parser.addoption(
        "--mp_fork",
        action="store_true",
        default=False,
        help="Use the 'fork' start method for the ParallelEnv fixture.",
    )
    parser.addoption(
        "--mp_fork_if_no_cuda",
        action="store_true",
        default=False,
        help="Use 'fork' for the ParallelEnv fixture when CUDA is not available.",
    )
    parser.addoption("--runslow", action="store_true", default=False, help="Run slow tests.")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: a slow test, run only with --runslow")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--runslow"):
        return
    skip_slow = pytest.mark.skip(reason="slow test: pass --runslow to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip_slow)


@pytest.fixture
def maybe_fork_ParallelEnv(request):  # noqa: N802  (seed name)
    from rlbatched import ParallelEnv

    fork = request.config.getoption("--mp_fork") or (
        request.config.getoption("--mp_fork_if_no_cuda") and not torch.cuda.is_available()
    )
    if fork and sys.platform != "darwin":
        return functools.partial(ParallelEnv, mp_start_method="fork")
    return ParallelEnv


@pytest.fixture(autouse=True)
def _silence_known_warnings():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Lazy modules are a new feature")
        warnings.filterwarnings(
            "ignore", message="Couldn't cast the policy onto the desired device"
        )
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        yield

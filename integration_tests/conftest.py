"""Fixtures and options the seed's tests expect (see ../shared/spec/MOCKS.md §1).

The ``slow`` marker is the suite plugin's (``tools/pytest_rlstack.py``): slow tests run in the
full run and are left out of the contributor's loop, so MOCKS.md's optional ``--runslow`` (which
would skip them) is not offered.
"""

from __future__ import annotations

import functools
import sys
import warnings

import pytest
import torch

FORK_FIXTURE = "maybe_fork_ParallelEnv"


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
    parser.addoption(
        "--only-fork-fixture",
        action="store_true",
        default=False,
        help=f"Run only the tests that take the {FORK_FIXTURE} fixture (the fork pass).",
    )


def takes_fork_fixture(item) -> bool:
    """Whether a test takes the seed's ParallelEnv fixture (directly or through another one)."""
    return FORK_FIXTURE in getattr(item, "fixturenames", ())


def pytest_collection_modifyitems(config, items):
    if config.getoption("--only-fork-fixture"):
        kept = [item for item in items if takes_fork_fixture(item)]
        config.hook.pytest_deselected(items=[item for item in items if item not in kept])
        items[:] = kept


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

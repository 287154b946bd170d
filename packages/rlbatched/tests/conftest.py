"""Fixtures for the rlbatched suite: batched-env factories that close what they open."""

from __future__ import annotations

import functools

import pytest
from batched_test_envs import FACTORIES


@pytest.fixture
def opened():
    """A list to which tests append envs; each is closed at teardown."""
    envs = []
    yield envs
    for env in envs:
        env.close()


def _make(opened, kind, *args, **kwargs):
    env = FACTORIES[kind](*args, **kwargs)
    opened.append(env)
    return env


@pytest.fixture(params=["serial", "fork"])
def make_batched(request, opened):
    """Build a SerialEnv or a fork ParallelEnv (the cheap pair most behaviours run under)."""
    return functools.partial(_make, opened, request.param)


@pytest.fixture
def make_fork(opened):
    """Build a ParallelEnv with the fork start method."""
    return functools.partial(_make, opened, "fork")


@pytest.fixture
def make_serial(opened):
    """Build a SerialEnv."""
    return functools.partial(_make, opened, "serial")


@pytest.fixture
def make_kind(opened):
    """Build an env of the named kind: ``make_kind("spawn", 2, Env)``."""
    return functools.partial(_make, opened)

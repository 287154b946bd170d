"""The ``Examples:`` blocks of the modules holding current torchrl's transforms run as doctests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "rltransforms.functional",
    "rltransforms._action_scaling",
    "rltransforms._auto_unwrap",
    "rltransforms._hooks",
    "rltransforms._chunking",
    "rltransforms._conditional",
    "rltransforms._crop",
    "rltransforms._discretize",
    "rltransforms._episode_ends",
    "rltransforms._expand_as",
    "rltransforms._flatten_action",
    "rltransforms._module_transform",
    "rltransforms._multi_action",
    "rltransforms._observation_delta",
    "rltransforms._reward_shaping",
    "rltransforms._stack",
    "rltransforms._timing",
    "rltransforms._traj_counter",
    "rltransforms._unary",
    "rltransforms._vecnorm_v2",
]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = doctest.DocTestFinder().find(module)
    assert any(test.examples for test in tests), f"{name} has no example"
    for test in tests:
        runner.run(test)
    assert runner.failures == 0

"""The ``Examples:`` blocks of the vector-env, EnvPool and rollout modules run as doctests."""

from __future__ import annotations

import doctest
import importlib
import importlib.util

import pytest

MODULES = {
    "rllibs._gym_vector": "gymnasium",
    "rllibs._gym_rollout": "gymnasium",
    "rllibs._gym": "gymnasium",
    "rllibs._gym_like": "mujoco",
    "rllibs._envpool": "envpool",
    "rllibs._extras": "importlib",
}


@pytest.mark.parametrize("name", list(MODULES))
def test_examples_run(name):
    if importlib.util.find_spec(MODULES[name]) is None:
        pytest.skip(f"{MODULES[name]} not installed")
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0

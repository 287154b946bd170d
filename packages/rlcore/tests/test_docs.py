"""The ``Examples:`` blocks of rlcore's public classes and functions run as doctests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["rlcore._env_base", "rlcore._step_mdp", "rlcore._done", "rlcore._marl"]


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

"""The ``Examples:`` blocks of the Ray modules run as doctests (each starts and stops its Ray)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rlcollectors

MODULES = sorted(
    m.name
    for m in pkgutil.iter_modules(rlcollectors.__path__, "rlcollectors.")
    if m.name.startswith("rlcollectors._ray")
)


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

"""The ``Examples:`` blocks of every rlcollectors module run as doctests.

The Ray modules' examples run in ``tests_ray`` (``nox -s rlcollectors_ray``), where Ray is.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rlcollectors

MODULES = sorted(
    m.name
    for m in pkgutil.iter_modules(rlcollectors.__path__, "rlcollectors.")
    if not m.name.startswith("rlcollectors._ray")
)


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

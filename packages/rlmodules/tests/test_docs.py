"""The ``Examples:`` blocks of every rlmodules module run as doctests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rlmodules

MODULES = sorted(m.name for m in pkgutil.iter_modules(rlmodules.__path__, "rlmodules."))


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

"""The ``Examples:`` blocks of rlworkers' modules run as doctests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rlworkers

MODULES = sorted(m.name for m in pkgutil.walk_packages(rlworkers.__path__, "rlworkers."))


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

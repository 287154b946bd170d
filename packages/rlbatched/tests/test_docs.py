"""The ``Examples:`` blocks of rlbatched's modules run as doctests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rlbatched

MODULES = sorted(m.name for m in pkgutil.walk_packages(rlbatched.__path__, "rlbatched."))


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

"""The ``Examples:`` blocks of every module's docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import rlspecs

MODULES = sorted(m.name for m in pkgutil.iter_modules(rlspecs.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(f"rlspecs.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

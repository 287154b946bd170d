"""The ``Examples:`` blocks of every module's docstrings run and print what they claim."""

from __future__ import annotations

import doctest
import importlib
import pathlib
import pkgutil
import re

import pytest

import rlmocks

MODULES = sorted(m.name for m in pkgutil.iter_modules(rlmocks.__path__))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(f"rlmocks.{name}")
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


README = pathlib.Path(__file__).parents[1] / "README.md"


def test_readme_downstream_tests_pass():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)
    assert blocks
    namespace: dict = {}
    exec(compile(blocks[0], str(README), "exec"), namespace)
    tests = [fn for name, fn in namespace.items() if name.startswith("test_")]
    assert tests
    for test in tests:
        test()

"""The ``Examples:`` blocks of the packages whose own suites do not run them.

rlspecs, rlcore and rlmocks run their examples in their own suites; the examples of rlbatched,
rllibs, rlmodules and rlcollectors use other packages (mock envs, Gymnasium, dm_control), all
installed here.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ["rlbatched", "rllibs", "rlmodules", "rlcollectors"]
MODULES = sorted(
    info.name
    for package in PACKAGES
    for info in pkgutil.walk_packages(importlib.import_module(package).__path__, f"{package}.")
)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

"""The ``Examples:`` blocks of every rllibs module run as doctests.

A module whose examples need an optional library runs where that library is installed (the
package's tests install ``rllibs[all]``); only its absence (dm_control on Python 3.13, EnvPool
below 3.11) skips it.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest

import rllibs

MODULES = sorted(m.name for m in pkgutil.iter_modules(rllibs.__path__, "rllibs."))
# modules whose examples need a library beyond gymnasium
NEEDS = {"rllibs._dm_control": "dm_control", "rllibs._envpool": "envpool"}


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    library = NEEDS.get(name, "gymnasium")
    if importlib.util.find_spec(library) is None:
        pytest.skip(f"{library} is not installed")
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

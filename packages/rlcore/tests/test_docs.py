"""The ``Examples:`` blocks of rlcore's public classes and functions run as doctests.

Examples that need an env use ``env`` or ``base_env`` (and ``MyEnv``, its class): a counting
env that stays alive through short rollouts and earns a reward of 1 per step. The few that
show ``rlcore`` finding ``rltransforms`` (``append_transform``) need that package: without
it (rlcore's own session installs only what rlcore declares) they are reported as skipped,
after every other example of their module ran; ``tensordict_min`` runs them.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil

import pytest
import torch
from _rlcore_envs import CountingEnv

import rlcore

MODULES = sorted(m.name for m in pkgutil.walk_packages(rlcore.__path__, "rlcore."))


class MyEnv(CountingEnv):
    """The examples' env: a CountingEnv not done within 100 steps, with a reward of 1."""

    def __init__(self) -> None:
        super().__init__(max_steps=100)

    def _step(self, tensordict):
        out = super()._step(tensordict)
        out["reward"] = torch.ones_like(out["reward"])
        return out


NEEDS_TRANSFORMS = "rltransforms"


def _needs_transforms(test: doctest.DocTest) -> bool:
    return any(NEEDS_TRANSFORMS in example.source for example in test.examples)


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    module = importlib.import_module(name)
    globs = {"env": MyEnv(), "base_env": MyEnv(), "MyEnv": MyEnv}
    have_transforms = importlib.util.find_spec(NEEDS_TRANSFORMS) is not None
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    skipped = []
    for test in doctest.DocTestFinder().find(module, extraglobs=globs):
        if not have_transforms and _needs_transforms(test):
            skipped.append(test.name)
            continue
        runner.run(test)
    assert runner.failures == 0
    if skipped:
        pytest.skip(f"rltransforms is not installed, not run: {', '.join(skipped)}")

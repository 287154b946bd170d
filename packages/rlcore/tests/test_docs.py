"""The ``Examples:`` blocks of rlcore's public classes and functions run as doctests.

Examples that need an env use ``env`` or ``base_env`` (and ``MyEnv``, its class): a counting
env that stays alive through short rollouts and earns a reward of 1 per step.
"""

from __future__ import annotations

import doctest
import importlib
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


@pytest.mark.parametrize("name", MODULES)
def test_examples_run(name):
    module = importlib.import_module(name)
    globs = {"env": MyEnv(), "base_env": MyEnv(), "MyEnv": MyEnv}
    result = doctest.testmod(module, extraglobs=globs, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0

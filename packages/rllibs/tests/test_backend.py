"""gym_backend / set_gym_backend: torchrl 0.4's switch, gymnasium the one backend."""

from __future__ import annotations

import re
import types

import pytest

gymnasium = pytest.importorskip("gymnasium")

from rllibs import gym_backend, set_gym_backend  # noqa: E402
from rllibs._backend import BAD_SUBMODULE, UNSUPPORTED_BACKEND  # noqa: E402


def test_gym_backend_is_gymnasium_and_reaches_its_submodules():
    assert gym_backend() is gymnasium
    assert gym_backend("spaces") is gymnasium.spaces
    assert gym_backend("wrappers") is gymnasium.wrappers
    assert gym_backend(".vector") is gymnasium.vector


def test_an_unknown_submodule_is_named():
    with pytest.raises(ImportError, match=re.escape(BAD_SUBMODULE.format(submodule="nope"))):
        gym_backend("nope")


@pytest.mark.parametrize(
    "backend", ["gymnasium", gymnasium, lambda: gymnasium], ids=["name", "module", "callable"]
)
def test_set_gym_backend_accepts_gymnasium_in_each_form(backend):
    with set_gym_backend(backend) as selected:
        assert gym_backend() is gymnasium
        assert selected.backend is gymnasium


def test_set_gym_backend_decorates_functions():
    @set_gym_backend("gymnasium")
    def make():
        return gym_backend().make("CartPole-v1")

    assert make().spec.id == "CartPole-v1"
    assert make().spec.id == "CartPole-v1"  # reusable


def test_set_and_clone():
    switch = set_gym_backend("gymnasium")
    switch.set()
    assert switch.clone().backend is gymnasium


@pytest.mark.parametrize("backend", ["gym", types.ModuleType("gym")], ids=["name", "module"])
def test_another_backend_is_refused_on_entry(backend):
    switch = set_gym_backend(backend)  # torchrl 0.4: making the switch checks nothing
    with pytest.raises(ImportError, match=re.escape(UNSUPPORTED_BACKEND.format(backend="gym"))):
        with switch:
            pass


def test_a_callable_giving_another_backend_is_refused_on_entry():
    switch = set_gym_backend(lambda: types.ModuleType("gym"))
    with pytest.raises(ImportError, match=re.escape(UNSUPPORTED_BACKEND.format(backend="gym"))):
        with switch:
            pass

    @switch
    def run():
        return "ran"

    with pytest.raises(ImportError, match="rllibs wraps gymnasium only"):
        run()

"""set_gym_backend checks its backend only when entered, as in torchrl 0.4 (issue 29)."""

from __future__ import annotations

import re
import types

import pytest

gymnasium = pytest.importorskip("gymnasium")

from rllibs import gym_backend, set_gym_backend  # noqa: E402
from rllibs._backend import CLASS_DECORATED, UNSUPPORTED_BACKEND  # noqa: E402

REFUSED = re.escape(UNSUPPORTED_BACKEND.format(backend="gym"))

MODULE_SOURCE = """
from rllibs import gym_backend, set_gym_backend

@set_gym_backend("gym")
def make():
    return gym_backend()
"""


def test_a_module_decorating_with_another_backend_imports():
    module = types.ModuleType("uses_gym")
    exec(compile(MODULE_SOURCE, "uses_gym.py", "exec"), module.__dict__)  # its import
    assert callable(module.make)
    with pytest.raises(ImportError, match=REFUSED):
        module.make()


@pytest.mark.parametrize("backend", ["gym", types.ModuleType("gym"), 3])
def test_making_and_cloning_the_switch_check_nothing(backend):
    switch = set_gym_backend(backend)  # raised before issue 29
    assert type(switch.clone()) is set_gym_backend


@pytest.mark.parametrize("backend", ["gym", types.ModuleType("gym"), lambda: "gym"])
def test_another_backend_is_refused_by_set(backend):
    with pytest.raises(ImportError, match=REFUSED):
        set_gym_backend(backend).set()


def test_another_backend_is_refused_when_read():
    with pytest.raises(ImportError, match=REFUSED):
        set_gym_backend("gym").backend  # noqa: B018


def test_the_decorated_function_does_not_run_under_another_backend():
    ran = []

    @set_gym_backend("gym")
    def run():
        ran.append(True)

    with pytest.raises(ImportError, match=REFUSED):
        run()
    assert ran == []


def test_the_backend_can_be_replaced_and_decorations_follow():
    switch = set_gym_backend("gym")

    @switch
    def make():
        return gym_backend()

    switch.backend = "gymnasium"
    assert switch.backend is gymnasium
    assert make() is gymnasium  # each call enters a fresh clone of the switch


def test_a_decorated_generator_is_checked_when_it_first_runs():
    @set_gym_backend("gym")
    def frames():
        yield 1

    generator = frames()  # creating it checks nothing
    with pytest.raises(ImportError, match=REFUSED):
        next(generator)


def test_a_decorated_generator_runs_under_gymnasium():
    @set_gym_backend("gymnasium")
    def names():
        yield gym_backend().__name__
        yield gym_backend("spaces").__name__

    assert list(names()) == ["gymnasium", "gymnasium.spaces"]


def test_decorating_a_class_warns_and_builds_it_under_the_backend():
    class Maker:
        def __init__(self, env_id):
            self.env = gym_backend().make(env_id)

    with pytest.warns(FutureWarning, match=re.escape(CLASS_DECORATED.format(name="Maker"))):
        make = set_gym_backend("gymnasium")(Maker)
    assert not isinstance(make, type)
    assert make.__name__ == "Maker"
    assert isinstance(make("CartPole-v1"), Maker)


def test_a_class_decorated_with_another_backend_fails_when_built():
    class Maker:
        pass

    with pytest.warns(FutureWarning, match="Decorating classes is deprecated"):
        make = set_gym_backend("gym")(Maker)
    with pytest.raises(ImportError, match=REFUSED):
        make()

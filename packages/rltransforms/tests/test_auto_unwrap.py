"""Wrapping a TransformedEnv in another: auto_unwrap, set_auto_unwrap_transformed_env and the
AUTO_UNWRAP_TRANSFORMED_ENV environment variable (current torchrl's switch)."""

from __future__ import annotations

import multiprocessing
import os
import re

import pytest
from _transform_envs import CountEnv

from rltransforms import (
    RewardSum,
    StepCounter,
    TransformedEnv,
    _auto_unwrap,
    auto_unwrap_transformed_env,
    set_auto_unwrap_transformed_env,
)

pytestmark = pytest.mark.filterwarnings("error")

ENV_VAR = "AUTO_UNWRAP_TRANSFORMED_ENV"


@pytest.fixture(autouse=True)
def unset_switch(monkeypatch):
    """Each test starts with the switch unset (no variable)."""
    monkeypatch.delenv(ENV_VAR, raising=False)
    monkeypatch.setitem(_auto_unwrap._state, "mode", None)


def _inner():
    return TransformedEnv(CountEnv(), StepCounter())


def _names(env):
    return [type(t).__name__ for t in env.transform]


def test_unset_switch_nests_as_torchrl_04_did_without_a_warning():
    inner = _inner()
    outer = TransformedEnv(inner, RewardSum())  # the module's filterwarnings("error"): no warning
    assert outer.base_env is inner
    assert type(outer.transform).__name__ == "RewardSum"
    assert auto_unwrap_transformed_env() is False
    assert auto_unwrap_transformed_env(allow_none=True) is None


def test_unwrapping_clones_the_inner_transforms():
    inner = _inner()
    outer = TransformedEnv(inner, RewardSum(), auto_unwrap=True)
    assert outer.transform[0] is not inner.transform
    assert inner.transform.container is inner  # the inner env is left intact
    assert inner.rollout(2)["next", "step_count"].squeeze(-1).tolist() == [1, 2]


def test_unwrapping_without_a_transform_keeps_the_inner_ones():
    outer = TransformedEnv(_inner(), auto_unwrap=True)
    assert isinstance(outer.base_env, CountEnv) and _names(outer) == ["StepCounter"]


def test_a_subclass_is_never_unwrapped():
    class MyEnv(TransformedEnv):
        pass

    inner = MyEnv(CountEnv(), StepCounter())
    assert TransformedEnv(inner, RewardSum(), auto_unwrap=True).base_env is inner


def test_context_manager_keeps_nesting():
    inner = _inner()
    with set_auto_unwrap_transformed_env(False):
        outer = TransformedEnv(inner, RewardSum())
        assert auto_unwrap_transformed_env() is False
        assert os.environ[ENV_VAR] == "False"
    assert outer.base_env is inner


def test_context_manager_restores_the_unset_state():
    with set_auto_unwrap_transformed_env(True):
        pass
    assert auto_unwrap_transformed_env(allow_none=True) is None
    assert auto_unwrap_transformed_env() is False  # the default again
    assert ENV_VAR not in os.environ  # removed, not written as "None"


def test_context_manager_restores_a_previous_setting():
    with set_auto_unwrap_transformed_env(False):
        with set_auto_unwrap_transformed_env(True):
            assert auto_unwrap_transformed_env() is True
        assert auto_unwrap_transformed_env() is False
        assert os.environ[ENV_VAR] == "False"


def test_decorator_sets_the_switch_during_each_call():
    @set_auto_unwrap_transformed_env(False)
    def wrap(env):
        return TransformedEnv(env, RewardSum())

    inner = _inner()
    assert wrap(inner).base_env is inner
    assert wrap(inner).base_env is inner  # called twice: each call sets and restores
    assert auto_unwrap_transformed_env(allow_none=True) is None


def test_set_lasts_after_the_call():
    set_auto_unwrap_transformed_env(False).set()
    assert auto_unwrap_transformed_env() is False
    assert os.environ[ENV_VAR] == "False"
    inner = _inner()
    assert TransformedEnv(inner, RewardSum()).base_env is inner


def test_argument_beats_the_switch():
    inner = _inner()
    with set_auto_unwrap_transformed_env(False):
        assert isinstance(TransformedEnv(inner, auto_unwrap=True).base_env, CountEnv)
    with set_auto_unwrap_transformed_env(True):
        assert TransformedEnv(inner, auto_unwrap=False).base_env is inner


def test_switch_takes_a_bool_only():
    with pytest.raises(TypeError, match="takes a bool .* got 'False' of type str"):
        set_auto_unwrap_transformed_env("False")


def test_environment_value_without_truth_value_is_refused(monkeypatch):
    monkeypatch.setitem(_auto_unwrap._state, "mode", "maybe")
    message = "Invalid truth value 'maybe' for AUTO_UNWRAP_TRANSFORMED_ENV"
    with pytest.raises(ValueError, match=re.escape(message)):
        auto_unwrap_transformed_env()


def _report_switch(queue):
    # module level: the spawned child imports this module, hence rltransforms, afresh
    inner = TransformedEnv(CountEnv(), StepCounter())
    nested = TransformedEnv(inner, RewardSum()).base_env is inner
    queue.put((auto_unwrap_transformed_env(allow_none=True), nested))


def test_spawned_process_sees_the_switch():
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    with set_auto_unwrap_transformed_env(False):
        process = context.Process(target=_report_switch, args=(queue,))
        process.start()
    try:
        assert queue.get(timeout=60) == (False, True)
    finally:
        process.join(timeout=60)
    assert process.exitcode == 0

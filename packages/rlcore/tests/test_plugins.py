"""What EnvBase finds above rlcore: register_gym (the rlcore.register_gym entry point) and the
transforms (rltransforms, imported by name when needed), never imported by rlcore itself."""

from __future__ import annotations

import re
import sys

import pytest
import torch
from tensordict import TensorDict

from rlcore import EnvBase
from rlcore import _plugins as registration
from rlspecs import Composite, Unbounded


class _Env(EnvBase):
    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(1))
        self.action_spec = Unbounded(1)

    def _reset(self, tensordict):
        return TensorDict({"observation": torch.zeros(1)}, [])

    def _step(self, tensordict):
        return TensorDict({"observation": torch.zeros(1), "reward": torch.zeros(1)}, [])

    def _set_seed(self, seed):
        pass


class _EntryPoint:
    def __init__(self, name, target=None, error=None):
        self.name, self.value = name, f"plugin_{name}:register_gym"
        self._target, self._error = target, error

    def load(self):
        if self._error is not None:
            raise self._error
        return self._target


def _use_entry_points(monkeypatch, *found):
    def entry_points(*, group):
        assert group == registration.ENTRY_POINT_GROUP
        return list(found)

    monkeypatch.setattr(registration.importlib.metadata, "entry_points", entry_points)


def test_register_gym_calls_the_plugin_with_the_class_and_every_argument(monkeypatch):
    calls = []
    _use_entry_points(monkeypatch, _EntryPoint("gymnasium", lambda *a, **k: calls.append((a, k))))
    _Env.register_gym("Thing-v0", to_numpy=True, max_episode_steps=5, custom=3)
    ((args, kwargs),) = calls
    assert args == (_Env, "Thing-v0")
    assert kwargs["to_numpy"] is True and kwargs["max_episode_steps"] == 5
    assert kwargs["custom"] == 3
    assert kwargs["entry_point"] is None and kwargs["order_enforce"] is True


def test_the_gymnasium_plugin_is_preferred_over_others(monkeypatch):
    used = []
    _use_entry_points(
        monkeypatch,
        _EntryPoint("another", lambda *a, **k: used.append("another")),
        _EntryPoint("gymnasium", lambda *a, **k: used.append("gymnasium")),
    )
    _Env.register_gym("Thing-v0")
    assert used == ["gymnasium"]


def test_without_a_plugin_the_error_names_the_install_command(monkeypatch):
    _use_entry_points(monkeypatch)
    message = registration.NO_GYM_PLUGIN.format(
        what="_Env.register_gym", group=registration.ENTRY_POINT_GROUP
    )
    with pytest.raises(ImportError, match=re.escape(message)):
        _Env.register_gym("Thing-v0")
    assert 'pip install --find-links dist "rllibs[gym]"' in message


def test_a_plugin_that_fails_to_load_is_reported_with_its_cause(monkeypatch):
    _use_entry_points(monkeypatch, _EntryPoint("gymnasium", error=ImportError("no gymnasium")))
    with pytest.raises(ImportError, match="could not be loaded \\(no gymnasium\\)"):
        _Env.register_gym("Thing-v0")


# ------------------------------------------------------------------ the transforms


@pytest.fixture
def without_rltransforms(monkeypatch):
    """As if rltransforms were not installed (None in sys.modules stops its import)."""
    monkeypatch.setitem(sys.modules, "rltransforms", None)


def test_append_transform_without_rltransforms_says_what_to_install(without_rltransforms):
    with pytest.raises(ImportError, match=re.escape("pip install rltransforms")) as info:
        _Env().append_transform(object())
    assert "EnvBase.append_transform" in str(info.value)


def test_auto_reset_without_rltransforms_says_what_to_install(without_rltransforms):
    with pytest.raises(
        ImportError, match=r"_Env\(\.\.\., auto_reset=True\).*pip install rltransforms"
    ):
        _Env(auto_reset=True)


def test_rlcore_imports_no_transform_module():
    import subprocess

    code = (
        "import rlcore, sys; print(sorted(m for m in sys.modules if m.startswith('rltransforms')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

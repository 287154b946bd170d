"""Optional extras: availability flags, lazy imports and the errors naming what to install."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import rllibs
from rllibs import DMControlEnv, GymEnv, GymWrapper, MultiThreadedEnv, MultiThreadedEnvWrapper
from rllibs._extras import missing_extra


def test_flags_and_seed_era_aliases_agree():
    assert rllibs._has_gym is rllibs.HAS_GYM
    assert rllibs._has_dmc is rllibs.HAS_DMC
    assert rllibs._has_envpool is rllibs.HAS_ENVPOOL


def test_import_rllibs_works_without_gymnasium_or_dm_control():
    code = (
        "import sys\n"
        "for name in ('gymnasium', 'dm_control', 'mujoco', 'ale_py', 'envpool'):\n"
        "    sys.modules[name] = None\n"
        "import rllibs\n"
        "assert not rllibs.HAS_GYM and not rllibs.HAS_DMC and not rllibs.HAS_ENVPOOL\n"
        "assert 'gymnasium' not in [m for m, v in sys.modules.items() if v is not None]\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_import_rllibs_does_not_import_the_backends():
    code = (
        "import sys, rllibs\n"
        "backends = ('gymnasium', 'dm_control', 'mujoco', 'ale_py', 'envpool')\n"
        "loaded = [m for m in backends if m in sys.modules]\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize(
    "make,module,extra,what",
    [
        (lambda: GymEnv("Pendulum-v1"), "gymnasium", "gym", "GymEnv('Pendulum-v1')"),
        (lambda: GymWrapper(object()), "gymnasium", "gym", "GymWrapper"),
        (
            lambda: DMControlEnv("humanoid", "stand"),
            "dm_control",
            "dmc",
            "DMControlEnv('humanoid', 'stand')",
        ),
    ],
    ids=["GymEnv", "GymWrapper", "DMControlEnv"],
)
def test_missing_backend_names_the_extra(monkeypatch, make, module, extra, what):
    monkeypatch.setitem(sys.modules, module, None)  # the import system now fails on it
    message = missing_extra(what, module, extra)
    with pytest.raises(ImportError, match=re.escape(message)):
        make()
    assert f"rllibs[{extra}]" in message
    # the command installs the extra's own requirements, read from rllibs' metadata
    command = message.split("install it with: ")[1]
    assert command.startswith("pip install ") and module.split("_")[0] in command.replace("-", "_")


def test_missing_ale_names_the_atari_extra(monkeypatch):
    pytest.importorskip("gymnasium")
    monkeypatch.setitem(sys.modules, "ale_py", None)
    message = missing_extra("GymEnv('ALE/Pong-v5')", "ale_py", "atari")
    with pytest.raises(ImportError, match=re.escape(message)):
        GymEnv("ALE/Pong-v5")


@pytest.mark.parametrize(
    "make,what",
    [
        (lambda: MultiThreadedEnv(2, "Pendulum-v1"), "MultiThreadedEnv('Pendulum-v1')"),
        (lambda: MultiThreadedEnvWrapper(object()), "MultiThreadedEnvWrapper"),
    ],
    ids=["MultiThreadedEnv", "MultiThreadedEnvWrapper"],
)
def test_missing_envpool_names_the_envpool_extra(monkeypatch, make, what):
    monkeypatch.setitem(sys.modules, "envpool", None)  # the import system now fails on it
    with pytest.raises(ImportError) as error:
        make()
    message = str(error.value)
    assert what in message and '"envpool"' in message and "rllibs[envpool]" in message

"""Missing optional dependencies name a pip command that installs them."""

from __future__ import annotations

import pathlib
import sys

import pytest

from rlcore import import_optional, missing_extra_message

METADATA = """Metadata-Version: 2.1
Name: fakepkg
Version: 1.0
Requires-Dist: torch>=2.3
Requires-Dist: dm_control>=1.0.16; extra == "dmc"
Requires-Dist: mujoco<4,>=3.17; extra == 'dmc'
Requires-Dist: gymnasium>=1.0; extra == "gym"
Requires-Dist: fakepkg[gym,dmc]; extra == "all"
"""


@pytest.fixture
def fake_distribution(tmp_path: pathlib.Path, monkeypatch):
    info = tmp_path / "fakepkg-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(METADATA)
    monkeypatch.syspath_prepend(str(tmp_path))
    return "fakepkg"


def test_message_names_the_extras_own_requirements(fake_distribution):
    message = missing_extra_message("DMControlEnv", "dm_control", fake_distribution, "dmc")
    assert 'requires the "dm_control" package (the extra fakepkg[dmc])' in message
    assert message.endswith('pip install "dm_control>=1.0.16" "mujoco<4,>=3.17"')


def test_message_skips_self_references_of_an_umbrella_extra(fake_distribution):
    message = missing_extra_message("X", "gymnasium", fake_distribution, "all")
    assert message.endswith('pip install "fakepkg[all]"')  # nothing of its own: the extra itself


def test_message_without_metadata_names_the_extra():
    message = missing_extra_message("GymEnv", "gymnasium", "surely-not-installed", "gym")
    assert message.endswith('pip install "surely-not-installed[gym]"')


def test_import_optional_raises_import_error_with_the_command(fake_distribution, monkeypatch):
    monkeypatch.setitem(sys.modules, "dm_control", None)  # makes `import dm_control` fail
    with pytest.raises(ImportError, match=r'pip install "dm_control>=1\.0\.16"') as info:
        import_optional("dm_control", fake_distribution, "dmc", "DMControlEnv")
    assert isinstance(info.value.__cause__, ImportError)


def test_import_optional_returns_the_module():
    assert import_optional("json", "fakepkg", "x", "y").__name__ == "json"

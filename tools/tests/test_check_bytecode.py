"""tools/check_bytecode.py finds modules that compile from source and passes valid bytecode."""

from __future__ import annotations

import os
import pathlib
import py_compile
import subprocess
import sys

import pytest
from check_bytecode import compiled_from_source


@pytest.fixture
def package(tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch) -> pathlib.Path:
    source = tmp_path / "site" / "probe_pkg"
    source.mkdir(parents=True)
    (source / "__init__.py").write_text("from . import leaf\n")
    (source / "leaf.py").write_text("VALUE = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "site"))
    return source


def _compile(package: pathlib.Path) -> None:
    for path in package.glob("*.py"):
        py_compile.compile(str(path), doraise=True)


def test_a_package_without_bytecode_is_reported(package):
    found = compiled_from_source(sys.executable, ["probe_pkg"], under=str(package))
    assert sorted(pathlib.Path(p).name for p in found) == ["__init__.py", "leaf.py"]


def test_stale_bytecode_is_reported(package):
    _compile(package)
    leaf = package / "leaf.py"
    stat = leaf.stat()
    leaf.write_text("VALUE = 22\n")  # another size: the .pyc no longer matches
    os.utime(leaf, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    found = compiled_from_source(sys.executable, ["probe_pkg"], under=str(package))
    assert [pathlib.Path(p).name for p in found] == ["leaf.py"]


def test_valid_bytecode_passes(package):
    _compile(package)
    assert compiled_from_source(sys.executable, ["probe_pkg"], under=str(package)) == []


def test_command_line_checks_the_venv_it_is_given(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "probe_mod.py").write_text("VALUE = 1\n")
    command = [sys.executable, str(TOOLS / "check_bytecode.py"), str(python), "probe_mod"]
    stale = subprocess.run(command, capture_output=True, text=True)
    assert stale.returncode == 1
    assert "probe_mod.py" in stale.stderr
    py_compile.compile(str(site / "probe_mod.py"), doraise=True)
    valid = subprocess.run(command, capture_output=True, text=True)
    assert valid.returncode == 0, valid.stderr


def test_by_default_only_the_heavy_modules_the_venv_has_are_checked(tmp_path):
    # a session testing rlworkers alone has torch but no tensordict: its check must not fail on
    # the import of a module it never installed, and must still check the ones it has
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    (site / "tensordict.py").write_text("VALUE = 1\n")  # a stand-in, no torch beside it
    command = [sys.executable, str(TOOLS / "check_bytecode.py"), str(venv / "bin" / "python")]
    stale = subprocess.run(command, capture_output=True, text=True)
    assert stale.returncode == 1, stale.stderr
    assert "importing tensordict " in stale.stderr and "tensordict.py" in stale.stderr


TOOLS = pathlib.Path(__file__).resolve().parent.parent

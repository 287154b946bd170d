"""The noxfile: every pytest run has a timeout, nothing a user relies on is left out of the
default run, and torch comes from the source the repository names."""

from __future__ import annotations

import ast
import importlib.util
import pathlib

import pytest
import torch_source

ROOT = pathlib.Path(__file__).resolve().parents[2]
NOXFILE = ROOT / "noxfile.py"


@pytest.fixture(scope="module")
def noxfile():
    spec = importlib.util.spec_from_file_location("rlstack_noxfile", NOXFILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_pytest_run_goes_through_the_helper_with_a_timeout(noxfile):
    assert any(arg.startswith("--timeout=") for arg in noxfile.PYTEST)
    assert {"-rs", "pytest_rlstack"} <= set(noxfile.PYTEST)
    tree = ast.parse(NOXFILE.read_text())
    helpers = {"_pytest"}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name not in helpers:
            for call in ast.walk(node):
                if isinstance(call, ast.Call):
                    literals = [a.value for a in call.args if isinstance(a, ast.Constant)]
                    assert "pytest" not in literals, f"{node.name} runs pytest directly"


def test_the_default_run_keeps_every_configuration(noxfile):
    default = set(noxfile.nox.options.sessions)
    packages = set(noxfile._local_packages())
    assert packages <= default, "every package alone"
    assert {
        "integration",
        "integration_fork",
        "tensordict_min",
        "docs",
        "build",
        "wheelhouse",
        "rlcollectors_ray",
        "bench_smoke",
        "lint",
    } <= default


def test_package_sessions_pin_no_tensordict_and_the_floor_is_declared(noxfile):
    floor = noxfile._declared_floor("tensordict")
    assert floor.count(".") >= 1


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    (tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl").touch()
    monkeypatch.setenv("RLSTACK_TORCH_FIND_LINKS", str(tmp_path))
    monkeypatch.delenv("RLSTACK_TORCH", raising=False)
    monkeypatch.setattr(torch_source, "pinned_version", lambda constraints=None: "2.13.0")
    return tmp_path


def test_cpu_torch_comes_from_a_local_wheel_directory_first(wheels):
    source = torch_source.torch_source((3, 11))
    assert source.install_args() == ["--find-links", str(wheels), "torch==2.13.0+cpu"]


def test_without_a_local_wheel_the_cpu_index_is_used(wheels, monkeypatch):
    monkeypatch.setattr(torch_source, "_index_reachable", lambda url: None)
    source = torch_source.torch_source((3, 12))  # no cp312 wheel in the directory
    assert source.install_args() == [
        "--index-url",
        torch_source.CPU_INDEX,
        "torch==2.13.0+cpu",
    ]


def test_no_cpu_torch_anywhere_is_an_error_not_a_cuda_download(wheels, monkeypatch):
    monkeypatch.setattr(torch_source, "_index_reachable", lambda url: "offline")
    with pytest.raises(RuntimeError, match=r"torch==2\.13\.0\+cpu.*RLSTACK_TORCH=cuda"):
        torch_source.torch_source((3, 12))


def test_the_cuda_switch_takes_pypis_build(wheels, monkeypatch):
    monkeypatch.setenv("RLSTACK_TORCH", "cuda")
    assert torch_source.torch_source((3, 11)).install_args() == ["torch==2.13.0"]


def test_an_unknown_switch_value_is_refused(monkeypatch):
    monkeypatch.setenv("RLSTACK_TORCH", "rocm")
    with pytest.raises(RuntimeError, match="RLSTACK_TORCH='rocm': expected one of cpu, cuda"):
        torch_source.chosen_flavour()


def test_the_version_comes_from_constraints_txt():
    text = (ROOT / "constraints.txt").read_text()
    assert f"torch=={torch_source.pinned_version()}" in text.replace(" ", "")

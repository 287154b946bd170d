"""tools/check_layers.py: undeclared packages, rlcore importing a transform, upward imports and
import circles are each reported; a clean layout passes; the repository itself passes."""

from __future__ import annotations

import pathlib
import textwrap

import check_layers
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _package(root: pathlib.Path, name: str, modules: dict, layers: list, deps=()) -> None:
    src = root / "packages" / name / "src" / name
    src.mkdir(parents=True)
    (src / "__init__.py").write_text("")
    for module, code in modules.items():
        (src / f"{module}.py").write_text(textwrap.dedent(code))
    layer_text = ",\n".join("    [" + ", ".join(f'"{m}"' for m in layer) + "]" for layer in layers)
    deps_text = ", ".join(f'"{d}>=0.1"' for d in deps)
    (root / "packages" / name / "pyproject.toml").write_text(
        f'[project]\nname = "{name}"\ndependencies = [{deps_text}]\n\n'
        f"[tool.rlstack]\nlayers = [\n{layer_text},\n]\n"
    )


def _problems(root: pathlib.Path) -> list[str]:
    dirs = sorted(p.parent for p in (root / "packages").glob("*/pyproject.toml"))
    ours = {d.name for d in dirs}
    return [p for d in dirs for p in check_layers.check_package(root, d, ours)]


@pytest.fixture
def repo(tmp_path):
    _package(tmp_path, "rlspecs", {"_a": "X = 1\n"}, [["_a"]])
    return tmp_path


def test_a_clean_layout_passes(repo):
    _package(
        repo,
        "rlcore",
        {"_low": "import rlspecs\n", "_high": "from ._low import X\n"},
        [["_low"], ["_high"]],
        deps=["rlspecs"],
    )
    assert _problems(repo) == []


def test_an_upward_import_is_reported(repo):
    _package(
        repo, "rlcore", {"_low": "from . import _high\n", "_high": "Y = 2\n"}, [["_low"], ["_high"]]
    )
    (problem,) = _problems(repo)
    assert "rlcore._low (layer 0) imports rlcore._high (layer 1), which is above it" in problem


def test_an_import_circle_is_reported_even_lazy_but_not_for_type_checking(repo):
    circle = {
        "_a": "def f():\n    from ._b import Y\n",
        "_b": "from ._a import f\nY = 1\n",
        "_c": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._d import Z\n",
        "_d": "from ._c import TYPE_CHECKING\nZ = 1\n",
    }
    _package(repo, "rlcore", circle, [["_a", "_b", "_c", "_d"]])
    assert _problems(repo) == ["rlcore: import circle between _a, _b"]


def test_rlcore_importing_a_transform_and_undeclared_packages_are_reported(repo):
    _package(repo, "rltransforms", {"_t": "X = 1\n"}, [["_t"]])
    _package(repo, "rlcore", {"_env": "def f():\n    import rltransforms\n"}, [["_env"]])
    problems = _problems(repo)
    assert any("rlcore imports rltransforms, which it does not declare" in p for p in problems)
    assert any("the env base finds packages built on it by name" in p for p in problems)


def test_every_module_must_be_in_a_layer(repo):
    _package(repo, "rlcore", {"_a": "", "_b": ""}, [["_a"]])
    assert _problems(repo) == ["rlcore: module '_b' is in no layer of [tool.rlstack] layers"]


def test_the_repository_passes():
    assert check_layers.main(["check_layers", str(ROOT)]) == 0

"""The fork pass (``nox -s integration_fork``) selects every test that takes the seed's
ParallelEnv fixture, in every integration file, and nothing else."""

from __future__ import annotations

import ast
import pathlib
import subprocess
import sys

from conftest import FORK_FIXTURE

HERE = pathlib.Path(__file__).parent


def _tests_taking_the_fixture() -> set[str]:
    """``file::name`` of every test function whose parameters name the fixture (AST scan)."""
    found = set()
    for path in sorted(HERE.glob("test_*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
                if FORK_FIXTURE in {arg.arg for arg in node.args.args}:
                    found.add(f"{path.name}::{node.name}")
    return found


def _selected(*options: str) -> set[str]:
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--collect-only",
            "-q",
            "-p",
            "no:cacheprovider",
            "--ignore",
            str(HERE / "downstream"),
            *options,
            str(HERE),
        ],
        capture_output=True,
        text=True,
        cwd=HERE,
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    selected = set()
    for line in run.stdout.splitlines():
        if "::" in line:
            path, _, rest = line.partition("::")
            name = rest.split("::")[-1].split("[")[0]
            selected.add(f"{pathlib.Path(path).name}::{name}")
    return selected


def test_fork_pass_takes_every_test_with_the_fixture_and_nothing_else():
    expected = _tests_taking_the_fixture()
    assert any(not name.startswith("test_env.py") for name in expected)  # not only the seed
    assert _selected("--mp_fork_if_no_cuda", "--only-fork-fixture") == expected

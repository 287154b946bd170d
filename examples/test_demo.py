"""Tests of the README's demo: its start method choice and its summary table.

python -m pytest -p no:cacheprovider -q examples
"""

from __future__ import annotations

import multiprocessing
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parent))

import demo  # noqa: E402


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        (["fork", "spawn", "forkserver"], "forkserver"),
        (["spawn", "fork", "forkserver"], "forkserver"),
        (["fork", "spawn"], "spawn"),  # never fork, even where it is the platform's default
        (["spawn"], "spawn"),
    ],
)
def test_fastest_safe_start_method(monkeypatch, offered, chosen):
    monkeypatch.setattr(multiprocessing, "get_all_start_methods", lambda: offered)
    assert demo.fastest_safe_start_method() == chosen


def _summary(capsys) -> dict[str, str]:
    out = capsys.readouterr().out
    cells = [line.strip("|").split("|") for line in out.splitlines() if line.startswith("| ")]
    return {key.strip(): value.strip() for key, value in cells}


@pytest.mark.timeout(600)
def test_summary_names_the_default_start_method(capsys):
    demo.main(["--workers", "2", "--steps", "3"])
    summary = _summary(capsys)
    assert summary["start method"] == f"{demo.fastest_safe_start_method()} (fastest safe here)"
    assert summary["workers"] == "2"
    assert summary["frames"] == "6"


@pytest.mark.timeout(600)
def test_summary_names_the_start_method_asked_for(capsys):
    demo.main(["--workers", "2", "--steps", "3", "--start-method", "spawn"])
    assert _summary(capsys)["start method"] == "spawn (--start-method)"


def test_bad_start_method_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        demo.main(["--start-method", "threads"])
    assert "--start-method" in capsys.readouterr().err

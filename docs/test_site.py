"""The site's layout: an API page per module, the mkdocs hooks (benchmark table, architecture)."""

from __future__ import annotations

import importlib.util
import pathlib

DOCS = pathlib.Path(__file__).parent
PERFORMANCE = DOCS / "pages" / "performance.md"
API_MODULES = [
    "rlspecs",
    "rlworkers",
    "rlcore",
    "rltransforms",
    "rlmocks",
    "rlmocks.testing",
    "rlbatched",
    "rllibs",
    "rlmodules",
    "rlcollectors",
]

# Loaded from its path: mkdocs loads it the same way, and it is no importable module.
_spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
hooks = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(hooks)


def test_benchmark_table_replaces_placeholder_when_results_exist(
    tmp_path, monkeypatch
):
    """With benchmarks/results/latest.md present, its text replaces the placeholder."""
    table = tmp_path / "latest.md"
    table.write_text("| case | ratio |\n|---|---|\n| rollout | 4.2 |\n")
    monkeypatch.setattr(hooks, "BENCHMARK_TABLE", table)
    out = hooks.on_page_markdown(
        PERFORMANCE.read_text(), page=None, config=None, files=None
    )
    assert "| rollout | 4.2 |" in out
    assert "benchmark-table:start" not in out
    assert "No figures are included" not in out


def test_benchmark_placeholder_stays_without_results(tmp_path, monkeypatch):
    """Without the results file, the page keeps its sentence on how to produce it."""
    monkeypatch.setattr(hooks, "BENCHMARK_TABLE", tmp_path / "missing.md")
    text = PERFORMANCE.read_text()
    assert hooks.on_page_markdown(text, page=None, config=None, files=None) == text
    assert "nox -s bench" in text


def test_architecture_page_is_the_lead_s_file():
    """The page added to the site is docs/architecture.md itself."""
    assert hooks.ARCHITECTURE.exists()
    assert hooks.ARCHITECTURE.parent == DOCS


def test_every_module_has_an_api_page_in_the_nav():
    """Each public module gets docs/pages/api/<module>.md rendering it, listed in mkdocs.yml."""
    config = (DOCS / "mkdocs.yml").read_text()
    for module in API_MODULES:
        page = DOCS / "pages" / "api" / f"{module}.md"
        assert f"::: {module}\n" in page.read_text(), page
        assert f"api/{module}.md" in config, module

"""mkdocs hooks: bring docs/architecture.md into the site and include the benchmark table.

docs/architecture.md sits beside mkdocs.yml, outside the pages folder, because other documents
link to it by that path; it is added to the site as ``architecture.md``. The performance page
holds a placeholder between two markers; when ``benchmarks/results/latest.md`` exists (written
by ``nox -s bench``), its content replaces the placeholder.
"""

from __future__ import annotations

import pathlib
import re

from mkdocs.structure.files import File

DOCS = pathlib.Path(__file__).parent
ARCHITECTURE = DOCS / "architecture.md"
BENCHMARK_TABLE = DOCS.parent / "benchmarks" / "results" / "latest.md"
BENCHMARK_MARKERS = re.compile(
    r"<!-- benchmark-table:start -->.*?<!-- benchmark-table:end -->", re.DOTALL
)


def on_files(files, config):
    """Add docs/architecture.md to the site as architecture.md."""
    files.append(
        File.generated(config, "architecture.md", abs_src_path=str(ARCHITECTURE))
    )
    return files


def on_page_markdown(markdown, page, config, files):
    """Replace the performance page's placeholder with benchmarks/results/latest.md if present."""
    if BENCHMARK_TABLE.exists() and BENCHMARK_MARKERS.search(markdown):
        table = BENCHMARK_TABLE.read_text()
        markdown = BENCHMARK_MARKERS.sub(lambda _: table, markdown)
    return markdown

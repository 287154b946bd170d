"""Every ```python block of the documentation runs, page by page.

Each page is one test: its blocks run in order in one namespace, so a later block can use what
an earlier one defined. Tracebacks point at the Markdown file and line. A page that needs an
optional library says so in an HTML comment, e.g. ``<!-- docs-test: requires gymnasium -->``,
and is skipped only when that library is missing. A single block can say the same on the line
just before its fence, ``<!-- docs-test: next block requires ale_py -->``: without the library,
that block does not run, the page's other blocks do, and the test then reports a skip.
"""

from __future__ import annotations

import gc
import pathlib
import re
import textwrap
from importlib.util import find_spec
from typing import NamedTuple

import pytest

PAGES_DIR = pathlib.Path(__file__).parent / "pages"
PAGES = sorted(PAGES_DIR.rglob("*.md"))
FENCE_OPEN = re.compile(r"^(?P<indent>\s*)```python\b")
REQUIRES = re.compile(
    r"<!--\s*docs-test:\s*requires\s+(?P<modules>[\w., ]+?)\s*-->"
)
BLOCK_REQUIRES = re.compile(
    r"^\s*<!--\s*docs-test:\s*next block requires\s+(?P<modules>[\w., ]+?)\s*-->\s*$"
)


class Block(NamedTuple):
    """A ```python block: its first code line (1-based), its code, the modules it needs."""

    line: int
    code: str
    requires: tuple[str, ...] = ()


def _modules(listing: str) -> tuple[str, ...]:
    return tuple(name.strip() for name in listing.split(",") if name.strip())


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text, dedented, in order."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = FENCE_OPEN.match(lines[i])
        if match is None:
            i += 1
            continue
        indent = match["indent"]
        start = i + 1
        end = start
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"unclosed ```python fence opened on line {i + 1}")
        code = "\n".join(line.removeprefix(indent) for line in lines[start:end])
        needs = BLOCK_REQUIRES.match(lines[i - 1]) if i > 0 else None
        requires = _modules(needs["modules"]) if needs else ()
        blocks.append(Block(start + 1, textwrap.dedent(code), requires))
        i = end + 1
    return blocks


def required_modules(text: str) -> list[str]:
    """Modules a whole page declares with ``<!-- docs-test: requires a, b -->``."""
    return [
        name
        for match in REQUIRES.finditer(text)
        for name in _modules(match["modules"])
    ]


def test_python_blocks_are_found():
    """The extractor sees fenced blocks, their line numbers and indented (admonition) blocks."""
    text = (
        "intro\n```python\nx = 1\n```\n!!! note\n    ```python\n    y = x + 1\n    ```\n"
        "<!-- docs-test: next block requires ale_py -->\n```python\nz = 2\n```\n"
    )
    assert python_blocks(text) == [
        Block(3, "x = 1"),
        Block(7, "y = x + 1"),
        Block(11, "z = 2", ("ale_py",)),
    ]
    assert required_modules(
        "<!-- docs-test: requires gymnasium, dm_control -->"
    ) == [
        "gymnasium",
        "dm_control",
    ]


@pytest.mark.parametrize(
    "page", PAGES, ids=lambda p: p.relative_to(PAGES_DIR).as_posix()
)
def test_page_examples_run(page: pathlib.Path):
    """The page's python blocks run in order in one namespace without raising."""
    text = page.read_text()
    for module in required_modules(text):
        pytest.importorskip(module)
    # A module name absent from sys.modules: classes defined on the page pickle by value
    # (cloudpickle), as they would from a user's script sent to spawned workers.
    namespace = {
        "__name__": f"docs_page_{page.stem.replace('-', '_').replace('.', '_')}"
    }
    skipped = []
    try:
        for block in python_blocks(text):
            missing = [name for name in block.requires if find_spec(name) is None]
            if missing:
                skipped.append(f"line {block.line} needs {', '.join(missing)}")
                continue
            exec(
                compile("\n" * (block.line - 1) + block.code, str(page), "exec"),
                namespace,
            )
    finally:
        # Drop the page's envs now rather than at interpreter exit, where simulators'
        # bindings report leaks.
        namespace.clear()
        gc.collect()
    if skipped:
        pytest.skip("the other blocks ran; not run: " + "; ".join(skipped))

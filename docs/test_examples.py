"""Every ```python block of the documentation runs, page by page.

Each page is one test: its blocks run in order in one namespace, so a later block can use what
an earlier one defined. Tracebacks point at the Markdown file and line. A page that needs an
optional library says so in an HTML comment, e.g. ``<!-- docs-test: requires gymnasium -->``,
and is skipped only when that library is missing. A single block can say the same on the line
just before its fence, ``<!-- docs-test: next block requires ale_py -->``: without the library,
that block does not run, the page's other blocks do, and the test then reports a skip.

The blocks run as a user's script does: ``__name__ == "__main__"``, so code under the
``if __name__ == "__main__":`` guard runs, and every reference to a class that starts worker
processes (``ParallelEnv``, the multi-process and Ray collectors) must sit under that guard, or
in a function it calls: spawn and forkserver re-import the script in each worker, where
unguarded code would start processes again.
"""

from __future__ import annotations

import ast
import gc
import pathlib
import pickle
import re
import textwrap
from importlib.util import find_spec
from typing import NamedTuple

import cloudpickle
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


# Names whose use starts worker processes that re-import the script under spawn/forkserver.
PROCESS_STARTERS = frozenset(
    {
        "ParallelEnv",
        "MultiSyncDataCollector",
        "MultiaSyncDataCollector",
        "RayCollector",
    }
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


def page_namespace() -> dict:
    """A fresh namespace for a page's blocks: a script run as ``python page.py``.

    Functions and classes defined there have ``__module__ == "__main__"``, which cloudpickle
    pickles by value (it never looks ``__main__`` objects up by name), as it does for those of
    a user's script: env factories and policies defined on a page reach spawned workers.
    """
    return {"__name__": "__main__"}


def _is_main_guard(node: ast.stmt) -> bool:
    """Whether ``node`` is ``if __name__ == "__main__":``."""
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    test = node.test
    return (
        isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and len(test.ops) == 1
        and isinstance(test.ops[0], ast.Eq)
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def _names_run(node: ast.AST):
    """Names read by ``node`` when it runs (the bodies of functions it defines excluded)."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
        yield node
    for child in ast.iter_child_nodes(node):
        yield from _names_run(child)


def unguarded_process_starts(blocks: list[Block]) -> list[str]:
    """Lines of a page's blocks that start processes outside ``if __name__ == "__main__":``.

    A top-level statement outside the guard may define functions that start processes, but
    neither use a `PROCESS_STARTERS` name nor call such a function (followed across blocks).
    """
    starters = set(PROCESS_STARTERS)
    found = []
    for block in blocks:
        for node in ast.parse(block.code).body:
            if _is_main_guard(node):
                continue
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(
                    isinstance(n, ast.Name) and n.id in starters
                    for n in ast.walk(node)
                ):
                    starters.add(node.name)
                continue
            found += [
                f"line {block.line + name.lineno - 1}: {name.id}"
                for name in _names_run(node)
                if name.id in starters
            ]
    return found


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


def test_unguarded_process_starts_are_found():
    """Starters used at the top level, directly or through a page function, are reported."""
    blocks = [
        Block(1, "from rlbatched import ParallelEnv\nenv = ParallelEnv(2, make)"),
        Block(5, "def rollout(cls):\n    return cls(2, make).rollout(3)"),
        Block(9, "x = 1\nrollout(ParallelEnv)"),
        Block(
            12,
            "def batched():\n    return ParallelEnv(2, make)\n\n\nenv = batched()",
        ),
        Block(
            20,
            'def main():\n    return batched()\n\n\nif __name__ == "__main__":\n'
            "    env = ParallelEnv(2, make)\n    main()",
        ),
    ]
    assert unguarded_process_starts(blocks) == [
        "line 2: ParallelEnv",
        "line 10: ParallelEnv",
        "line 16: batched",
    ]


def test_page_namespace_runs_guarded_code_and_pickles_by_value():
    """Guarded code runs; what a page defines pickles by value for spawned workers."""
    namespace = page_namespace()
    code = (
        "def docs_probe_factory():\n    return 41 + 1\n\n\n"
        "class DocsProbe:\n    value = 7\n\n\n"
        'if __name__ == "__main__":\n    guarded_ran = True\n'
    )
    exec(compile(code, "page.md", "exec"), namespace)
    assert namespace["guarded_ran"]
    # By reference, loading would look the names up in this process's __main__ (pytest's),
    # which has neither: loading them proves they travelled by value.
    factory = pickle.loads(cloudpickle.dumps(namespace["docs_probe_factory"]))
    assert factory() == 42
    assert pickle.loads(cloudpickle.dumps(namespace["DocsProbe"])).value == 7


@pytest.mark.parametrize(
    "page", PAGES, ids=lambda p: p.relative_to(PAGES_DIR).as_posix()
)
def test_process_starts_are_guarded(page: pathlib.Path):
    """Code that starts worker processes sits under ``if __name__ == "__main__":``."""
    assert unguarded_process_starts(python_blocks(page.read_text())) == []


@pytest.mark.parametrize(
    "page", PAGES, ids=lambda p: p.relative_to(PAGES_DIR).as_posix()
)
def test_page_examples_run(page: pathlib.Path):
    """The page's python blocks run in order in one namespace without raising."""
    text = page.read_text()
    for module in required_modules(text):
        pytest.importorskip(module)
    namespace = page_namespace()
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

#!/usr/bin/env python3
"""Fails when a package source file other than the boundary module uses a private API.

Private APIs of tensordict and torch are reached only through ``rlspecs.private_apis``, so
that a tensordict or torch release breaks one file, not ten. Usage: ``check_private_apis.py
[ROOT]`` (default: the repository root); exit status 1 lists each offending line.
"""

from __future__ import annotations

import pathlib
import re
import sys

BOUNDARY = pathlib.Path("packages/rlspecs/src/rlspecs/private_apis.py")
PRIVATE = re.compile(
    r"\._new_unsafe\b|\._tensordict\b|\._set_str\(|\._get_str\(|\._td_dim_names\b"
    r"|\._is_locked\b|torch\._foreach_|torch\._C\b|from tensordict\._|import tensordict\._"
)


def main(root: pathlib.Path) -> int:
    problems = []
    for path in sorted(root.glob("packages/*/src/**/*.py")):
        if path.relative_to(root) == BOUNDARY:
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if PRIVATE.search(line):
                problems.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    for problem in problems:
        print(problem)
    if problems:
        print(f"{len(problems)} private API use(s) outside {BOUNDARY}: route them through it.")
        return 1
    print(f"private APIs: only {BOUNDARY} uses them")
    return 0


if __name__ == "__main__":
    default = pathlib.Path(__file__).resolve().parent.parent
    sys.exit(main(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else default))

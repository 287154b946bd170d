"""Fail when a virtualenv's imports compile from source instead of loading valid bytecode.

A module whose ``.pyc`` is missing or stale is compiled at every import when bytecode is not
written (``PYTHONDONTWRITEBYTECODE=1``, set on our machines): torch and tensordict then take
three to four times as long to import, in every process and every spawned worker. The nox
sessions install with compiled bytecode; this check imports the heavy modules in the venv under
``python -v`` and lists each module of that venv that was compiled from its source.

    python tools/check_bytecode.py VENV_PYTHON [MODULE ...]   # default: torch, tensordict

Without modules named, it checks those of the default ones the venv has (a session that tests
``rlworkers`` alone installs torch but not tensordict); named modules must import.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import re
import subprocess
import sys

# `python -v` prints this line for a module it compiled from source ("...pyc" when it loaded
# bytecode); a stale or missing .pyc shows up here
FROM_SOURCE = re.compile(r"^# code object from '?(?P<path>[^']+\.py)'?$")
DEFAULT_MODULES = ("torch", "tensordict")


def compiled_from_source(python: str, modules: list[str], under: str | None = None) -> list[str]:
    """The source files ``python`` compiled to import ``modules`` (only those below ``under``).

    Examples:
        >>> compiled_from_source(sys.executable, ["json"], under="/nowhere")
        []
    """
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    code = "; ".join(f"import {name}" for name in modules) or "pass"
    run = subprocess.run(
        [python, "-v", "-c", code], capture_output=True, text=True, env=env, check=False
    )
    if run.returncode:
        raise RuntimeError(f"{python} could not import {modules}:\n{run.stderr[-2000:]}")
    paths = []
    for line in run.stderr.splitlines():
        match = FROM_SOURCE.match(line)
        if match and (under is None or match["path"].startswith(under)):
            paths.append(match["path"])
    return paths


def installed(python: str, modules: list[str]) -> list[str]:
    """Those of ``modules`` that ``python`` can import (found, not imported).

    Examples:
        >>> installed(sys.executable, ["json", "no_such_module_here"])
        ['json']
    """
    code = (
        "import importlib.util, sys; "
        "print(*(m for m in sys.argv[1:] if importlib.util.find_spec(m)))"
    )
    out = subprocess.run([python, "-c", code, *modules], capture_output=True, text=True, check=True)
    return out.stdout.split()


def venv_root(python: str) -> str:
    """The prefix of the environment ``python`` belongs to."""
    out = subprocess.run(
        [python, "-c", "import sys; print(sys.prefix)"], capture_output=True, text=True, check=True
    )
    return str(pathlib.Path(out.stdout.strip()).resolve())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("python", help="the venv's python executable")
    parser.add_argument("modules", nargs="*", help="default: those of torch, tensordict present")
    args = parser.parse_args(argv)
    args.modules = args.modules or installed(args.python, list(DEFAULT_MODULES))
    root = venv_root(args.python)
    paths = compiled_from_source(args.python, args.modules, under=root)
    if paths:
        print(
            f"check_bytecode: {len(paths)} module(s) of {root} compiled from source when "
            f"importing {', '.join(args.modules)} (missing or stale .pyc), e.g.:",
            *paths[:10],
            sep="\n  ",
            file=sys.stderr,
        )
        return 1
    print(f"check_bytecode: {', '.join(args.modules)} load from valid bytecode in {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

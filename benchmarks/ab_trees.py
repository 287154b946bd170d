"""Two source trees of our packages, side by side: a probe run alternately under each.

On a shared machine the speed of a whole process drifts by 10-60% between minutes, so one run
per tree says little. This runs a probe script (``general_path.py`` by default) under tree A,
then B, then A, ... for ``--rounds`` rounds, each in a fresh interpreter whose ``PYTHONPATH``
holds that tree's ``packages/*/src``, and reports each row's best (lowest) value per tree and
their ratio. A probe prints one ``<row name> <value>`` line per row (lower is better).

    git worktree add /tmp/before <commit>
    python benchmarks/ab_trees.py /tmp/before .                 # B / A per row
    python benchmarks/ab_trees.py /tmp/before . --rounds 8 --probe benchmarks/general_path.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

HERE = Path(__file__).resolve().parent


def tree_path(root: Path) -> str:
    """``PYTHONPATH`` for the tree at ``root``: every ``packages/*/src`` in it."""
    sources = sorted(str(src) for src in (root / "packages").glob("*/src") if src.is_dir())
    if not sources:
        raise SystemExit(f"ab_trees: no packages/*/src under {root}")
    return os.pathsep.join(sources)


def run_probe(probe: Path, root: Path) -> dict[str, float]:
    """One run of ``probe`` under the tree at ``root``: ``{row: value}``."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([tree_path(root), str(HERE)])}
    out = subprocess.run(
        [sys.executable, str(probe)], env=env, capture_output=True, text=True, check=True
    ).stdout
    rows = {}
    for line in out.splitlines():
        name, _, value = line.rpartition(" ")
        try:
            rows[name.strip()] = float(value)
        except ValueError:
            continue
    return rows


def best_of(runs: Sequence[dict[str, float]]) -> dict[str, float]:
    """Each row's lowest value over ``runs`` (rows in the order they were first printed).

    Examples:
        >>> best_of([{"a": 2.0, "b": 5.0}, {"a": 1.5, "b": 6.0}])
        {'a': 1.5, 'b': 5.0}
    """
    best: dict[str, float] = {}
    for run in runs:
        for name, value in run.items():
            best[name] = min(value, best.get(name, value))
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tree_a", type=Path, help="the first tree (e.g. before a change)")
    parser.add_argument("tree_b", type=Path, help="the second tree (e.g. HEAD)")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--probe", type=Path, default=HERE / "general_path.py")
    args = parser.parse_args()
    runs: dict[str, list[dict[str, float]]] = {"a": [], "b": []}
    for round_ in range(args.rounds):
        for name, root in (("a", args.tree_a), ("b", args.tree_b)):
            runs[name].append(run_probe(args.probe, root.resolve()))
        print(f"round {round_ + 1}/{args.rounds} done", file=sys.stderr, flush=True)
    a, b = best_of(runs["a"]), best_of(runs["b"])
    print(f"best of {args.rounds} alternating runs of {args.probe.name}")
    print(f"A = {args.tree_a}, B = {args.tree_b}")
    print("| row | A | B | B / A |")
    print("|---|---:|---:|---:|")
    for name, value in a.items():
        other = b.get(name)
        ratio = f"{other / value:.2f}" if other is not None and value else ""
        print(f"| {name} | {value:.1f} | {'' if other is None else f'{other:.1f}'} | {ratio} |")


if __name__ == "__main__":
    main()

"""Shared pieces of the benchmark runner: timing, result rows, machine info, RSS, report output.

Every case produces :class:`Row` objects: one measured quantity per stack (``ours``, ``torchrl``,
``gymnasium``, ``envpool``), the ratios of the other stacks to ours, and an optional target.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

STACKS = ("ours", "torchrl", "gymnasium", "envpool")
VERSIONED = ("torch", "tensordict", "gymnasium", "torchrl", "envpool", "numpy", "mujoco")
OURS = ("rlspecs", "rlcore", "rlbatched", "rllibs", "rlcollectors")


@dataclass
class Target:
    """A goal shown (never asserted) next to a row: ``check(values) -> bool``."""

    text: str
    check: Callable[[dict[str, float]], bool]


@dataclass
class Row:
    """One case: a value per stack (lower is better), in ``unit``; ratios are ``other / ours``."""

    case: str
    unit: str
    values: dict[str, float]
    notes: dict[str, str] = field(default_factory=dict)  # stack -> what ran (e.g. AsyncVectorEnv)
    target: Target | None = None
    ratios: bool = True

    def ratio(self, stack: str) -> float | None:
        """``values[stack] / values["ours"]``: above 1 means ours is faster (or smaller)."""
        if not self.ratios or stack == "ours" or stack not in self.values:
            return None
        ours = self.values.get("ours")
        return self.values[stack] / ours if ours else None

    def met(self) -> str:
        if self.target is None:
            return ""
        try:
            return "met" if self.target.check(self.values) else "**missed**"
        except KeyError:
            return "n/a"


def median_per_unit(
    runs: dict[str, Callable[[], object]],
    units: int,
    repeats: int,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Median seconds per unit of each run: one warm-up each, then ``repeats`` interleaved rounds.

    Interleaving spreads a change of machine load over every contender instead of one.
    ``clock``: wall time by default; ``time.thread_time`` counts only this thread's CPU time.
    """
    for run in runs.values():
        run()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = clock()
            run()
            samples[name].append((clock() - start) / units)
    return {name: statistics.median(s) for name, s in samples.items()}


@contextlib.contextmanager
def closing_all() -> Iterator[list]:
    """Collects objects with ``close()`` and closes every one on exit, errors included."""
    opened: list = []
    try:
        yield opened
    finally:
        for obj in reversed(opened):
            with contextlib.suppress(Exception):
                obj.close()


def rss_mib() -> float:
    """Resident set size of this process in MiB (Linux ``/proc``; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def machine_info() -> dict[str, str]:
    """CPU, cores, load, Python and the versions of every stack measured."""
    info = {
        "date (UTC)": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "CPU": _cpu_model(),
        "cores": str(os.cpu_count()),
        "load average (1 min) at start": f"{os.getloadavg()[0]:.2f}",
        "python": platform.python_version(),
    }
    for dist in (*VERSIONED, *OURS):
        info[dist] = _version(dist) or "not installed"
    return info


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return ""
    if unit == "s" or abs(value) < 10:
        return f"{value:.2f}"
    return f"{value:,.0f}"


def markdown(title: str, info: dict[str, str], rows: list[Row], extra: list[str]) -> str:
    """The report: machine info, the table, then ``extra`` sections (level-3 headings)."""
    present = [s for s in STACKS if any(s in r.values for r in rows)]
    others = [s for s in present if s != "ours"]
    lines = [f"**{title}**", ""]  # no heading: docs/hooks.py includes this file in a page
    lines += [f"- **{k}**: {v}" for k, v in info.items()]
    lines += [
        "",
        "Values are medians (lower is better). Ratios are *other / ours*: above 1 means ours is"
        " faster.",
        "",
    ]
    header = ["case", "unit", *present, *(f"{s} / ours" for s in others), "target", "status"]
    lines.append("| " + " | ".join(header) + " |")
    lines.append(
        "|" + "|".join(["---", "---"] + ["---:"] * (len(header) - 4) + ["---", "---"]) + "|"
    )
    for row in rows:
        cells = [row.case, row.unit]
        for s in present:
            note = f" ({row.notes[s]})" if s in row.notes and s in row.values else ""
            cells.append(_fmt(row.values.get(s), row.unit) + note)
        for s in others:
            r = row.ratio(s)
            cells.append(f"{r:.2f}×" if r is not None else "")
        cells += [row.target.text if row.target else "", row.met()]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *extra]
    return "\n".join(lines) + "\n"


def ratio_chart(rows: list[Row], path: str, title: str) -> bool:
    """A horizontal bar chart of every ``other / ours`` ratio (log scale); False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        import matplotlib.ticker
    except ImportError:
        return False
    colors = {"torchrl": "tab:red", "gymnasium": "tab:blue", "envpool": "tab:green"}
    labels, values, bar_colors = [], [], []
    for row in rows:
        for stack in STACKS[1:]:
            r = row.ratio(stack)
            if r is not None:
                labels.append(f"{row.case} — {stack}")
                values.append(r)
                bar_colors.append(colors[stack])
    if not values:
        return False
    fig, ax = plt.subplots(figsize=(10, 0.32 * len(values) + 1.5))
    y = range(len(values))[::-1]
    ax.barh(list(y), [v - 1 for v in values], left=1.0, color=bar_colors)  # bars grow from 1
    ax.set_yticks(list(y), labels, fontsize=8)
    ax.set_xscale("log")
    low, high = min(*values, 1.0) / 1.5, max(*values, 1.0) * 1.5
    ax.set_xlim(low, high)
    ticks = [t for t in (0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32) if low <= t <= high]
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.axvline(1.0, color="black", linewidth=1)
    ax.set_xlabel("other / ours (log scale; right of the line: ours is faster)")
    ax.set_title(title)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    ax.legend(handles, [f"{s} / ours" for s in colors], loc="best", fontsize=8)
    for yi, v in zip(y, values):
        ax.text(v, yi, f" {v:.2f}×", va="center", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True

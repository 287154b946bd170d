"""Main-process memory (RSS) over many ``ParallelEnv`` steps: rlbatched vs torchrl.

A 2-worker ``ParallelEnv`` of the trivial env runs ``step_and_maybe_reset`` in a loop; the RSS of
the main process is sampled every ``steps / 40`` steps. Growth is the median of the last quarter
of samples minus the median of the first quarter (the first 5% of steps are a warm-up).

    python benchmarks/bench_memory.py [--steps 100000]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics

import bench_batched
import torch
from _harness import Row, Target, closing_all, rss_mib

CASE = "5. main-process RSS growth, ParallelEnv(2, trivial)"
SAMPLES = 40
TARGET_MIB = 1.0


def track(env, steps: int) -> list[tuple[int, float]]:
    """``(step, RSS MiB)`` samples over ``steps`` steps, after a warm-up of ``steps // 20``."""
    td = env.reset()
    action = env.action_spec.zero()
    for _ in range(max(steps // 20, 1)):
        td.set("action", action)
        _, td = env.step_and_maybe_reset(td)
    every = max(steps // SAMPLES, 1)
    samples = []
    for i in range(steps):
        td.set("action", action)
        _, td = env.step_and_maybe_reset(td)
        if i % every == 0 or i == steps - 1:
            samples.append((i + 1, rss_mib()))
    return samples


def growth(samples: list[tuple[int, float]]) -> float:
    """Median RSS of the last quarter of samples minus that of the first quarter, in MiB."""
    quarter = max(len(samples) // 4, 1)
    first = statistics.median(r for _, r in samples[:quarter])
    last = statistics.median(r for _, r in samples[-quarter:])
    return last - first


def measure(quick: bool) -> tuple[list[Row], list[str]]:
    """The memory row and a Markdown section listing the samples."""
    from rlbatched import ParallelEnv

    steps = 2_000 if quick else 100_000
    makers = {"ours": lambda: ParallelEnv(2, bench_batched.ours_trivial, mp_start_method="fork")}
    if importlib.util.find_spec("torchrl") is not None:
        from torchrl.envs import ParallelEnv as TorchrlParallelEnv

        makers["torchrl"] = lambda: TorchrlParallelEnv(
            2, bench_batched.torchrl_trivial, mp_start_method="fork"
        )
    series = {}
    for name, make in makers.items():
        with closing_all() as opened:
            env = make()
            opened.append(env)
            series[name] = track(env, steps)
    values = {name: growth(s) for name, s in series.items()}
    target = Target(f"ours ≤ {TARGET_MIB:g} MiB", lambda v: v["ours"] <= TARGET_MIB)
    row = Row(CASE, f"MiB / {steps:,} steps", values, target=target, ratios=False)
    section = [f"### Memory samples (step: RSS MiB), {steps:,} steps", ""]
    for name, s in series.items():
        points = ", ".join(f"{step:,}: {rss:.1f}" for step, rss in s[:: max(len(s) // 10, 1)])
        section.append(f"- **{name}**: {points}; last {s[-1][1]:.1f}")
    return [row], [*section, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows, section = measure(args.quick)
    print("\n".join(section))
    for row in rows:
        print(row.case, {k: f"{v:+.2f} {row.unit}" for k, v in row.values.items()}, row.met())


if __name__ == "__main__":
    main()

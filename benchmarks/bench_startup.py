"""Spawn start-up of a 4-worker parallel Pendulum: construction + first reset, three stacks.

rlbatched ``ParallelEnv`` vs torchrl ``ParallelEnv`` vs gymnasium ``AsyncVectorEnv``, each with
``spawn`` workers; closing is not timed.

    python benchmarks/bench_startup.py [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import time
from collections.abc import Callable

import bench_batched
from _harness import Row

CASE = "6. spawn start-up, ParallelEnv(4, Pendulum)"
WORKERS = 4


def _ours():
    from rlbatched import ParallelEnv

    env = ParallelEnv(WORKERS, bench_batched.ours_pendulum, mp_start_method="spawn")
    env.reset()
    return env


def _torchrl():
    from torchrl.envs import ParallelEnv

    env = ParallelEnv(WORKERS, bench_batched.torchrl_pendulum, mp_start_method="spawn")
    env.reset()
    return env


def _gymnasium():
    import gymnasium as gym

    envs = gym.vector.AsyncVectorEnv([bench_batched.gym_pendulum] * WORKERS, context="spawn")
    envs.reset(seed=0)
    return envs


def _time_start(start: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    env = start()
    elapsed = time.perf_counter() - t0
    env.close()
    return elapsed


def rows(quick: bool) -> list[Row]:
    """The start-up row: median seconds over interleaved repetitions (1 in quick mode)."""
    starts = {"ours": _ours}
    if importlib.util.find_spec("torchrl") is not None:
        starts["torchrl"] = _torchrl
    starts["gymnasium"] = _gymnasium
    samples: dict[str, list[float]] = {name: [] for name in starts}
    for _ in range(1 if quick else 3):
        for name, start in starts.items():
            samples[name].append(_time_start(start))
    values = {name: statistics.median(s) for name, s in samples.items()}
    return [Row(CASE, "s", values, notes={"gymnasium": "AsyncVectorEnv"})]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    for row in rows(args.quick):
        print(row.case, {k: f"{v:.2f} s" for k, v in row.values.items()})


if __name__ == "__main__":
    main()

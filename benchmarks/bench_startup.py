"""Start-up of a 4-worker parallel Pendulum: construction + first reset, three stacks.

Two rows: every stack with ``spawn`` workers (rlbatched ``ParallelEnv`` vs torchrl
``ParallelEnv`` vs gymnasium ``AsyncVectorEnv``), and our ``ParallelEnv`` with ``forkserver``
workers (its fork server has torch and our packages preloaded) against the same spawn
``AsyncVectorEnv`` times (issue 17: ≤ ⅓). The forkserver times are those after the first: the
first start of a process also boots the fork server, and is measured on its own in a fresh
interpreter (shown in the ours cell). Closing is not timed.

    python benchmarks/bench_startup.py [--quick]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import multiprocessing
import pathlib
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import bench_batched
from _harness import Row, Target

CASE = "6. spawn start-up, ParallelEnv(4, Pendulum)"
FORKSERVER_CASE = "6. forkserver start-up (after the first), ParallelEnv(4, Pendulum)"
WORKERS = 4


def _ours(method: str = "spawn"):
    from rlbatched import ParallelEnv

    env = ParallelEnv(WORKERS, bench_batched.ours_pendulum, mp_start_method=method)
    env.reset()
    return env


_ours_forkserver = functools.partial(_ours, "forkserver")


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


def _first_forkserver_start() -> float:
    """Seconds of the first forkserver start of a fresh interpreter (fork server boot included)."""
    here = pathlib.Path(__file__).parent
    out = subprocess.run(
        [sys.executable, str(here / "bench_startup.py"), "--first-forkserver"],
        capture_output=True,
        text=True,
        check=True,
        cwd=here,
    )
    return float(out.stdout.split()[-1])


def rows(quick: bool) -> list[Row]:
    """The start-up rows: median seconds over interleaved repetitions (1 in quick mode)."""
    starts = {"ours": _ours}
    if importlib.util.find_spec("torchrl") is not None:
        starts["torchrl"] = _torchrl
    starts["gymnasium"] = _gymnasium
    forkserver = "forkserver" in multiprocessing.get_all_start_methods()
    if forkserver:
        first = _first_forkserver_start()
        _time_start(_ours_forkserver)  # this process' first: boots its fork server
        starts["ours forkserver"] = _ours_forkserver
    samples: dict[str, list[float]] = {name: [] for name in starts}
    for _ in range(1 if quick else 3):
        for name, start in starts.items():
            samples[name].append(_time_start(start))
    values = {name: statistics.median(s) for name, s in samples.items()}
    served = values.pop("ours forkserver", None)
    out = [Row(CASE, "s", values, notes={"gymnasium": "AsyncVectorEnv"})]
    if served is not None:
        target = Target(
            "ours ≤ ⅓ AsyncVectorEnv (spawn)", lambda v: 3 * v["ours"] <= v["gymnasium"]
        )
        notes = {"ours": f"first: {first:.2f}", "gymnasium": "AsyncVectorEnv, spawn"}
        both = {"ours": served, "gymnasium": values["gymnasium"]}
        out.append(Row(FORKSERVER_CASE, "s", both, notes=notes, target=target))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--first-forkserver",
        action="store_true",
        help="print the seconds of this interpreter's first forkserver start, and exit",
    )
    args = parser.parse_args()
    if args.first_forkserver:
        print(f"{_time_start(_ours_forkserver):.4f}")
        return
    for row in rows(args.quick):
        print(row.case, {k: f"{v:.2f} s" for k, v in row.values.items()}, row.met())


if __name__ == "__main__":
    main()

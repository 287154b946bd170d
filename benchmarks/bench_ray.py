"""RayCollector (2 actors) vs MultiSyncDataCollector (2 workers) on Pendulum: frames per second.

Both collect random-action ``GymEnv("Pendulum-v1")`` frames in 200-frame pieces: the
``MultiSyncDataCollector`` in 400-frame batches (200 per worker), the ``RayCollector`` in 200-frame
chunks from each of 2 actors (half a CPU each on a local ``ray.init(num_cpus=2)``), gathered
(``sync=True``, 400-frame batches) or first-ready (``sync=False``). The three stay alive side by
side and are timed in interleaved rounds (construction and a warm-up batch not timed); the
table shows µs per frame (medians), the section frames/s and the ratio to MultiSync. Then actor
0 of the async collector is killed (SIGKILL) and the time to the first chunk of its replacement
is measured. Needs ``rlcollectors[ray]`` and ``rllibs[gym]``; without them the row says so and
nothing runs.

    python benchmarks/bench_ray.py [--quick]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import multiprocessing
import os
import signal
import statistics
import time

from _harness import Row, Target, closing_all

CASE = "9. RayCollector(2 actors) vs MultiSync(2 workers), Pendulum"
CHUNK = 200
WORKERS = 2
TARGET = 0.8  # RayCollector frames/s ≥ 0.8 × MultiSyncDataCollector's
RECOVERY_S = 15.0
NEEDS = ("ray", "rlcollectors", "rllibs", "gymnasium")


class _Closing:
    """``close()`` for ``closing_all``: shuts a collector down."""

    def __init__(self, collector):
        self.collector = collector

    def close(self) -> None:
        self.collector.shutdown()


def _time_batches(batches, n: int) -> float:
    """Seconds per frame over ``n`` batches of an open iterator."""
    frames = 0
    start = time.perf_counter()
    for _ in range(n):
        frames += next(batches).numel()
    return (time.perf_counter() - start) / frames


def _recovery_s(collector, batches) -> float:
    """Seconds from SIGKILL of actor 0's process to the first chunk of its replacement."""
    import ray

    pid = ray.get(collector.remote_collectors()[0].info.remote())["pid"]
    os.kill(pid, signal.SIGKILL)
    killed = time.perf_counter()
    while True:
        batch = next(batches)
        if int(batch["collector", "actor"][0]) == 0 and int(batch["collector", "restart"][0]):
            return time.perf_counter() - killed


def _skipped(missing: list[str]) -> tuple[list[Row], list[str]]:
    why = f"skipped: {', '.join(missing)} not installed"
    return [Row(f"{CASE} ({why})", "µs/frame", {})], []


def measure(quick: bool) -> tuple[list[Row], list[str]]:
    """The rows (µs/frame, lower is better) and a section with frames/s and the ratios."""
    missing = [name for name in NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        return _skipped(missing)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from rlcollectors import MultiSyncDataCollector, RayCollector
    from rllibs import GymEnv

    batches, rounds = (2, 1) if quick else (25, 5)
    make_env = functools.partial(GymEnv, "Pendulum-v1")
    # workers start from forkserver's clean server (spawn where it is not offered), before Ray's
    # threads exist: forked from this process, after the earlier cases' thread pools and Ray's,
    # they aborted mid-collect (std::system_error in the child, both workers at once)
    start = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    samples: dict[str, list[float]] = {}
    with closing_all() as opened:
        multi = MultiSyncDataCollector(
            [make_env] * WORKERS, frames_per_batch=CHUNK * WORKERS, mp_start_method=start
        )
        opened.append(_Closing(multi))
        multi_batches = iter(multi)
        next(multi_batches)  # the workers start on the first batch, not at construction
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        opened.append(_Closing(ray))  # ray.shutdown(), after the collectors appended below
        contenders = {"MultiSync": multi}
        for sync in (True, False):
            collector = RayCollector(
                make_env,
                num_collectors=WORKERS,
                sync=sync,
                frames_per_batch=CHUNK * WORKERS if sync else CHUNK,
                remote_configs={"num_cpus": 0.5},
            )
            opened.append(_Closing(collector))
            contenders[f"Ray {'sync' if sync else 'async'}"] = collector
        iterators = {
            name: multi_batches if name == "MultiSync" else iter(collector)
            for name, collector in contenders.items()
        }
        for name, batches_of in iterators.items():
            next(batches_of)  # warm-up: first resets, first buffers
            samples[name] = []
        # async batches are half the size: twice as many of them for the same frames
        counts = {name: batches * (2 if name == "Ray async" else 1) for name in iterators}
        for _ in range(rounds):
            for name, batches_of in iterators.items():
                samples[name].append(_time_batches(batches_of, counts[name]))
        recovery = _recovery_s(contenders["Ray async"], iterators["Ray async"])
    us = {name: statistics.median(s) * 1e6 for name, s in samples.items()}
    multi_us = us["MultiSync"]
    target = Target(
        f"frames/s ≥ {TARGET} × MultiSync ({multi_us:.1f} µs/frame)",
        lambda v: v["ours"] <= multi_us / TARGET,
    )
    rows = [
        Row(
            f"9. MultiSyncDataCollector({WORKERS} workers), Pendulum",
            "µs/frame",
            {"ours": multi_us},
        ),
        Row(
            f"9. RayCollector({WORKERS} actors, sync), Pendulum",
            "µs/frame",
            {"ours": us["Ray sync"]},
            target=target,
        ),
        Row(
            f"9. RayCollector({WORKERS} actors, async), Pendulum",
            "µs/frame",
            {"ours": us["Ray async"]},
            target=target,
        ),
        Row(
            "9. RayCollector: SIGKILL of an actor → first chunk of its replacement",
            "s",
            {"ours": recovery},
            target=Target(f"< {RECOVERY_S:g} s", lambda v: v["ours"] < RECOVERY_S),
            ratios=False,
        ),
    ]
    section = [
        f"### {CASE}",
        "",
        "| collector | frames/s | × MultiSync |",
        "|---|---:|---:|",
        *(f"| {name} | {1e6 / v:,.0f} | {multi_us / v:.2f}× |" for name, v in us.items()),
        "",
        f"Recovery (SIGKILL of actor 0 → first chunk of its replacement, async): {recovery:.1f} s.",
        "",
    ]
    return rows, section


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rows, section = measure(args.quick)
    for row in rows:
        print(row.case, {k: f"{v:.1f} {row.unit}" for k, v in row.values.items()}, row.met())
    print("\n".join(section))


if __name__ == "__main__":
    main()

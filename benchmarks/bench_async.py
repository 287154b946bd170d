"""Asynchronous stepping: ``async_step_recv(k)`` vs the synchronous ``step``, uneven step times.

Issue 17's target: with sub-envs whose steps take uneven times, collecting the first ``k =
n / 2`` ready sub-envs and sending them their next action at once (``async_step_send`` /
``async_step_recv(min_get=k)``, EnvPool style) gives ≥ 1.3× the frames per second of the
synchronous ``step``, which waits for the slowest sub-env every time.

The env is :class:`SleepyEnv`, a mock whose step sleeps a random 0–2 ms (its own RNG, seeded
by ``set_seed``): it uses no CPU, so the figures show the waiting saved, not this machine's
cores. Both loops send one constant action tensor (the mock ignores it); the async loop
keeps every sub-env busy, resending each one as soon as it is received, and drains the
sub-envs still in flight at the end of each timed round (so no round starts with free
frames). Two ``ParallelEnv`` instances (fork, one process per sub-env), alive side by side,
timed in interleaved rounds; medians of µs per frame. The section also gives the ideal ratio
(no cost per call, simulated): what the sleeps alone allow, about 1.4× for k = n / 2.

    python benchmarks/bench_async.py [--quick]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable

import torch
from _harness import Row, Target, closing_all
from tensordict import TensorDict

import rlspecs
from rlcore import EnvBase

MAX_SLEEP_S = 2e-3
TARGET = 1.3  # async frames/s ≥ 1.3 × the synchronous step's
START_METHOD = "fork"


class SleepyEnv(EnvBase):
    """A mock whose step sleeps a random 0–``max_sleep_s`` seconds; it counts its steps.

    Observation: the step count since reset; reward 1; never done.

    Examples:
        >>> env = SleepyEnv(max_sleep_s=1e-4)
        >>> _ = env.set_seed(0)
        >>> env.rollout(3)["next", "observation"].flatten().tolist()
        [1.0, 2.0, 3.0]
    """

    def __init__(self, max_sleep_s: float = MAX_SLEEP_S) -> None:
        super().__init__()
        self.observation_spec = rlspecs.Composite(observation=rlspecs.Unbounded(shape=(1,)))
        self.action_spec = rlspecs.Unbounded(shape=(1,))
        self.reward_spec = rlspecs.Unbounded(shape=(1,))
        self.done_spec = rlspecs.Categorical(2, shape=(1,), dtype=torch.bool)
        self.__dict__["_max_sleep_s"] = max_sleep_s
        self.__dict__["_rng"] = random.Random(0)
        self.__dict__["_count"] = torch.zeros(1)
        self.__dict__["_false"] = torch.zeros(1, dtype=torch.bool)
        self.__dict__["_one"] = torch.ones(1)

    def _reset(self, tensordict):
        self._count.zero_()
        return TensorDict(
            {"observation": self._count.clone(), "done": self._false, "terminated": self._false}
        )

    def _step(self, tensordict):
        time.sleep(self._rng.uniform(0.0, self._max_sleep_s))
        self._count.add_(1)
        return TensorDict(
            {
                "observation": self._count.clone(),
                "reward": self._one,
                "done": self._false,
                "terminated": self._false,
            }
        )

    def _set_seed(self, seed):
        self._rng.seed(seed)
        return seed


def _sync_run(env, frames: int) -> Callable[[], int]:
    """``env.step`` with one constant action until ``frames`` frames: returns the frames."""
    n = env.batch_size[0]
    action = TensorDict({"action": torch.zeros(n, 1)}, [n])

    def run() -> int:
        done = 0
        while done < frames:
            env.step(action)
            done += n
        return done

    return run


def _async_run(env, frames: int, k: int) -> Callable[[], int]:
    """Send all, then ``recv(min_get=k)`` and resend those, until ``frames``; then drain."""
    n = env.batch_size[0]
    actions = torch.zeros(n, 1)
    every = torch.arange(n)

    def send(index: torch.Tensor) -> None:
        m = index.numel()
        env.async_step_send(TensorDict({"action": actions[:m], "env_index": index}, [m]))

    def run() -> int:
        send(every)
        done = 0
        while done < frames:
            out = env.async_step_recv(min_get=k)
            index = out.get("env_index")
            done += index.numel()
            send(index)
        in_flight = n
        while in_flight:
            got = env.async_step_recv(min_get=in_flight).batch_size[0]
            in_flight -= got
            done += got
        return done

    return run


def ideal_speedup(n: int, k: int, frames: int = 20000) -> float:
    """Async / sync frames per second with free calls: the sleeps alone, simulated (seeded).

    Examples:
        >>> round(ideal_speedup(4, 4), 2)  # waiting for all is the synchronous step
        1.0
    """
    rng = random.Random(0)
    sync = sum(max(rng.uniform(0.0, 1.0) for _ in range(n)) for _ in range(frames // n))
    sync_per_frame = sync / (frames // n * n)
    finish, now, got = sorted(rng.uniform(0.0, 1.0) for _ in range(n)), 0.0, 0
    while got < frames:
        now = max(now, finish[k - 1])
        ready = sum(1 for f in finish if f <= now)
        got += ready
        finish = sorted(finish[ready:] + [now + rng.uniform(0.0, 1.0) for _ in range(ready)])
    return sync_per_frame / (now / got)


def _race(runs: dict[str, Callable[[], int]], repeats: int) -> dict[str, float]:
    """Median seconds per frame of each run: a warm-up each, then interleaved rounds."""
    for run in runs.values():
        run()
    samples: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            frames = run()
            samples[name].append((time.perf_counter() - start) / frames)
    return {name: statistics.median(s) for name, s in samples.items()}


def measure(quick: bool) -> tuple[list[Row], list[str]]:
    """Case ``a``: one row per sub-env count, async ``recv(n / 2)`` vs synchronous step."""
    from rlbatched import ParallelEnv

    frames, repeats = (64, 2) if quick else (2000, 5)
    sizes = (4,) if quick else (4, 8)
    rows, lines = [], []
    lines += [
        "### Asynchronous stepping (case a)",
        "",
        f"`SleepyEnv` (each step sleeps a random 0–{MAX_SLEEP_S * 1e3:g} ms), `ParallelEnv`"
        f" under {START_METHOD}, one process per sub-env: frames per second of the"
        " synchronous `step` and of `async_step_send` / `async_step_recv(min_get=k)`.",
        "",
        "| sub-envs | k | sync frames/s | async frames/s | async / sync | ideal (free calls) |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for n in sizes:
        k = n // 2
        with closing_all() as opened:
            runs = {}
            for name in ("sync", "async"):
                env = ParallelEnv(n, SleepyEnv, mp_start_method=START_METHOD)
                opened.append(env)
                env.set_seed(0)
                env.reset()
                runs[name] = (
                    _sync_run(env, frames) if name == "sync" else _async_run(env, frames, k)
                )
            per_frame = {name: s * 1e6 for name, s in _race(runs, repeats).items()}
        sync, ours = per_frame["sync"], per_frame["async"]
        speedup = sync / ours
        target = Target(
            f"async frames/s ≥ {TARGET:g} × sync step",
            lambda v, sync=sync: sync >= TARGET * v["ours"],
        )
        notes = {"ours": f"async recv({k}); sync step {sync:,.0f} µs/frame: {speedup:.2f}×"}
        case = f"a. ParallelEnv({n}, SleepyEnv 0–2 ms) async recv({k}) vs sync step"
        rows.append(Row(case, "µs/frame", {"ours": ours}, notes=notes, target=target))
        ideal = ideal_speedup(n, k)
        lines.append(
            f"| {n} | {k} | {1e6 / sync:,.0f} | {1e6 / ours:,.0f} | {speedup:.2f}× | {ideal:.2f}× |"
        )
    return rows, [*lines, ""]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows, lines = measure(args.quick)
    print("\n".join(lines))
    for row in rows:
        print(row.case, f"{row.values['ours']:.0f} µs/frame", row.met())


if __name__ == "__main__":
    main()

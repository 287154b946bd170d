"""Per-step cost of a Gymnasium rollout: raw gymnasium loop vs rllibs.GymEnv vs torchrl's GymEnv.

Each contender runs ``--steps`` random-action steps of the same env (episodes restarted on done),
``--repeats`` times, interleaved; the median per-step time of each is printed with its ratio to
the raw loop. torchrl is measured only when it is importable.

    python benchmarks/bench_gym.py [--env Pendulum-v1] [--steps 1000] [--repeats 7]

Ratios, not absolute times, are what compare across machines.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable


def raw_loop(env_name: str, steps: int) -> Callable[[], None]:
    """The plain gymnasium loop: sample an action, step, reset on done."""
    import gymnasium as gym

    env = gym.make(env_name)
    env.reset(seed=0)
    env.action_space.seed(0)

    def run() -> None:
        step, sample, reset = env.step, env.action_space.sample, env.reset
        for _ in range(steps):
            _, _, terminated, truncated, _ = step(sample())
            if terminated or truncated:
                reset()

    return run


def ours(env_name: str, steps: int) -> Callable[[], None]:
    """rllibs.GymEnv(...).rollout(steps, break_when_any_done=False)."""
    from rllibs import GymEnv

    env = GymEnv(env_name)
    env.set_seed(0)

    def run() -> None:
        env.rollout(steps, break_when_any_done=False)

    return run


def torchrl_env(env_name: str, steps: int) -> Callable[[], None] | None:
    """torchrl.envs.GymEnv(...).rollout(steps, break_when_any_done=False), if torchrl is installed."""
    try:
        from torchrl.envs.libs.gym import GymEnv
    except ImportError:
        return None
    env = GymEnv(env_name)
    env.set_seed(0)

    def run() -> None:
        env.rollout(steps, break_when_any_done=False)

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="Pendulum-v1")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")

    contenders = {
        "gymnasium (raw loop)": raw_loop(args.env, args.steps),
        "rllibs.GymEnv": ours(args.env, args.steps),
    }
    torchrl_run = torchrl_env(args.env, args.steps)
    if torchrl_run is not None:
        contenders["torchrl GymEnv"] = torchrl_run

    times: dict[str, list[float]] = {name: [] for name in contenders}
    for run in contenders.values():
        run()  # warm-up: first-step checks, allocations, imports
    for _ in range(args.repeats):
        for name, run in contenders.items():
            start = time.perf_counter()
            run()
            times[name].append((time.perf_counter() - start) / args.steps)

    raw = statistics.median(times["gymnasium (raw loop)"])
    print(f"{args.env}: {args.steps} steps x {args.repeats} repeats (median per step)")
    for name, samples in times.items():
        per_step = statistics.median(samples)
        print(f"  {name:22s} {per_step * 1e6:8.1f} us/step   {per_step / raw:5.2f}x raw")
    if torchrl_run is None:
        print("  (torchrl not installed: not compared)")


if __name__ == "__main__":
    main()

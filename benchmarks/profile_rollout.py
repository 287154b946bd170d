"""Where a GymEnv rollout step goes: per-stage microseconds, next to the raw gymnasium loop.

The rollout loop is replayed with public calls (``rand_action``, ``step``, ``StepMDP``,
``maybe_reset``) and a perf counter around each stage; ``rollout`` itself and the raw loop are
timed alongside, so that the stages can be read against both.

    python benchmarks/profile_rollout.py [--env CartPole-v1] [--steps 1000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings

import bench_gym
import torch

STAGES = ("random action", "env.step", "step_mdp", "done check + auto-reset")


def staged_loop(env, steps: int) -> dict[str, float]:
    """One replay of ``rollout(steps, break_when_any_done=False)``: µs per step of each stage."""
    from rlcore import StepMDP

    step_mdp = StepMDP(env)
    clock = time.perf_counter_ns
    spent = dict.fromkeys(STAGES, 0)
    td = env.reset()
    for _ in range(steps):
        t0 = clock()
        td = env.rand_action(td)
        t1 = clock()
        td = env.step(td)
        t2 = clock()
        root = step_mdp(td)
        t3 = clock()
        td = env.maybe_reset(root)
        t4 = clock()
        for stage, start, end in zip(STAGES, (t0, t1, t2, t3), (t1, t2, t3, t4)):
            spent[stage] += end - start
    return {stage: ns / steps / 1e3 for stage, ns in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="CartPole-v1")
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    from rllibs import GymEnv

    env = GymEnv(args.env)
    env.set_seed(0)
    rollout = bench_gym.ours(args.env, args.steps)
    raw = bench_gym.raw_loop(args.env, args.steps)
    staged_loop(env, args.steps)  # warm-up
    stages: dict[str, list[float]] = {stage: [] for stage in STAGES}
    totals: dict[str, list[float]] = {"rollout": [], "raw gymnasium loop": []}
    for _ in range(args.repeats):
        for stage, value in staged_loop(env, args.steps).items():
            stages[stage].append(value)
        for name, run in (("rollout", rollout), ("raw gymnasium loop", raw)):
            start = time.perf_counter()
            run()
            totals[name].append((time.perf_counter() - start) / args.steps * 1e6)
    print(f"{args.env}: {args.steps} steps x {args.repeats} repeats, medians in µs per step")
    for stage in STAGES:
        print(f"  {stage:28s} {statistics.median(stages[stage]):7.1f}")
    staged = sum(statistics.median(values) for values in stages.values())
    print(f"  {'(sum of the stages)':28s} {staged:7.1f}")
    for name, values in totals.items():
        print(f"  {name:28s} {statistics.median(values):7.1f}")
    env.close()


if __name__ == "__main__":
    main()

"""Per-step cost of a Gymnasium rollout: raw gymnasium loop vs rllibs.GymEnv vs torchrl's GymEnv.

Each contender runs ``--steps`` steps of the same env (episodes restarted on done), ``--repeats``
times, interleaved; the median per-step time of each is printed with its ratio to the raw loop.
Two kinds of actions: random ones (each stack draws its own: the raw loop from the action space,
the env wrappers from their specs) and a constant action (the user's policy chooses it: here a
function writing one fixed tensor; the raw loop passes the same action), which isolates the
wrapper's own cost. torchrl is measured only when it is importable.

    python benchmarks/bench_gym.py [--env Pendulum-v1] [--steps 1000] [--repeats 7]

Ratios, not absolute times, are what compare across machines.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch


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


def constant_actions(env_name: str) -> tuple[Any, torch.Tensor]:
    """The same action for the raw loop (gymnasium's format) and for a policy (our spec's)."""
    if env_name.startswith("CartPole"):
        return 1, torch.tensor([0, 1])  # push right; a one-hot action for GymEnv
    return np.array([0.5], dtype=np.float32), torch.tensor([0.5])


def raw_loop_constant(env_name: str, steps: int) -> Callable[[], None]:
    """The plain gymnasium loop with one constant action: step, reset on done."""
    import gymnasium as gym

    env = gym.make(env_name)
    env.reset(seed=0)
    action, _ = constant_actions(env_name)

    def run() -> None:
        step, reset = env.step, env.reset
        for _ in range(steps):
            _, _, terminated, truncated, _ = step(action)
            if terminated or truncated:
                reset()

    return run


def constant_policy(action: torch.Tensor) -> Callable:
    """A policy writing one fixed action: what a user's ``td.set("action", ...)`` costs."""

    def policy(tensordict):
        return tensordict.set("action", action)

    return policy


def _constant_rollout(env: Any, env_name: str, steps: int) -> Callable[[], None]:
    env.set_seed(0)
    policy = constant_policy(constant_actions(env_name)[1])

    def run() -> None:
        env.rollout(steps, policy, break_when_any_done=False)

    return run


def ours_constant(env_name: str, steps: int) -> Callable[[], None]:
    """rllibs.GymEnv(...).rollout(steps, constant policy, break_when_any_done=False)."""
    from rllibs import GymEnv

    return _constant_rollout(GymEnv(env_name), env_name, steps)


def torchrl_constant(env_name: str, steps: int) -> Callable[[], None] | None:
    """torchrl's GymEnv with the same constant policy, if torchrl is installed."""
    try:
        from torchrl.envs.libs.gym import GymEnv
    except ImportError:
        return None
    return _constant_rollout(GymEnv(env_name), env_name, steps)


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
        "gymnasium, constant": raw_loop_constant(args.env, args.steps),
        "rllibs, constant": ours_constant(args.env, args.steps),
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

    print(f"{args.env}: {args.steps} steps x {args.repeats} repeats (median per step)")
    for name, samples in times.items():
        raw_name = "gymnasium, constant" if "constant" in name else "gymnasium (raw loop)"
        raw = statistics.median(times[raw_name])
        per_step = statistics.median(samples)
        print(f"  {name:22s} {per_step * 1e6:8.1f} us/step   {per_step / raw:5.2f}x raw")
    if torchrl_run is None:
        print("  (torchrl not installed: not compared)")


if __name__ == "__main__":
    main()

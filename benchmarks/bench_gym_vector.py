"""Vector envs: GymEnv(num_envs=4) vs a raw gymnasium.make_vec loop, MultiThreadedEnv vs raw EnvPool.

Every contender steps four Pendulum-v1 sub-envs with one constant action (the user's policy
chooses it: here a function writing a fixed tensor; the raw loops pass the same array), episodes
restarted as each library does it (gymnasium's and EnvPool's own autoreset in the raw loops,
``rollout``'s partial resets for ours). Medians of interleaved repetitions, in µs per batched
step (4 env steps). EnvPool rows only where envpool is installed; beside the raw EnvPool loop,
the same loop with 10 µs of busy Python work between steps shows how EnvPool's threads react
to any per-step work on this machine (a second row, measured in the same rounds).

    python benchmarks/bench_gym_vector.py [--steps 2000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from _harness import Row, Target, closing_all, median_per_unit

ENV = "Pendulum-v1"
NUM_ENVS = 4
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None
GAP_US = 10.0


def _action() -> tuple[np.ndarray, torch.Tensor]:
    return np.full((NUM_ENVS, 1), 0.5, dtype=np.float32), torch.full((NUM_ENVS, 1), 0.5)


def _policy(action: torch.Tensor) -> Callable:
    def policy(tensordict):
        return tensordict.set("action", action)

    return policy


def _raw_loop(envs: Any, steps: int, opened: list) -> Callable[[], None]:
    opened.append(envs)
    action, _ = _action()

    def run() -> None:
        step = envs.step
        for _ in range(steps):
            step(action)

    return run


def _raw_loop_with_gap(envs: Any, steps: int, gap_us: float) -> Callable[[], None]:
    """The raw loop, plus ``gap_us`` of busy Python work between steps (a wrapper's share)."""
    action, _ = _action()

    def run() -> None:
        step, clock = envs.step, time.perf_counter_ns
        for _ in range(steps):
            step(action)
            end = clock() + gap_us * 1000
            while clock() < end:
                pass

    return run


def _rollout(env: Any, steps: int, opened: list) -> Callable[[], None]:
    opened.append(env)
    env.set_seed(0)
    policy = _policy(_action()[1])
    return lambda: env.rollout(steps, policy, break_when_any_done=False)


def raw_gymnasium(steps: int, opened: list) -> Callable[[], None]:
    """``gymnasium.make_vec(ENV, 4)`` (SyncVectorEnv) stepped with a constant action."""
    import gymnasium as gym

    envs = gym.make_vec(ENV, NUM_ENVS)
    envs.reset(seed=0)
    return _raw_loop(envs, steps, opened)


def ours_gymnasium(steps: int, opened: list) -> Callable[[], None]:
    """``GymEnv(ENV, num_envs=4).rollout(steps, constant policy, break_when_any_done=False)``."""
    from rllibs import GymEnv

    return _rollout(GymEnv(ENV, num_envs=NUM_ENVS), steps, opened)


def raw_envpool(steps: int, opened: list) -> Callable[[], None]:
    """``envpool.make_gymnasium(ENV, num_envs=4)`` stepped with a constant action."""
    import envpool

    envs = envpool.make_gymnasium(ENV, num_envs=NUM_ENVS, seed=0)
    envs.reset()
    return _raw_loop(envs, steps, opened)


def raw_envpool_gap(steps: int, opened: list) -> Callable[[], None]:
    """The raw EnvPool loop with 10 µs of busy Python work between steps.

    EnvPool's worker threads wait for the next action; on a machine with few cores, any work
    done between two steps (a policy, a wrapper) makes the next step slower, not only longer.
    This column shows what a wrapper costing 10 µs per step may hope for.
    """
    import envpool

    envs = envpool.make_gymnasium(ENV, num_envs=NUM_ENVS, seed=0)
    opened.append(envs)
    envs.reset()
    return _raw_loop_with_gap(envs, steps, GAP_US)


def ours_envpool(steps: int, opened: list) -> Callable[[], None]:
    """``MultiThreadedEnv(4, ENV).rollout(steps, constant policy, break_when_any_done=False)``."""
    from rllibs import MultiThreadedEnv

    return _rollout(MultiThreadedEnv(NUM_ENVS, ENV), steps, opened)


def rows(quick: bool) -> list[Row]:
    """(8) The two vector-env rows, each side by side with its raw library loop."""
    steps, repeats = (50, 3) if quick else (2000, 9)
    cases = [
        (
            f"8. GymEnv({ENV}, num_envs={NUM_ENVS}) rollout",
            {"ours": ours_gymnasium, "gymnasium": raw_gymnasium},
            "gymnasium",
            "make_vec loop (SyncVectorEnv)",
        )
    ]
    if HAS_ENVPOOL:
        cases.append(
            (
                f"8. MultiThreadedEnv({NUM_ENVS}, {ENV}) rollout",
                {"ours": ours_envpool, "envpool": raw_envpool, "envpool+gap": raw_envpool_gap},
                "envpool",
                "raw loop",
            )
        )
    out = []
    for case, makers, raw, note in cases:
        with closing_all() as opened:
            runs = {name: make(steps, opened) for name, make in makers.items()}
            values = {k: v * 1e6 for k, v in median_per_unit(runs, steps, repeats).items()}
        gap = values.pop("envpool+gap", None)
        target = Target(f"ours ≤ 1.5 × {raw}", lambda v, raw=raw: v["ours"] <= 1.5 * v[raw])
        out.append(Row(case, "µs/batched step", values, notes={raw: note}, target=target))
        if gap is not None:  # measured in the same interleaved rounds
            notes = {raw: f"raw loop + {GAP_US:g} µs of Python per step"}
            gap_case = f"{case}, vs a raw loop busy {GAP_US:g} µs per step"
            out.append(Row(gap_case, "µs/batched step", {"ours": values["ours"], raw: gap}, notes))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    for row in rows(args.quick):
        raw = next(name for name in row.values if name != "ours")
        ratio = row.values["ours"] / row.values[raw]
        cells = "   ".join(f"{k} {v:7.1f}" for k, v in row.values.items())
        print(f"{row.case}: {cells} µs/batched step   ours/{raw} {ratio:4.2f} {row.met()}")


if __name__ == "__main__":
    main()

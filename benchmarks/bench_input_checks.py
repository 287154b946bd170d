"""(b) What the step contract's input checks cost per step: µs per ``InputRules.check``.

Every ``EnvBase.step`` checks its input against rules compiled once per env layout
(``rlcore.step_inputs``): each action and state leaf is there, has its spec's shape and a dtype
its spec can hold. Measured on the rules and inputs that real envs step with (issue 26's target:
at most 1.5 µs per step).

    python benchmarks/bench_input_checks.py
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from _harness import Row, Target, median_per_unit

TARGET_US = 1.5


def _gym(name: str) -> Callable[[], object]:
    from rllibs import GymEnv

    return lambda: GymEnv(name)


def _counting(batch: tuple) -> Callable[[], object]:
    from rlmocks import CountingEnv

    return lambda: CountingEnv(batch_size=batch)


def _nested() -> Callable[[], object]:
    from rlmocks import NestedCountingEnv

    return lambda: NestedCountingEnv(nest_obs_action=True, batch_size=(2,), nested_dim=3)


CASES = {
    "Pendulum-v1 (float action (1,))": _gym("Pendulum-v1"),
    "CartPole-v1 (integer action)": _gym("CartPole-v1"),
    "CountingEnv, batch (64,)": lambda: _counting((64,))(),
    "NestedCountingEnv (nested action)": lambda: _nested()(),
}


def rows(quick: bool) -> list[Row]:
    """One row per env: µs per check of a valid step input (and per ``step`` beside it)."""
    calls, repeats = (200, 3) if quick else (20000, 7)
    out = []
    for label, make in CASES.items():
        env = make()
        td = env.rand_action(env.reset())
        rules = env._step_inputs  # the compiled rules EnvBase.step checks with
        runs = {"check": functools.partial(_repeat, rules.check, td, calls)}
        values = {k: v * 1e6 for k, v in median_per_unit(runs, calls, repeats).items()}
        env.close()
        out.append(
            Row(
                f"b. step input checks, {label}",
                "µs/check",
                {"ours": values["check"]},
                target=Target(f"≤ {TARGET_US} µs", lambda v: v["ours"] <= TARGET_US),
                ratios=False,
            )
        )
    return out


def _repeat(check: Callable, td: object, calls: int) -> None:
    for _ in range(calls):
        check(td)


if __name__ == "__main__":
    torch.set_num_threads(1)
    for row in rows(quick=False):
        print(f"{row.case}: {row.values['ours']:.2f} {row.unit}")

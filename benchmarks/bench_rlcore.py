"""Per-step cost of ``rlcore`` rollouts on a trivial counting env, side by side with torchrl.

Runs the same counting env (batch ``()`` and ``(64,)``) for 2,000 steps through ``rollout``
(random actions from the action spec) and through a hand loop of ``step`` + ``step_mdp``, and
prints microseconds per step. When torchrl is importable, the same env written against torchrl
runs in the same process and the ratio torchrl / rlcore is printed.

Usage::

    python benchmarks/bench_rlcore.py [--steps 2000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDict

BATCH_SIZES = ((), (64,))


def make_counting_env(base: type, specs: Any) -> Callable[..., Any]:
    """Builds the counting env class on ``base`` (an EnvBase) with the spec classes ``specs``."""

    class CountingEnv(base):
        """Counts the actions taken; done when the count reaches ``max_steps``."""

        def __init__(self, max_steps: int = 10**9, batch_size: tuple[int, ...] = ()) -> None:
            super().__init__(batch_size=torch.Size(batch_size))
            shape = (*batch_size, 1)
            self.observation_spec = specs.Composite(
                observation=specs.Unbounded(shape=shape, dtype=torch.int64), shape=batch_size
            )
            self.action_spec = specs.Categorical(2, shape=shape, dtype=torch.int64)
            self.reward_spec = specs.Unbounded(shape=shape)
            self.done_spec = specs.Categorical(2, shape=shape, dtype=torch.bool)
            self.__dict__["count"] = torch.zeros(shape, dtype=torch.int64)
            self.__dict__["reward"] = torch.ones(shape)
            self.__dict__["limit"] = max_steps

        def _reset(self, tensordict):
            self.count.zero_()
            done = self.count >= self.limit
            return TensorDict(
                {"observation": self.count.clone(), "done": done, "terminated": done.clone()},
                self.batch_size,
            )

        def _step(self, tensordict):
            self.count.add_(tensordict.get("action"))
            done = self.count >= self.limit
            return TensorDict(
                {
                    "observation": self.count.clone(),
                    "reward": self.reward,
                    "done": done,
                    "terminated": done.clone(),
                },
                self.batch_size,
            )

        def _set_seed(self, seed):
            return seed

    return CountingEnv


def _best(run: Callable[[], Any], steps: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return best / steps * 1e6


def measure(env_cls: Callable[..., Any], step_mdp: Callable, batch_size, steps, repeats):
    """Returns (rollout µs/step, hand-loop µs/step)."""
    env = env_cls(batch_size=batch_size)
    action = torch.ones((*batch_size, 1), dtype=torch.int64)

    def rollout() -> None:
        out = env.rollout(steps)
        assert out.batch_size[-1] == steps

    def hand_loop() -> None:
        td = env.reset()
        for _ in range(steps):
            td.set("action", action)
            td = step_mdp(env.step(td))

    rollout()  # warm-up: caches, allocator
    return _best(rollout, steps, repeats), _best(hand_loop, steps, repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)

    import rlcore
    import rlspecs

    ours = make_counting_env(rlcore.EnvBase, rlspecs)
    theirs = None
    if importlib.util.find_spec("torchrl") is not None:
        import torchrl.data
        import torchrl.envs

        theirs = make_counting_env(torchrl.envs.EnvBase, torchrl.data)
        theirs_step_mdp = torchrl.envs.step_mdp

    print(f"{'batch':>8} {'path':>10} {'rlcore µs/step':>15} {'torchrl µs/step':>16} {'ratio':>7}")
    for batch_size in BATCH_SIZES:
        our_rollout, our_loop = measure(ours, rlcore.step_mdp, batch_size, args.steps, args.repeats)
        rows = [("rollout", our_rollout, None), ("step+mdp", our_loop, None)]
        if theirs is not None:
            their_rollout, their_loop = measure(
                theirs, theirs_step_mdp, batch_size, args.steps, args.repeats
            )
            rows = [("rollout", our_rollout, their_rollout), ("step+mdp", our_loop, their_loop)]
        for path, mine, other in rows:
            other_txt = f"{other:16.1f}" if other is not None else f"{'-':>16}"
            ratio = f"{other / mine:7.2f}" if other is not None else f"{'-':>7}"
            print(f"{str(batch_size):>8} {path:>10} {mine:15.1f} {other_txt} {ratio}")


if __name__ == "__main__":
    main()

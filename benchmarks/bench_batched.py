"""Batched envs side by side: rlbatched vs torchrl vs gymnasium's vector envs.

Three measurements, each printed with ratios (other stack / rlbatched, > 1 means we are faster):

1. ``ParallelEnv(2, Pendulum)``: microseconds per env-step of a rollout with random actions,
   against torchrl's ``ParallelEnv`` and gymnasium's ``AsyncVectorEnv`` (both with 2 workers).
2. ``SerialEnv(8, trivial env)``: microseconds per batched step, against torchrl's
   ``SerialEnv`` and gymnasium's ``SyncVectorEnv`` on an equally trivial gymnasium env.
3. Spawn start-up: seconds from construction to the first reset of a 2-worker parallel env
   started with ``spawn``, for the three stacks.

torchrl and gymnasium parts are skipped when not importable (run it in an env that has
them, e.g. ``/work/refvenv`` with our packages installed ``--no-deps -e``).

Usage::

    python benchmarks/bench_batched.py [--steps 400] [--repeats 5] [--skip-startup]

Each measurement is the best of ``--repeats`` runs, the stacks interleaved run by run.
"""

from __future__ import annotations

import argparse
import importlib.util
import time
from collections.abc import Callable

import torch
from tensordict import TensorDict

PENDULUM = "Pendulum-v1"
HAS_TORCHRL = importlib.util.find_spec("torchrl") is not None
HAS_GYM = importlib.util.find_spec("gymnasium") is not None


# ---------------------------------------------------------------- trivial envs (module level:
# spawned workers import them by name)
def _trivial_env_class(base: type, specs) -> type:
    class TrivialEnv(base):
        """One float observation, one float action, reward 1, never done."""

        def __init__(self) -> None:
            super().__init__()
            self.observation_spec = specs.Composite(observation=specs.Unbounded(shape=(1,)))
            self.action_spec = specs.Unbounded(shape=(1,))
            self.reward_spec = specs.Unbounded(shape=(1,))
            self.done_spec = specs.Categorical(2, shape=(1,), dtype=torch.bool)
            self.__dict__["_zero"] = torch.zeros(1)
            self.__dict__["_false"] = torch.zeros(1, dtype=torch.bool)
            self.__dict__["_one"] = torch.ones(1)

        def _reset(self, tensordict):
            return TensorDict(
                {"observation": self._zero.clone(), "done": self._false, "terminated": self._false},
                [],
            )

        def _step(self, tensordict):
            return TensorDict(
                {
                    "observation": tensordict.get("action").clone(),
                    "reward": self._one,
                    "done": self._false,
                    "terminated": self._false,
                },
                [],
            )

        def _set_seed(self, seed):
            return seed

    return TrivialEnv


def ours_trivial():
    import rlspecs
    from rlcore import EnvBase

    return _trivial_env_class(EnvBase, rlspecs)()


def torchrl_trivial():
    import torchrl.data as specs
    from torchrl.envs import EnvBase

    return _trivial_env_class(EnvBase, specs)()


def ours_pendulum():
    from rllibs import GymEnv

    return GymEnv(PENDULUM)


def torchrl_pendulum():
    from torchrl.envs import GymEnv

    return GymEnv(PENDULUM)


def gym_pendulum():
    import gymnasium as gym

    return gym.make(PENDULUM)


def gym_trivial():
    import gymnasium as gym
    import numpy as np

    class TrivialGymEnv(gym.Env):
        observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
        action_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)

        def reset(self, *, seed=None, options=None):
            return np.zeros(1, np.float32), {}

        def step(self, action):
            return np.asarray(action, np.float32), 1.0, False, False, {}

    return TrivialGymEnv()


# ---------------------------------------------------------------- timing helpers
def _race(runs: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Best wall time of each run, the runs interleaved so that load drift hits all alike."""
    for run in runs.values():
        run()  # warm-up: starts workers, fills caches
    best = dict.fromkeys(runs, float("inf"))
    for _ in range(repeats):
        for name, run in runs.items():
            start = time.perf_counter()
            run()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def _rollout_run(env, steps: int) -> Callable[[], object]:
    return lambda: env.rollout(steps, break_when_any_done=False)


def _gym_vector_run(envs, steps: int) -> Callable[[], object]:
    envs.reset(seed=0)

    def run():
        for _ in range(steps):
            envs.step(envs.action_space.sample())

    return run


def _report(title: str, unit: str, results: dict[str, float], scale: float) -> None:
    print(f"\n{title}")
    ours = results.get("rlbatched")
    for name, seconds in results.items():
        ratio = f"  ({seconds / ours:5.2f}x rlbatched)" if ours and name != "rlbatched" else ""
        print(f"  {name:<28} {seconds * scale:10.1f} {unit}{ratio}")


# ---------------------------------------------------------------- benchmarks
def bench_parallel(steps: int, repeats: int, workers: int = 2) -> None:
    from rlbatched import ParallelEnv

    envs = {"rlbatched": ParallelEnv(workers, ours_pendulum, mp_start_method="fork")}
    runs = {"rlbatched": _rollout_run(envs["rlbatched"], steps)}
    if HAS_TORCHRL:
        from torchrl.envs import ParallelEnv as TorchrlParallelEnv

        envs["torchrl"] = TorchrlParallelEnv(workers, torchrl_pendulum, mp_start_method="fork")
        runs["torchrl"] = _rollout_run(envs["torchrl"], steps)
    if HAS_GYM:
        import gymnasium as gym

        name = "gymnasium AsyncVectorEnv"
        envs[name] = gym.vector.AsyncVectorEnv([gym_pendulum] * workers, context="fork")
        runs[name] = _gym_vector_run(envs[name], steps)
    results = _race(runs, repeats)
    for env in envs.values():
        env.close()
    per_env_step = {name: seconds / steps / workers for name, seconds in results.items()}
    _report(f"ParallelEnv({workers}, {PENDULUM}), fork: per env-step", "us", per_env_step, 1e6)


def bench_serial(steps: int, repeats: int, workers: int = 8) -> None:
    from rlbatched import SerialEnv

    runs = {"rlbatched": _rollout_run(SerialEnv(workers, ours_trivial), steps)}
    if HAS_TORCHRL:
        from torchrl.envs import SerialEnv as TorchrlSerialEnv

        runs["torchrl"] = _rollout_run(TorchrlSerialEnv(workers, torchrl_trivial), steps)
    if HAS_GYM:
        import gymnasium as gym

        envs = gym.vector.SyncVectorEnv([gym_trivial] * workers)
        runs["gymnasium SyncVectorEnv"] = _gym_vector_run(envs, steps)
    per_step = {name: seconds / steps for name, seconds in _race(runs, repeats).items()}
    _report(f"SerialEnv({workers}, trivial env): per batched step", "us", per_step, 1e6)


def bench_startup(repeats: int, workers: int = 2) -> None:
    from rlbatched import ParallelEnv

    def ours():
        env = ParallelEnv(workers, ours_pendulum, mp_start_method="spawn")
        env.reset()
        env.close()

    runs = {"rlbatched": ours}
    if HAS_TORCHRL:
        from torchrl.envs import ParallelEnv as TorchrlParallelEnv

        def theirs():
            env = TorchrlParallelEnv(workers, torchrl_pendulum, mp_start_method="spawn")
            env.reset()
            env.close()

        runs["torchrl"] = theirs
    if HAS_GYM:
        import gymnasium as gym

        def gym_async():
            envs = gym.vector.AsyncVectorEnv([gym_pendulum] * workers, context="spawn")
            envs.reset(seed=0)
            envs.close()

        runs["gymnasium AsyncVectorEnv"] = gym_async
    title = f"Spawn start-up, {workers} workers ({PENDULUM}): construct + first reset + close"
    _report(title, "s", _race(runs, repeats), 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--startup-repeats", type=int, default=1)
    parser.add_argument("--skip-startup", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    bench_serial(args.steps, args.repeats)
    bench_parallel(args.steps, args.repeats)
    if not args.skip_startup:
        bench_startup(args.startup_repeats)


if __name__ == "__main__":
    main()

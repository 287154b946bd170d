"""Batched envs side by side: rlbatched vs torchrl vs gymnasium's vector envs.

Three measurements, each printed with ratios (other stack / rlbatched, > 1 means we are faster):

(``serial_rows`` and ``parallel_rows`` give run.py's case 3: SerialEnv on Pendulum, CartPole and
a registered gymnasium env that does nothing, constant-action rollouts and random-action hand
loops, against torchrl, SyncVectorEnv and EnvPool (1 thread); ParallelEnv per start method and
process split against AsyncVectorEnv and EnvPool (2 threads), constant actions.
The standalone run below prints the three measurements.)

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
import functools
import importlib.util
import time
from collections.abc import Callable

import torch
from tensordict import TensorDict

PENDULUM = "Pendulum-v1"
CARTPOLE = "CartPole-v1"
DISPLAY = {
    "pendulum": "Pendulum",
    "cartpole": "CartPole",
    "trivial": "Trivial",
    "gymtrivial": "GymEnv(trivial)",
}
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


def ours_cartpole():
    from rllibs import GymEnv

    return GymEnv(CARTPOLE)


def torchrl_cartpole():
    from torchrl.envs import GymEnv

    return GymEnv(CARTPOLE)


def gym_cartpole():
    import gymnasium as gym

    return gym.make(CARTPOLE)


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


TRIVIAL_ID = "rlstack-bench/Trivial-v0"  # gym_trivial's env, registered: what gym.make makes


def _registered_trivial() -> str:
    import gymnasium as gym

    if TRIVIAL_ID not in gym.registry:
        gym.register(TRIVIAL_ID, entry_point=gym_trivial)
    return TRIVIAL_ID


def ours_gymtrivial():
    from rllibs import GymEnv

    return GymEnv(_registered_trivial())


def torchrl_gymtrivial():
    from torchrl.envs import GymEnv

    return GymEnv(_registered_trivial())


def gym_gymtrivial():
    import gymnasium as gym

    return gym.make(_registered_trivial())


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


# ---------------------------------------------------------------- rows of run.py's case 3
def _hand_loop(env, steps: int) -> Callable[[], None]:
    """``rand_action`` + ``step_and_maybe_reset``, ``steps`` times, going on from the last root."""
    state = [env.reset()]

    def run() -> None:
        td = state[0]
        act, step = env.rand_action, env.step_and_maybe_reset
        for _ in range(steps):
            _, td = step(act(td))
        state[0] = td

    return run


def _envpool_run(env, name: str, workers: int, steps: int, constant: bool) -> Callable[[], None]:
    import numpy as np

    rng = np.random.default_rng(0)
    if constant:
        action = _constant_actions(name, workers)[0]
        sample = lambda: action  # noqa: E731
    elif name == "pendulum":
        sample = lambda: rng.uniform(-2.0, 2.0, (workers, 1)).astype(np.float32)  # noqa: E731
    else:
        sample = lambda: rng.integers(0, 2, workers)  # noqa: E731
    env.reset()

    def run() -> None:
        for _ in range(steps):
            env.step(sample())

    return run


def _constant_actions(name: str, workers: int) -> tuple:
    """One fixed batched action: gymnasium's format (NumPy), and the specs' (a tensor)."""
    import numpy as np

    if name == "cartpole":  # push right; a one-hot action for the env wrappers
        one_hot = torch.zeros(workers, 2, dtype=torch.int64)
        one_hot[:, 1] = 1
        return np.ones(workers, dtype=np.int64), one_hot
    return np.full((workers, 1), 0.5, np.float32), torch.full((workers, 1), 0.5)


def _constant_rollout_run(env, name: str, workers: int, steps: int) -> Callable[[], object]:
    action = _constant_actions(name, workers)[1]
    policy = lambda td: td.set("action", action)  # noqa: E731
    return lambda: env.rollout(steps, policy, break_when_any_done=False)


def _constant_vector_run(envs, name: str, workers: int, steps: int) -> Callable[[], object]:
    action = _constant_actions(name, workers)[0]
    envs.reset(seed=0)

    def run():
        for _ in range(steps):
            envs.step(action)

    return run


def _serial_runs(name: str, workers: int, steps: int, hand: bool, opened: list) -> dict:
    """The contenders of one SerialEnv row: our rollout (or hand loop) and the other stacks'."""
    import gymnasium as gym

    from rlbatched import SerialEnv

    runs = {}
    ours = SerialEnv(workers, globals()[f"ours_{name}"])
    opened.append(ours)
    ours.set_seed(0)
    # rollouts: one constant action on every side; hand loops: each stack's own sampler
    rollout = functools.partial(_constant_rollout_run, name=name, workers=workers, steps=steps)
    runs["ours"] = _hand_loop(ours, steps) if hand else rollout(ours)
    if HAS_TORCHRL:
        from torchrl.envs import SerialEnv as TorchrlSerialEnv

        theirs = TorchrlSerialEnv(workers, globals()[f"torchrl_{name}"])
        opened.append(theirs)
        theirs.set_seed(0)
        runs["torchrl"] = _hand_loop(theirs, steps) if hand else rollout(theirs)
    vector = gym.vector.SyncVectorEnv([globals()[f"gym_{name}"]] * workers)
    opened.append(vector)
    if hand:
        runs["gymnasium"] = _gym_vector_run(vector, steps)
    else:
        runs["gymnasium"] = _constant_vector_run(vector, name, workers, steps)
    if importlib.util.find_spec("envpool") is not None and name in ("pendulum", "cartpole"):
        import envpool

        pool = envpool.make_gymnasium(
            {"pendulum": PENDULUM, "cartpole": CARTPOLE}[name], num_envs=workers, num_threads=1
        )
        opened.append(pool)
        runs["envpool"] = _envpool_run(pool, name, workers, steps, constant=not hand)
    return runs


def serial_rows(quick: bool) -> list:
    """Case 3's SerialEnv rows: µs per batched step of a rollout, and of a hand loop.

    ``env.rollout(steps, constant policy, break_when_any_done=False)`` of
    ``SerialEnv(n, GymEnv)`` (the rollout's stepper loop; "trivial": a registered gymnasium
    env that does nothing, ``TRIVIAL_ID``), against torchrl's SerialEnv (the same policy), gymnasium's
    ``SyncVectorEnv`` and EnvPool with one thread (``step`` with the same constant action);
    for Pendulum and CartPole with 4 envs, also a hand ``rand_action`` +
    ``step_and_maybe_reset`` loop (torchrl: the same loop; gymnasium and EnvPool draw their
    own random actions: those rows compare samplers too).
    """
    from _harness import Row, Target, closing_all, median_per_unit

    steps, repeats = (20, 2) if quick else (500, 5)
    rows = []
    notes = {"gymnasium": "SyncVectorEnv", "envpool": "1 thr"}
    cases = [(name, workers, False) for name in ("pendulum", "cartpole") for workers in (2, 4)]
    cases += [("pendulum", 4, True), ("cartpole", 4, True)]
    cases += [("gymtrivial", workers, False) for workers in (2, 4)]
    for name, workers, hand in cases:
        with closing_all() as opened:
            runs = _serial_runs(name, workers, steps, hand, opened)
            values = {k: v * 1e6 for k, v in median_per_unit(runs, steps, repeats).items()}
        target = None
        if workers == 4 and not hand:
            target = Target("ours ≤ SyncVectorEnv", lambda v: v["ours"] <= v["gymnasium"])
        kind = (
            ", step_and_maybe_reset loop, random actions (compares samplers too)"
            if hand
            else ", constant action"
        )
        case = f"3. SerialEnv({workers}, {DISPLAY[name]}){kind}"
        rows.append(Row(case, "µs/batched step", values, notes=dict(notes), target=target))
    return rows


# ---------------------------------------------------------------- ParallelEnv rows of case 3
START_METHODS = ("fork", "forkserver", "spawn")


def _ours_parallel(workers: int, name: str, method: str, processes: int):
    from rlbatched import ParallelEnv

    make = globals()[f"ours_{name}"]
    return ParallelEnv(workers, make, mp_start_method=method, num_processes=processes)


def _default_processes(workers: int) -> int:
    """ParallelEnv's default ``num_processes`` (one per sub-env, up to the usable cores), read
    from an env that is built but never started."""
    from rlbatched import ParallelEnv

    env = ParallelEnv(workers, ours_trivial)
    try:
        return env.num_processes
    finally:
        env.close()


def _parallel_runs(
    name: str, workers: int, method: str, processes: tuple[int, ...], steps: int, opened: list
) -> dict:
    """Contenders of one group of ParallelEnv rows, all alive together and raced interleaved.

    Ours once per process count (``ours/<k>``); gymnasium's ``AsyncVectorEnv`` (shared memory,
    the same start method); EnvPool with 2 threads (Pendulum); torchrl's ``ParallelEnv`` under
    fork. One constant action everywhere (a policy writing it; ``step`` with it). Ours are built first: a fork server started by them has our modules preloaded.
    """
    import gymnasium as gym

    runs = {}
    for k in processes:
        env = _ours_parallel(workers, name, method, k)
        opened.append(env)
        env.set_seed(0)
        runs[f"ours/{k}"] = _constant_rollout_run(env, name, workers, steps)
    vector = gym.vector.AsyncVectorEnv(
        [globals()[f"gym_{name}"]] * workers, shared_memory=True, context=method
    )
    opened.append(vector)
    runs["gymnasium"] = _constant_vector_run(vector, name, workers, steps)
    if HAS_TORCHRL and method == "fork":
        from torchrl.envs import ParallelEnv as TorchrlParallelEnv

        theirs = TorchrlParallelEnv(workers, globals()[f"torchrl_{name}"], mp_start_method=method)
        opened.append(theirs)
        theirs.set_seed(0)
        runs["torchrl"] = _constant_rollout_run(theirs, name, workers, steps)
    if importlib.util.find_spec("envpool") is not None and name != "trivial":
        import envpool

        pool = envpool.make_gymnasium(
            {"pendulum": PENDULUM, "cartpole": CARTPOLE}[name], num_envs=workers, num_threads=2
        )
        opened.append(pool)
        runs["envpool"] = _envpool_run(pool, name, workers, steps, constant=True)
    return runs


def _issue27_target():
    """Issue 27, for the default split: ≤ ½ of AsyncVectorEnv(4, shared memory) under the same
    start method and ≤ 1.5× EnvPool (2 threads)."""
    from _harness import Target

    return Target(
        "default split: ours ≤ ½ AsyncVectorEnv and ≤ 1.5 × EnvPool (2 thr)",
        lambda v: 2 * v["ours"] <= v["gymnasium"] and v["ours"] <= 1.5 * v["envpool"],
    )


def parallel_rows(quick: bool) -> list:
    """Case 3's ParallelEnv rows: µs per batched step of ``rollout(steps)`` with a constant
    action (every stack steps the same one), one row per split.

    ``ParallelEnv(4, Pendulum)`` with one process per sub-env and with ``num_processes=2`` (the
    default on 2 cores: one process per sub-env up to the usable cores),
    against ``AsyncVectorEnv(4, shared_memory=True)`` and EnvPool (4 envs, 2 threads), under
    each start method (quick: fork only); 8 sub-envs on this machine's cores (8 and 2
    processes, fork); the 2-worker Pendulum and 4-worker trivial rows of earlier issues.
    """
    import multiprocessing

    from _harness import Row, Target, closing_all, median_per_unit

    steps, repeats = (20, 2) if quick else (500, 5)
    offered = multiprocessing.get_all_start_methods()
    methods = ("fork",) if quick else tuple(m for m in START_METHODS if m in offered)
    # (env, sub-envs, start method, process counts, target of the rows)
    groups = [("pendulum", 4, method, (4, 2), _issue27_target()) for method in methods]
    groups.append(("pendulum", 8, "fork", (8, 2), None))
    before = Target(
        "ours ≤ AsyncVectorEnv and torchrl / ours ≥ 4",
        lambda v: v["ours"] <= v["gymnasium"] and v["torchrl"] >= 4 * v["ours"],
    )
    groups.append(("pendulum", 2, "fork", (2,), before))
    groups.append(("trivial", 4, "fork", (4, 2), None))
    rows = []
    for name, workers, method, processes, target in groups:
        with closing_all() as opened:
            runs = _parallel_runs(name, workers, method, processes, steps, opened)
            values = {k: v * 1e6 for k, v in median_per_unit(runs, steps, repeats).items()}
        theirs = {k: v for k, v in values.items() if not k.startswith("ours/")}
        notes = {"gymnasium": f"AsyncVectorEnv, {method}", "envpool": "2 thr"}
        default = _default_processes(workers)
        for k in processes:
            split = f", num_processes={k}" + (" (default here)" if k == default else "")
            case = f"3. ParallelEnv({workers}, {DISPLAY[name]}{split}), {method}, constant action"
            row_values = {"ours": values[f"ours/{k}"], **theirs}
            row_target = target if k == default or len(processes) == 1 else None
            rows.append(
                Row(case, "µs/batched step", row_values, notes=dict(notes), target=row_target)
            )
    return rows


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

"""Time to the first step of a 4-sub-env Pendulum batch, three stacks, each start method.

Each measurement runs in a fresh interpreter: this file started as a minimal script (``--probe
STACK METHOD``) that imports only what that stack needs, and times, from its first line,

- *cold*: importing the stack, building the batched env (rlbatched ``ParallelEnv``, torchrl
  ``ParallelEnv``, gymnasium ``AsyncVectorEnv``), its first reset and its first step (random
  actions), then closing it (not timed);
- *warm*: the same start (construction, reset, step) again in the same process, modules already
  imported (and, under forkserver, the fork server already running).

Like is compared with like: every stack under the same start method (fork, forkserver, spawn),
cold with cold, warm with warm; each stack keeps its defaults otherwise (torchrl builds an env in
its main process to read the specs, ours gets them from its workers; our fork server preloads
torch and our packages). The env factories live here, at the top level of a module that imports
nothing but the standard library, so a worker that imports the main module again (spawn,
forkserver) pays only for what its stack needs.

    python benchmarks/bench_startup.py [--quick]              # every row
    python benchmarks/bench_startup.py --probe ours spawn     # one fresh-interpreter measurement
"""

from __future__ import annotations

import time

T0 = time.perf_counter()  # the probe's clock starts before any import of a stack

import argparse  # noqa: E402 - after T0 on purpose
import importlib.util  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import pathlib  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

WORKERS = 4
PENDULUM = "Pendulum-v1"
STACKS = ("ours", "torchrl", "gymnasium")
METHODS = ("fork", "forkserver", "spawn")
CASE = "6. first step of ParallelEnv(4, Pendulum), {kind}, {method}"
KINDS = {
    "cold": "cold (fresh interpreter, imports included)",
    "warm": "warm (second start in the process)",
}
NOTES = {"gymnasium": "AsyncVectorEnv"}


# ---------------------------------------------------------------------- env factories
def ours_pendulum():
    from rllibs import GymEnv

    return GymEnv(PENDULUM)


def torchrl_pendulum():
    from torchrl.envs import GymEnv

    return GymEnv(PENDULUM)


def gym_pendulum():
    import gymnasium as gym

    return gym.make(PENDULUM)


# ---------------------------------------------------------------------- one start, per stack
# Each imports what a script using that stack imports: its batched env and its env wrapper.
def _start_ours(method: str):
    from rlbatched import ParallelEnv
    from rllibs import GymEnv  # noqa: F401 - a script building GymEnvs imports it

    env = ParallelEnv(WORKERS, ours_pendulum, mp_start_method=method)
    env.step(env.rand_action(env.reset()))
    return env.close


def _start_torchrl(method: str):
    from torchrl.envs import GymEnv, ParallelEnv  # noqa: F401

    env = ParallelEnv(WORKERS, torchrl_pendulum, mp_start_method=method)
    env.step(env.rand_action(env.reset()))
    return env.close


def _start_gymnasium(method: str):
    import gymnasium as gym

    envs = gym.vector.AsyncVectorEnv([gym_pendulum] * WORKERS, context=method)
    envs.reset(seed=0)
    envs.step(envs.action_space.sample())
    return envs.close


STARTS = {"ours": _start_ours, "torchrl": _start_torchrl, "gymnasium": _start_gymnasium}


def probe(stack: str, method: str) -> dict[str, float]:
    """Seconds of the cold start (from this interpreter's first line) and of a warm one."""
    close = STARTS[stack](method)
    cold = time.perf_counter() - T0
    close()
    t0 = time.perf_counter()
    close = STARTS[stack](method)
    warm = time.perf_counter() - t0
    close()
    return {"cold": cold, "warm": warm}


def run_probe(stack: str, method: str) -> dict[str, float]:
    """``probe`` in a fresh interpreter started from this file."""
    here = pathlib.Path(__file__).resolve()
    out = subprocess.run(
        [sys.executable, str(here), "--probe", stack, method],
        capture_output=True,
        text=True,
        check=True,
        cwd=here.parent,
        timeout=900,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _available() -> tuple[list[str], list[str]]:
    stacks = [s for s in STACKS if s != "torchrl" or importlib.util.find_spec("torchrl")]
    methods = [m for m in METHODS if m in multiprocessing.get_all_start_methods()]
    return stacks, methods


def rows(quick: bool) -> list:
    """One row per start method and kind (cold, warm): median seconds over interleaved fresh
    interpreters (3 each; ratios are other / ours). The quick smoke run starts each probe once:
    ours under every start method, the other stacks under the first one only."""
    from _harness import Row, Target

    stacks, methods = _available()
    cells = [(m, s) for m in methods for s in stacks if not quick or s == "ours" or m == methods[0]]
    samples = {cell: [] for cell in cells}
    for _ in range(1 if quick else 3):
        for cell in cells:
            samples[cell].append(run_probe(cell[1], cell[0]))
    out = []
    for method in methods:
        for kind, text in KINDS.items():
            values = {
                s: statistics.median(r[kind] for r in samples[method, s])
                for s in stacks
                if (method, s) in samples
            }
            target = None
            if "torchrl" in values:
                target = Target("ours ≤ torchrl", lambda v: v["ours"] <= v["torchrl"])
            case = CASE.format(kind=text, method=method)
            out.append(Row(case, "s", values, notes=NOTES, target=target))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one fresh interpreter per cell")
    parser.add_argument(
        "--probe",
        nargs=2,
        metavar=("STACK", "METHOD"),
        help=f"measure one stack ({', '.join(STACKS)}) under one start method in this "
        "interpreter, print {cold, warm} seconds as JSON, and exit",
    )
    args = parser.parse_args()
    if args.probe:
        print(json.dumps(probe(*args.probe)))
        return
    for row in rows(args.quick):
        shown = {k: f"{v:.2f} s" for k, v in row.values.items()}
        print(row.case, shown, row.met())


if __name__ == "__main__":
    main()

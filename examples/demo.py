"""Roll out a real environment in a ParallelEnv and print a summary.

A random policy (or a small untrained MLP with ``--policy mlp``) drives ``--workers`` copies of
the environment in worker processes for ``--steps`` batched steps; finished episodes are reset
in place. The table at the end gives the start method, start-up time, frames per second,
episodes finished and their mean return.

Workers start with the fastest safe start method (``fastest_safe_start_method``): ``forkserver``
where the platform offers it (a fork server with torch and our packages preloaded forks each
worker, so only the first start of a process pays for the imports), else ``spawn``. ``fork`` is
never the default: the demo's process has threads running (tqdm's monitor, torch's pools) and a
forked child of a threaded process can deadlock; ask for it with ``--start-method fork``.

    python examples/demo.py                       # Pendulum-v1, 4 workers
    python examples/demo.py --env halfcheetah     # MuJoCo HalfCheetah-v5
    python examples/demo.py --env humanoid        # dm_control humanoid walk
"""

from __future__ import annotations

import argparse
import functools
import multiprocessing
import os
import time

# The demo never renders: without a display, dm_control's default GLFW renderer only prints
# warnings (once per worker). Set before dm_control is imported, inherited by the workers.
if not (os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")):
    os.environ.setdefault("MUJOCO_GL", "disable")

import torch  # noqa: E402
from tqdm import tqdm  # noqa: E402

from rlbatched import ParallelEnv  # noqa: E402
from rlcore import EnvCreator  # noqa: E402
from rllibs import DMControlEnv, GymEnv  # noqa: E402
from rltransforms import (  # noqa: E402
    CatTensors,
    Compose,
    DoubleToFloat,
    RewardSum,
    TransformedEnv,
)

ENVS = {"pendulum": "Pendulum-v1", "halfcheetah": "HalfCheetah-v5", "humanoid": "humanoid/walk"}


def make_env(name: str):
    """Build one env; dm_control observations are concatenated into one float vector."""
    if name == "humanoid":
        base = DMControlEnv("humanoid", "walk")
        obs_keys = list(base.observation_spec.keys())
        transform = Compose(
            CatTensors(obs_keys, "observation"),
            DoubleToFloat(in_keys=["observation"], in_keys_inv=["action"]),
            RewardSum(),
        )
        return TransformedEnv(base, transform)
    return TransformedEnv(GymEnv(ENVS[name]), RewardSum())


def make_policy(kind: str, env):
    """``random`` samples the action spec; ``mlp`` is a small untrained MLP on the observation."""
    if kind == "random":
        return lambda td: env.rand_action(td)
    obs_dim = env.observation_spec["observation"].shape[-1]
    act_spec = env.action_spec
    net = torch.nn.Sequential(
        torch.nn.Linear(obs_dim, 64), torch.nn.Tanh(), torch.nn.Linear(64, act_spec.shape[-1])
    )

    def policy(td):
        with torch.no_grad():
            td.set("action", act_spec.project(net(td.get("observation").float())))
        return td

    return policy


def fastest_safe_start_method() -> str:
    """``"forkserver"`` where this platform offers it, else ``"spawn"``; never ``"fork"``."""
    return "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"


def positive_int(text: str) -> int:
    """An argparse type: a whole number ≥ 1 (argparse turns the ValueError into a usage error)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {text}")
    return value


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", choices=sorted(ENVS), default="pendulum", help="the environment")
    parser.add_argument(
        "--workers", type=positive_int, default=4, help="worker processes (default 4)"
    )
    parser.add_argument(
        "--steps", type=positive_int, default=2000, help="batched steps (default 2000)"
    )
    parser.add_argument("--policy", choices=["random", "mlp"], default="random", help="the policy")
    parser.add_argument(
        "--start-method",
        choices=["spawn", "fork", "forkserver"],
        default=None,
        help="how worker processes start (default: forkserver where offered, else spawn)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the envs and the policy")
    args = parser.parse_args(argv)

    if args.start_method is None:
        start_method = fastest_safe_start_method()
        how = f"{start_method} (fastest safe here)"
    else:
        start_method = args.start_method
        how = f"{start_method} (--start-method)"
    torch.manual_seed(args.seed)
    started = time.perf_counter()
    env = ParallelEnv(
        args.workers,
        EnvCreator(functools.partial(make_env, args.env)),
        mp_start_method=start_method,
    )
    env.set_seed(args.seed)
    td = env.reset()
    startup = time.perf_counter() - started
    policy = make_policy(args.policy, env)

    returns: list[float] = []
    t0 = time.perf_counter()
    for _ in tqdm(range(args.steps), desc=f"{args.env} x{args.workers}", unit="step"):
        td = policy(td)
        td, next_td = env.step_and_maybe_reset(td)
        done = td["next", "done"].reshape(-1)
        if done.any():
            returns.extend(td["next", "episode_reward"].reshape(-1)[done].tolist())
        td = next_td
    elapsed = time.perf_counter() - t0
    env.close()

    frames = args.steps * args.workers
    mean_return = f"{sum(returns) / len(returns):.2f}" if returns else "n/a"
    rows = [
        ("env", ENVS[args.env]),
        ("workers", str(args.workers)),
        ("start method", how),
        ("policy", args.policy),
        ("batched steps", f"{args.steps:,}"),
        ("frames", f"{frames:,}"),
        ("start-up (s)", f"{startup:.2f}"),
        ("frames per second", f"{frames / elapsed:,.0f}"),
        ("episodes finished", str(len(returns))),
        ("mean return", mean_return),
    ]
    width = max(len(k) for k, _ in rows)
    vwidth = max(len(v) for _, v in rows)
    print(f"+-{'-' * width}-+-{'-' * vwidth}-+")
    for key, value in rows:
        print(f"| {key:<{width}} | {value:>{vwidth}} |")
    print(f"+-{'-' * width}-+-{'-' * vwidth}-+")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Install from the wheelhouse into fresh virtualenvs, as a new user would, and run a rollout.

For each scenario: a new venv, torch first (its CPU build, from ``tools/torch_source.py``), then ONE
``pip install --find-links DIST <target>`` command; the distributions it added are compared
with the expected set (our packages exactly, plus the named third-party ones), then a short
rollout runs in that venv. Exit status 1 names the scenario and what differed.

    python tools/check_wheelhouse.py --dist dist --constraints constraints.txt
"""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time
import venv

from torch_source import torch_source

OURS = {
    "rlspecs",
    "rlworkers",
    "rlcore",
    "rltransforms",
    "rlmocks",
    "rlbatched",
    "rllibs",
    "rlmodules",
    "rlcollectors",
    "rlstack",
}
# optional backends: never installed unless their extra was asked for
OPTIONAL = {"dm-control", "mujoco", "ale-py", "envpool", "ray", "tqdm"}

ROLLOUT_GYM = """
from rlbatched import SerialEnv
from rllibs import GymEnv
env = SerialEnv(2, lambda: GymEnv("Pendulum-v1"))
env.set_seed(0)
td = env.rollout(20)
assert td.batch_size == (2, 20), td.batch_size
print("rollout", tuple(td.batch_size), "reward sum", float(td["next", "reward"].sum()))
"""

ROLLOUT_SINGLE = """
from rllibs import GymEnv
td = GymEnv("CartPole-v1").rollout(20)
print("rollout", tuple(td.batch_size), "keys", sorted(td.keys()))
"""

# (target, our distributions it must install, third-party ones it must install, check script)
SCENARIOS = [
    (
        "rlstack[gym]",
        {"rlstack", "rlspecs", "rlworkers", "rlcore", "rltransforms", "rlbatched", "rllibs"},
        {"gymnasium"},
        ROLLOUT_GYM,
    ),
    ("rllibs[gym]", {"rlspecs", "rlcore", "rllibs"}, {"gymnasium"}, ROLLOUT_SINGLE),
]


def _normalise(name: str) -> str:
    return name.lower().replace("_", "-")


def _installed(python: pathlib.Path) -> set[str]:
    out = subprocess.run(
        [str(python), "-m", "pip", "list", "--format=json", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {_normalise(d["name"]) for d in json.loads(out)}


def _pip(python: pathlib.Path, *args: str) -> None:
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *args], check=True)


def check(target: str, ours: set[str], third: set[str], script: str, args) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="wheelhouse-") as tmp:
        env_dir = pathlib.Path(tmp) / "venv"
        venv.EnvBuilder(with_pip=True).create(env_dir)
        python = env_dir / "bin" / "python"
        t0 = time.perf_counter()
        _pip(python, *torch_source().install_args())
        before = _installed(python)
        t1 = time.perf_counter()
        _pip(python, "-c", str(args.constraints), "--find-links", str(args.dist), target)
        t2 = time.perf_counter()
        added = _installed(python) - before
        problems = []
        got_ours = {d for d in added if d in OURS}
        if got_ours != ours:
            problems.append(f"{target}: installed our {sorted(got_ours)}, expected {sorted(ours)}")
        missing = {_normalise(d) for d in third} - added
        if missing:
            problems.append(f"{target}: did not install {sorted(missing)}")
        extra = (added & OPTIONAL) - {_normalise(d) for d in third}
        if extra:
            problems.append(
                f"{target}: installed optional backends nobody asked for: {sorted(extra)}"
            )
        run = subprocess.run([str(python), "-c", script], capture_output=True, text=True)
        if run.returncode != 0:
            problems.append(f"{target}: the rollout failed:\n{run.stderr[-3000:]}")
        print(
            f"{target}: torch {t1 - t0:.0f} s, `pip install --find-links` {t2 - t1:.0f} s; "
            f"added ours {sorted(got_ours)} + {len(added - got_ours)} third-party; "
            f"{run.stdout.strip() or 'no output'}"
        )
        return problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dist", type=pathlib.Path, required=True, help="the wheelhouse")
    parser.add_argument("--constraints", type=pathlib.Path, required=True)
    args = parser.parse_args()
    args.dist, args.constraints = args.dist.resolve(), args.constraints.resolve()
    problems: list[str] = []
    for target, ours, third, script in SCENARIOS:
        problems += check(target, ours, third, script, args)
    for problem in problems:
        print("FAIL", problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

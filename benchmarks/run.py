"""Every benchmark side by side: our stack vs torchrl 0.14 vs gymnasium (vs envpool if installed).

The cases of ``CASES``, each measured in this one process (6: in fresh interpreters): (1)
counting-env rollout, (2) GymEnv rollout, (3) SerialEnv / ParallelEnv, (4) step_mdp, (5)
main-process memory over ParallelEnv steps, (6) time to the first step (cold and warm, under
fork, forkserver and spawn), (7) rollout at scale, (8) vector envs, (9) RayCollector, (a)
asynchronous stepping, (b) the step contract's input checks. Medians of interleaved
repetitions; ratios are other / ours. Writes ``benchmarks/results/latest.md`` and ``benchmarks/results/ratios.png``.

    python benchmarks/run.py              # every case (many minutes on an idle machine)
    python benchmarks/run.py --quick      # smoke run for CI: small counts, times not checked
    python benchmarks/run.py --cases 36a  # some cases
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import pathlib
import sys
import time
import warnings
from collections.abc import Callable

import bench_async
import bench_batched
import bench_gym
import bench_gym_vector
import bench_input_checks
import bench_memory
import bench_ray
import bench_rlcore
import bench_scale
import bench_startup
import bench_step_mdp
import torch
from _harness import Row, Target, machine_info, markdown, median_per_unit, ratio_chart

RESULTS = pathlib.Path(__file__).parent / "results"
HAS_TORCHRL = importlib.util.find_spec("torchrl") is not None
TITLE = "Benchmarks: ours vs torchrl vs gymnasium"


def case_counting(quick: bool) -> list[Row]:
    """(1) Rollout of the counting env, batch () and (64,): µs per step."""
    import rlcore
    import rlspecs

    steps, repeats = (50, 3) if quick else (2000, 7)
    classes = {"ours": bench_rlcore.make_counting_env(rlcore.EnvBase, rlspecs)}
    if HAS_TORCHRL:
        import torchrl.data
        import torchrl.envs

        classes["torchrl"] = bench_rlcore.make_counting_env(torchrl.envs.EnvBase, torchrl.data)
    rows = []
    for batch in ((), (64,)):
        runs = {
            name: functools.partial(cls(batch_size=batch).rollout, steps)
            for name, cls in classes.items()
        }
        values = {k: v * 1e6 for k, v in median_per_unit(runs, steps, repeats).items()}
        target = Target("torchrl / ours ≥ 4", lambda v: v["torchrl"] >= 4 * v["ours"])
        rows.append(
            Row(f"1. counting env rollout, batch {batch}", "µs/step", values, target=target)
        )
    return rows


def case_gym(quick: bool) -> list[Row]:
    """(2) GymEnv rollout vs torchrl's GymEnv vs the raw gymnasium loop: µs per step.

    Random actions (each stack samples its own) and a constant action (a policy writing one
    fixed tensor vs the raw loop passing the same action): the latter is the wrapper's own cost.
    """
    steps, repeats = (50, 3) if quick else (2000, 7)
    rows = []
    constant_targets = {"Pendulum-v1": 2.5, "CartPole-v1": 3.0}
    for name in ("Pendulum-v1", "CartPole-v1"):
        contenders = (
            (
                ", random actions (compares samplers too: gymnasium's sample(), a torch draw)",
                bench_gym.ours,
                bench_gym.raw_loop,
                bench_gym.torchrl_env,
                4.0,
            ),
            (
                ", constant action",
                bench_gym.ours_constant,
                bench_gym.raw_loop_constant,
                bench_gym.torchrl_constant,
                constant_targets[name],
            ),
        )
        for kind, ours, raw, torchrl, bound in contenders:
            runs = {"ours": ours(name, steps), "gymnasium": raw(name, steps)}
            theirs = torchrl(name, steps)
            if theirs is not None:
                runs["torchrl"] = theirs
            values = {k: v * 1e6 for k, v in median_per_unit(runs, steps, repeats).items()}
            target = Target(
                f"ours ≤ {bound:g} × gymnasium",
                lambda v, bound=bound: v["ours"] <= bound * v["gymnasium"],
            )
            rows.append(
                Row(
                    f"2. GymEnv({name}) rollout{kind}",
                    "µs/step",
                    values,
                    notes={"gymnasium": "raw loop"},
                    target=target,
                )
            )
    return rows


def case_batched(quick: bool) -> list[Row]:
    """(3) SerialEnv and ParallelEnv (start methods, process splits): µs per batched step."""
    return bench_batched.serial_rows(quick) + bench_batched.parallel_rows(quick)


def _no_section(case: Callable[[bool], list[Row]]) -> Callable[[bool], tuple[list[Row], list]]:
    return lambda quick: (case(quick), [])


# number -> (label, case(quick) -> (rows, extra Markdown lines))
CASES = {
    "1": ("counting env", _no_section(case_counting)),
    "2": ("GymEnv", _no_section(case_gym)),
    "3": ("batched envs", _no_section(case_batched)),
    "4": ("step_mdp", _no_section(bench_step_mdp.rows)),
    "5": ("memory", bench_memory.measure),
    "6": ("start-up", _no_section(bench_startup.rows)),
    "7": ("rollout at scale", bench_scale.measure),
    "8": ("vector envs", _no_section(bench_gym_vector.rows)),
    "9": ("RayCollector", bench_ray.measure),
    "a": ("async stepping", bench_async.measure),
    "b": ("step input checks", _no_section(bench_input_checks.rows)),
}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small counts: a smoke run for CI")
    parser.add_argument(
        "--out", type=pathlib.Path, default=RESULTS, help="folder for latest.md and ratios.png"
    )
    every = "".join(CASES)
    parser.add_argument(
        "--cases", default=every, help=f"which cases to run, by key (default {every}: all)"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.cases) - set(CASES))
    if unknown:
        parser.error(f"--cases: no case {', '.join(map(repr, unknown))}; the cases are {every}")
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)

    info = machine_info()
    given = sys.argv[1:] if argv is None else argv
    info["command"] = " ".join(["python benchmarks/run.py", *given])
    info["mode"] = (
        "quick (smoke run: counts too small for meaningful times)" if args.quick else "full"
    )
    rows: list[Row] = []
    extra: list[str] = []
    started = time.perf_counter()
    for number, (label, case) in CASES.items():
        if number not in args.cases:
            continue
        t0 = time.perf_counter()
        print(f"[bench] {number}. {label} ...", file=sys.stderr, flush=True)
        case_rows, section = case(args.quick)
        rows += case_rows
        extra += section
        print(f"[bench] {number}. {label}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    info["total run time"] = f"{time.perf_counter() - started:.0f} s"

    report = markdown(TITLE, info, rows, extra)
    print(report)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "latest.md").write_text(report)
    chart = args.out / "ratios.png"
    if ratio_chart(rows, str(chart), f"{TITLE} ({info['mode'].split()[0]})"):
        print(f"wrote {args.out / 'latest.md'} and {chart}")
    else:
        print(f"wrote {args.out / 'latest.md'} (matplotlib not installed: no chart)")


if __name__ == "__main__":
    main()

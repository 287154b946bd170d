"""``step_mdp`` on a nested tensordict with 10 leaves under ``"next"``: rlcore vs torchrl.

python benchmarks/bench_step_mdp.py [--calls 5000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util

import torch
from _harness import Row, Target, median_per_unit
from tensordict import TensorDict

CASE = "4. step_mdp, nested td, 10 leaves"


def nested_td(batch: tuple[int, ...] = ()) -> TensorDict:
    """A transition: root observation/action, and 10 leaves (two nested levels) under ``next``."""

    def obs() -> TensorDict:
        return TensorDict(
            {
                "observation": torch.zeros(*batch, 4),
                "agents": {"obs": torch.zeros(*batch, 3, 2), "state": torch.zeros(*batch, 5)},
                "info": {
                    "a": torch.zeros(*batch, 1),
                    "b": torch.zeros(*batch, 1, dtype=torch.int64),
                },
            },
            batch,
        )

    flag = torch.zeros(*batch, 1, dtype=torch.bool)
    nxt = obs()
    nxt.update(
        {
            "reward": torch.zeros(*batch, 1),
            "done": flag.clone(),
            "terminated": flag.clone(),
            "truncated": flag.clone(),
        }
    )
    nxt.set(("agents", "mask"), torch.ones(*batch, 3, 1, dtype=torch.bool))
    root = obs()
    root.set("action", torch.zeros(*batch, 2))
    root.set("next", nxt)
    return root


def rows(quick: bool) -> list[Row]:
    """The step_mdp row: µs per call, median of interleaved repetitions."""
    import rlcore

    calls, repeats = (200, 3) if quick else (5000, 7)
    td = nested_td()
    fns = {"ours": rlcore.step_mdp}
    if importlib.util.find_spec("torchrl") is not None:
        import torchrl.envs

        fns["torchrl"] = torchrl.envs.step_mdp

    def loop(fn) -> None:
        for _ in range(calls):
            fn(td)

    runs = {name: functools.partial(loop, fn) for name, fn in fns.items()}
    values = {k: v * 1e6 for k, v in median_per_unit(runs, calls, repeats).items()}
    target = Target("torchrl / ours ≥ 3", lambda v: v["torchrl"] >= 3 * v["ours"])
    return [Row(CASE, "µs/call", values, target=target)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    for row in rows(args.quick):
        print(row.case, {k: f"{v:.1f} {row.unit}" for k, v in row.values.items()}, row.met())


if __name__ == "__main__":
    main()

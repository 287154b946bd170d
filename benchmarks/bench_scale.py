"""Rollout cost as the data grows (batch size, number of observation leaves), vs torchrl.

A trivial env whose observation is ``leaves`` tensors of shape ``[*batch, 3]`` (views of one
``[leaves, *batch, 3]`` result, as a vectorised env produces them), a categorical action, a
constant reward and done flags; ``rollout(steps, break_when_any_done=False)`` with random
actions, one thread, µs per step. Each row also shows its memory-traffic floor: the bytes a
step records (every leaf of the returned ``[*batch, T]`` tensordict, ``"next"`` included)
divided by the bandwidth of one large ``copy_`` measured in the same run, i.e. what writing
the trajectory once costs at memory speed.

On the CPU the rollouts are timed in thread CPU time (``time.thread_time``: user + system,
page faults included), which a shared, loaded machine disturbs far less than wall time; on
CUDA in wall time, synchronised. Medians of interleaved rounds.

    python benchmarks/bench_scale.py                    # CPU
    python benchmarks/bench_scale.py --device cuda      # the same table on a GPU
    python benchmarks/bench_scale.py --steps 100 --repeats 3 --rows "16384,1;(),50"
    python benchmarks/bench_scale.py --switch-over      # lists vs buffers per leaf shape
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import time
from collections.abc import Callable
from typing import Any

import torch
from _harness import Row, Target, median_per_unit
from tensordict import TensorDict

from rlspecs.private_apis import td_new

# (batch size, number of observation leaves): the rows of issue 22's table
ROWS = (((), 1), ((64,), 1), ((1024,), 1), ((16384,), 1), ((), 10), ((), 50))
CASE = "7. scale rollout"
COPY_BYTES = 64 * 2**20  # large enough to miss every cache: the floor is DRAM traffic


def make_scale_env(base: type, specs: Any, null: bool = False) -> Callable[..., Any]:
    """The scale env class on ``base`` (an EnvBase) with the spec classes of ``specs``.

    ``null=True``: ``_step`` returns the same (prebuilt) tensors every step, in a tensordict
    built without checks, so that a rollout times the stack's own path and nothing else.
    """

    class ScaleEnv(base):
        """``leaves`` observations ``[*batch, row]``: a running sum of the actions."""

        def __init__(
            self, leaves: int = 1, batch_size: tuple = (), device: Any = None, row: int = 3
        ) -> None:
            super().__init__(batch_size=torch.Size(batch_size), device=device)
            batch = tuple(batch_size)
            self.observation_spec = specs.Composite(
                {f"obs{i}": specs.Unbounded(shape=(*batch, row)) for i in range(leaves)},
                shape=batch,
            )
            self.action_spec = specs.Categorical(4, shape=(*batch, 1), dtype=torch.int64)
            self.reward_spec = specs.Unbounded(shape=(*batch, 1))
            self.done_spec = specs.Categorical(2, shape=(*batch, 1), dtype=torch.bool)
            if device is not None:
                self.to(device)
            # plain attributes (not nn.Module buffers), out of the way of either base class
            fields = self.__dict__
            fields["obs_names"] = [f"obs{i}" for i in range(leaves)]
            fields["obs_sum"] = torch.zeros(leaves, *batch, row, device=device)
            fields["reward_value"] = torch.ones(*batch, 1, device=device)
            flag = torch.zeros(*batch, 1, dtype=torch.bool, device=device)
            fields["done_value"], fields["terminated_value"] = flag, flag.clone()

        def _data(self) -> dict:
            data = dict(zip(self.obs_names, self.obs_sum.unbind(0)))
            data.update(done=self.done_value, terminated=self.terminated_value)
            return data

        def _reset(self, tensordict):
            self.__dict__["obs_sum"] = torch.zeros_like(self.obs_sum)
            return TensorDict(self._data(), self.batch_size, device=self.device)

        def _step(self, tensordict):
            if null:
                prebuilt = self.__dict__.get("prebuilt")
                if prebuilt is None:
                    prebuilt = self.__dict__["prebuilt"] = self._data()
                    prebuilt["reward"] = self.reward_value
                return td_new(dict(prebuilt), self.batch_size, self.device)
            self.__dict__["obs_sum"] = self.obs_sum + tensordict.get("action")
            data = self._data()
            data["reward"] = self.reward_value
            return TensorDict(data, self.batch_size, device=self.device)

        def _set_seed(self, seed):
            return seed

    return ScaleEnv


def copy_bandwidth(device: str = "cpu", nbytes: int = COPY_BYTES, repeats: int = 7) -> float:
    """Bytes per second of ``dst.copy_(src)`` between two ``nbytes`` buffers (best of repeats)."""
    src = torch.ones(nbytes // 4, device=device)
    dst = torch.empty_like(src)
    clock = _clock(device)
    best = float("inf")
    for _ in range(repeats + 1):
        _sync(device)
        start = clock()
        dst.copy_(src)
        _sync(device)
        best = min(best, clock() - start)
    return nbytes / best


def _clock(device: str) -> Callable[[], float]:
    """Thread CPU time on the CPU (robust to a loaded machine), wall time on accelerators."""
    return time.thread_time if torch.device(device).type == "cpu" else time.perf_counter


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def recorded_bytes(rollout: Any) -> int:
    """Bytes per step held by a rollout result (all leaves, ``"next"`` included)."""
    leaves = rollout.values(include_nested=True, leaves_only=True)
    total = sum(leaf.numel() * leaf.element_size() for leaf in leaves)
    return total // rollout.batch_size[-1]


def _stacks(null: bool = False) -> dict[str, Callable[..., Any]]:
    import rlcore
    import rlspecs

    stacks = {"ours": make_scale_env(rlcore.EnvBase, rlspecs, null)}
    if importlib.util.find_spec("torchrl") is not None:
        import torchrl.data
        import torchrl.envs

        stacks["torchrl"] = make_scale_env(torchrl.envs.EnvBase, torchrl.data, null)
    return stacks


def leaf_cost(steps: int, repeats: int, device: str, wide: int = 50) -> dict[str, float]:
    """µs per leaf and step of each stack's own rollout path (step_mdp, done checks, recording,
    final stack): null envs of 1 and ``wide`` leaves at batch (), slope between the two."""
    per_step = {}
    for leaves in (1, wide):
        envs = {name: cls(leaves, (), device=device) for name, cls in _stacks(True).items()}
        runs = {name: functools.partial(_run, env, steps, device) for name, env in envs.items()}
        per_step[leaves] = median_per_step(runs, steps, repeats, device)
    return {
        name: (per_step[wide][name] - per_step[1][name]) / (wide - 1) * 1e6 for name in per_step[1]
    }


def _run(env: Any, steps: int, device: str) -> None:
    env.rollout(steps, break_when_any_done=False)
    _sync(device)


def median_per_step(
    runs: dict[str, Callable[[], object]], steps: int, repeats: int, device: str
) -> dict[str, float]:
    """Median seconds per step of each run, in the clock of ``device`` (see ``_clock``)."""
    return median_per_unit(runs, steps, repeats, clock=_clock(device))


def _label(batch: tuple, leaves: int) -> str:
    return f"batch {batch}, {leaves} leaf" + ("" if leaves == 1 else "s")


def _target(batch: tuple, leaves: int) -> Target:
    limit = 0.4 if batch and batch[0] > 1024 else (0.25 if leaves >= 50 else 0.2)
    text = f"ours / torchrl ≤ {limit}"
    if batch and batch[0] > 1024:
        text += ", ours ≤ 3 × floor"
    return Target(text, lambda v: v["ours"] <= limit * v["torchrl"])


def measure(
    quick: bool,
    device: str = "cpu",
    rows: tuple = ROWS,
    steps: int | None = None,
    repeats: int | None = None,
) -> tuple[list[Row], list[str]]:
    """The rows (µs per step, ours vs torchrl) and a section with each row's memory floor."""
    steps = steps or (10 if quick else 300)
    repeats = repeats or (1 if quick else 5)
    bandwidth = copy_bandwidth(device, repeats=2 if quick else 7)
    stacks = _stacks()
    out: list[Row] = []
    section = [
        f"### 7. Scale rollout: distance to the memory floor ({device}, {steps} steps)",
        "",
        f"`copy_` bandwidth measured in this run: {bandwidth / 1e9:.1f} GB/s "
        f"({COPY_BYTES // 2**20} MiB buffers). Floor = bytes recorded per step ÷ that bandwidth.",
        "",
        "| batch, leaves | bytes/step | floor µs | ours µs | torchrl µs | ours / torchrl "
        "| ours / floor |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for batch, leaves in rows:
        envs = {name: cls(leaves, batch, device=device) for name, cls in stacks.items()}
        nbytes = recorded_bytes(envs["ours"].rollout(2, break_when_any_done=False))
        runs = {name: functools.partial(_run, env, steps, device) for name, env in envs.items()}
        values = {k: v * 1e6 for k, v in median_per_step(runs, steps, repeats, device).items()}
        floor = nbytes / bandwidth * 1e6
        ours, theirs = values["ours"], values.get("torchrl")
        target = _target(batch, leaves) if theirs is not None else None
        notes = {"ours": f"floor {floor:.3g}"}
        out.append(Row(f"{CASE}, {_label(batch, leaves)}", "µs/step", values, notes, target))
        ratio = f"{ours / theirs:.2f}" if theirs else ""
        section.append(
            f"| {batch}, {leaves} | {nbytes:,} | {floor:.3g} | {ours:.1f} | "
            f"{theirs or float('nan'):.1f} | {ratio} | {ours / floor:.1f} |"
        )
        del envs
    slopes = leaf_cost(steps, repeats, device)
    section += [
        "",
        "Cost of each stack's own path per leaf and step (null envs returning prebuilt "
        "tensors, batch (), 1 vs 50 leaves; target ≤ 2 µs): "
        + ", ".join(f"{name} {value:.2f} µs" for name, value in slopes.items()),
    ]
    return out, [*section, ""]


# (batch, row) of the switch-over sweep: one float32 observation leaf [*batch, row]
SWEEP = tuple(
    (batch, row)
    for row in (3, 8, 16, 64, 256)
    for batch in ((), (16,), (64,), (256,), (1024,), (4096,))
) + (((), 1024), ((), 4096), ((), 16384), ((16384,), 3))


def switch_over(steps: int = 300, repeats: int = 5, sweep: tuple = SWEEP) -> list[str]:
    """Lists vs buffers for the observation leaf of each (batch, row), every other leaf in
    lists: the measurement behind ``rlcore._recording``'s ``ROW_MIN_BYTES`` and
    ``STEP_MIN_BYTES`` (CPU, thread time)."""
    import rlcore._recording as recording

    cls = _stacks()["ours"]
    default = recording.buffered
    lines = [
        "| batch | row | obs bytes/step | row bytes | lists µs | buffers µs | buffers / lists "
        "| default |",
        "|---|---:|---:|---:|---:|---:|---:|---|",
    ]

    def run(env: Any, choose: Callable) -> None:
        recording.buffered = choose
        env.rollout(steps, break_when_any_done=False)

    try:
        for batch, row in sweep:
            env = cls(1, batch, row=row)
            shape = torch.Size((*batch, row))
            runs = {
                "lists": functools.partial(run, env, lambda value, dims: False),
                "buffers": functools.partial(
                    run, env, lambda value, dims, shape=shape: value.shape == shape
                ),
            }
            values = median_per_step(runs, steps, repeats, "cpu")
            lists, buffers = values["lists"] * 1e6, values["buffers"] * 1e6
            chosen = "buffers" if default(torch.zeros(shape), len(batch)) else "lists"
            lines.append(
                f"| {batch} | {row} | {shape.numel() * 4:,} | {row * 4} | {lists:.1f} | "
                f"{buffers:.1f} | {buffers / lists:.2f} | {chosen} |"
            )
    finally:
        recording.buffered = default
    return lines


def _parse_rows(text: str) -> tuple:
    rows = []
    for item in text.split(";"):
        batch, leaves = item.rsplit(",", 1)
        batch = batch.strip().strip("()").strip(",")
        rows.append((tuple(int(b) for b in batch.split(",") if b.strip()), int(leaves)))
    return tuple(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="torch device of the envs (e.g. cuda)")
    parser.add_argument("--steps", type=int, default=None, help="rollout length (default 300)")
    parser.add_argument("--repeats", type=int, default=None, help="interleaved rounds (5)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 10 steps, 1 round")
    parser.add_argument(
        "--rows", default=None, help='"batch,leaves" items separated by ";", e.g. "16384,1;(),50"'
    )
    parser.add_argument(
        "--switch-over",
        action="store_true",
        help="measure lists vs buffers per leaf shape instead (the recording switch-over)",
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.switch_over:
        print("\n".join(switch_over(args.steps or 300, args.repeats or 5)))
        return
    rows = _parse_rows(args.rows) if args.rows else ROWS
    _, section = measure(args.quick, args.device, rows, args.steps, args.repeats)
    print("\n".join(section))


if __name__ == "__main__":
    main()

"""A probe for ``ab_trees.py``: the general rollout path's rows of cases 1 and 7, ours only.

The envs of ``run.py``'s case 1 (the counting env, batch () and (64,)) and case 7 (the scale
env: 1 leaf at batch () and (64,), 10 and 50 leaves at batch ()), and the scale env whose
``_step`` returns prebuilt tensors (``null``: the stack's own cost per step, nothing else).
Each row: the best µs per step (thread CPU time) of ``repeats`` rollouts, printed as
``<row> <value>``.

    python benchmarks/general_path.py
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable

import bench_rlcore
import bench_scale
import torch

STEPS, REPEATS = 2000, 7


def best_us(rollout: Callable[[], object], steps: int = STEPS, repeats: int = REPEATS) -> float:
    """The lowest thread CPU time of ``repeats`` calls of ``rollout``, in µs per step."""
    rollout()  # warm-up: caches, allocator
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        rollout()
        best = min(best, time.thread_time() - start)
    return best / steps * 1e6


def main() -> None:
    import rlcore
    import rlspecs

    torch.set_num_threads(1)
    counting = bench_rlcore.make_counting_env(rlcore.EnvBase, rlspecs)
    for batch in ((), (64,)):
        rollout = functools.partial(counting(batch_size=batch).rollout, STEPS)
        print(f"1. counting env, batch {batch} {best_us(rollout):.2f}")
    scale = bench_scale.make_scale_env(rlcore.EnvBase, rlspecs)
    null = bench_scale.make_scale_env(rlcore.EnvBase, rlspecs, null=True)
    rows = [(scale, (), 1), (scale, (64,), 1), (scale, (), 10), (scale, (), 50), (null, (), 1)]
    for cls, batch, leaves in rows:
        rollout = functools.partial(cls(leaves, batch).rollout, STEPS, break_when_any_done=False)
        label = "7. scale" if cls is scale else "null env"
        value = best_us(rollout)
        print(f"{label}, batch {batch}, {leaves} leaves {value:.2f}")


if __name__ == "__main__":
    main()

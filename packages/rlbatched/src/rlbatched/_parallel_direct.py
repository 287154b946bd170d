"""ParallelEnv without buffers (``use_buffers=False``): tensordicts through the workers' pipes.

No shared memory is laid out. A step sends each sub-env that steps its row of the input
(command ``"step_td"``) and stacks the tensordicts they return, densely where they stack, else
lazily: sub-envs whose data change shape between steps (dynamic specs) go through. A reset does
the same (``"reset_td"``); a sub-env not reset gives zeros of what a reset returns under the
caller's entries for it, as in ``SerialEnv``. The rows a ``"_step"`` mask leaves out give
``rlcore.placeholder_next`` of their input. Inputs are checked as in ``SerialEnv``.
"""

from __future__ import annotations

from typing import Any

from tensordict import TensorDictBase

from rlcore import placeholder_next
from rlcore.step_inputs import ACTION, STATE

from ._batched_base import _parts, move

__all__ = ["DirectStepsMixin"]


class DirectStepsMixin:
    """``ParallelEnv``'s steps and resets without buffers (see the module docstring)."""

    def _to_env(self, td: TensorDictBase, index: int) -> TensorDictBase:
        """``td`` detached (the pipe takes no graph), on sub-env ``index``'s device."""
        td = td.detach()
        device = self._metas[index].device
        if device is not None and td.device != device:
            return move(td, device, self.non_blocking)
        return td

    def _to_out(self, td: TensorDictBase) -> TensorDictBase:
        if self.device is not None and td.device != self.device:
            return move(td, self.device, self.non_blocking)
        return td

    def _step_direct(self, tensordict: TensorDictBase, rows: list[int] | None) -> TensorDictBase:
        """Step the sub-envs ``rows`` (None: all) on their rows of ``tensordict``."""
        self._check_inputs(tensordict, "step", (ACTION, STATE))
        parts = _parts(tensordict)
        indices = range(self.num_workers) if rows is None else rows
        payloads = {index: self._to_env(parts[index], index) for index in indices}
        outs = dict(zip(payloads, self._pool.request("step", "step_td", payloads=payloads)))
        if rows is not None:
            placeholder = placeholder_next(self, tensordict)
            for index in range(self.num_workers):
                if index not in outs:
                    outs[index] = placeholder[index]
        return self._stack([self._to_out(outs[index]) for index in range(self.num_workers)])

    def _reset_direct(
        self, tensordict: TensorDictBase | None, needs: list[bool], kwargs: dict[str, Any]
    ) -> TensorDictBase:
        """Reset the sub-envs flagged in ``needs``; the others give zeros under the caller's
        entries."""
        parts: list = [None] * self.num_workers
        if tensordict is not None:
            self._check_inputs(tensordict, "reset", (ACTION, STATE))
            parts = _parts(tensordict)
        payloads = {}
        for index, need in enumerate(needs):
            if need:
                part = parts[index]
                payloads[index] = (None if part is None else self._to_env(part, index), kwargs)
        outs = dict(zip(payloads, self._pool.request("reset", "reset_td", payloads=payloads)))
        rows = []
        for index in range(self.num_workers):
            out = outs.get(index)
            if out is None:
                out = self._metas[index].reset_zeros()
                if parts[index] is not None:
                    keys = self._reset_output_keys(index)
                    out.update(parts[index].select(*keys, strict=False))
            rows.append(self._to_out(out))
        return self._stack(rows)

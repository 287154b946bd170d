"""`ExpandAs`: an entry expanded to the right to the shape of a reference entry."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key
from tensordict.utils import expand_as_right

from rlspecs import Composite, TensorSpec

from ._base import MISSING_KEY_ERROR, Transform, _get, _spec_keys

__all__ = ["ExpandAs"]

NOT_IN_SPECS_ERROR = "Key {key} was not found in output specs."
_GROUPS = ("full_observation_spec", "full_reward_spec", "full_done_spec")


class ExpandAs(Transform):
    """Expands `in_key` to the right (trailing dims added, then broadcast) to `ref_key`'s shape.

    E.g. an env-level `done` expanded to a per-agent reward's shape. The spec of `out_key`
    joins the group of `in_key` (the observations, when a done entry is written elsewhere).

    Args:
        in_key: the entry to expand.
        ref_key: the entry whose shape is the target.
        out_key: where to write the result (default: `in_key`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"done": torch.ones(2, 1, dtype=torch.bool),
        ...                  "agents": {"reward": torch.zeros(2, 3, 1)}}, [2])
        >>> ExpandAs("done", ("agents", "reward"), out_key="agent_done")(td)["agent_done"].shape
        torch.Size([2, 3, 1])
    """

    def __init__(
        self, in_key: NestedKey, ref_key: NestedKey, out_key: NestedKey | None = None
    ) -> None:
        out_key = in_key if out_key is None else out_key
        super().__init__(in_keys=[in_key], out_keys=[out_key])
        self.in_key = unravel_key(in_key)
        self.ref_key = unravel_key(ref_key)
        self.out_key = unravel_key(out_key)
        self._ref_shape: torch.Size | None = None

    def _require(self, tensordict: TensorDictBase, key: NestedKey) -> torch.Tensor | None:
        value = _get(tensordict, key)
        if value is None and not self.missing_tolerance:
            raise KeyError(
                MISSING_KEY_ERROR.format(
                    cls="ExpandAs", key=key, keys=sorted(map(str, tensordict.keys(True)))
                )
            )
        return value

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        ref = self._require(next_tensordict, self.ref_key)
        if ref is None:
            return next_tensordict
        value = self._require(next_tensordict, self.in_key)
        if value is None:
            return next_tensordict
        next_tensordict.set(self.out_key, expand_as_right(value, ref))
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        value = _get(tensordict_reset, self.in_key)
        if value is None:
            return tensordict_reset
        ref = _get(tensordict_reset, self.ref_key)
        if ref is None and self._ref_shape is not None:
            # the reference (a reward, say) is not part of a reset: its spec gives the shape
            ref = torch.empty(self._ref_shape, dtype=value.dtype, device=value.device)
        tensordict_reset.set(self.out_key, value if ref is None else expand_as_right(value, ref))
        return tensordict_reset

    @staticmethod
    def _find(output_spec: Composite, key: NestedKey) -> tuple[str, TensorSpec]:
        for group in _GROUPS:
            if group in output_spec.keys() and key in _spec_keys(output_spec[group]):
                return group, output_spec[group][key]
        raise KeyError(NOT_IN_SPECS_ERROR.format(key=key))

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        _, ref_spec = self._find(output_spec, self.ref_key)
        group, in_spec = self._find(output_spec, self.in_key)
        if group == "full_done_spec" and self.out_key != self.in_key:
            group = "full_observation_spec"
        while len(in_spec.shape) < len(ref_spec.shape):
            in_spec = in_spec.unsqueeze(-1)
        output_spec[group][self.out_key] = in_spec.expand(ref_spec.shape)
        self._ref_shape = ref_spec.shape
        return output_spec

    def __repr__(self) -> str:
        return f"ExpandAs(in_key={self.in_key}, ref_key={self.ref_key}, out_key={self.out_key})"

"""`Timer`: the wall time of each env step, each policy call and each reset."""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch
from tensordict import NestedKey, TensorDictBase

from rlspecs import Composite, TensorSpec, Unbounded

from ._base import Transform

__all__ = ["Timer"]

OUT_KEYS_ERROR = "Expected three out_keys. Got out_keys={out_keys}."
FORWARD_NOT_IMPLEMENTED = "class {} cannot be executed without a parent environment."


def _set_expanded(tensordict: TensorDictBase, key: NestedKey, seconds: float) -> None:
    """Write `seconds` at `key`, expanded to the batch size of the tensordict holding it."""
    if isinstance(key, tuple) and len(key) > 1:
        holder, leaf = tensordict.get(key[:-1]), key[-1]
    else:
        holder, leaf = tensordict, key[0] if isinstance(key, tuple) else key
    value = torch.tensor(seconds, dtype=torch.get_default_dtype(), device=tensordict.device)
    holder.set(leaf, value.expand(holder.batch_size).clone())


class Timer(Transform):
    """Measures, in seconds, how long each env step, each policy call and each reset took.

    Writes `"<time_key>_step"` (from the action's arrival to the step's output),
    `"<time_key>_policy"` (from the previous output to the next action's arrival) and
    `"<time_key>_reset"` (the reset's duration), each shaped like the env's batch. In a step's
    output, the reset time is 0; in a reset's output, the step and policy times are 0.

    Args:
        out_keys: the three keys (step, policy, reset), if not derived from `time_key`.
        time_key: the prefix of the keys (default `"time"`).

    Examples:
        >>> from rlmocks import CountingEnv
        >>> from rltransforms import TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=100), Timer())
        >>> r = env.rollout(3)
        >>> bool((r["next", "time_step"] > 0).all()), r["next", "time_reset"].tolist()
        (True, [0.0, 0.0, 0.0])
    """

    def __init__(self, out_keys: Sequence[NestedKey] | None = None, time_key: str = "time") -> None:
        if out_keys is None:
            out_keys = [f"{time_key}_step", f"{time_key}_policy", f"{time_key}_reset"]
        elif len(out_keys) != 3:
            raise TypeError(OUT_KEYS_ERROR.format(out_keys=out_keys))
        super().__init__([], out_keys)
        self.time_key = time_key
        self.time_step_key, self.time_policy_key, self.time_reset_key = self.out_keys
        self.last_inv_time: float | None = None
        self.last_call_time: float | None = None
        self.last_reset_time: float | None = None
        self._policy_time = 0.0

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        self.last_reset_time = self.last_inv_time = time.time()
        return tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        now = time.time()
        elapsed = 0.0 if self.last_reset_time is None else now - self.last_reset_time
        _set_expanded(tensordict_reset, self.time_reset_key, elapsed)
        _set_expanded(tensordict_reset, self.time_step_key, 0.0)
        _set_expanded(tensordict_reset, self.time_policy_key, 0.0)
        self.last_call_time = now
        return tensordict_reset

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        now = time.time()
        if self.last_call_time is not None:
            self._policy_time = now - self.last_call_time
            _set_expanded(tensordict, self.time_policy_key, self._policy_time)
        self.last_inv_time = now
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        now = time.time()
        if self.last_inv_time is not None:
            _set_expanded(next_tensordict, self.time_step_key, now - self.last_inv_time)
            _set_expanded(next_tensordict, self.time_reset_key, 0.0)
        self.last_call_time = now
        # the policy time measured when the action arrived (the base env got it in `_inv_call`)
        _set_expanded(next_tensordict, self.time_policy_key, self._policy_time)
        return next_tensordict

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if not isinstance(observation_spec, Composite):
            return observation_spec
        for key in self.out_keys:
            observation_spec[key] = Unbounded(
                shape=observation_spec.shape, device=observation_spec.device
            )
        return observation_spec

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Not available: the timer only runs within an env's steps and resets."""
        raise NotImplementedError(FORWARD_NOT_IMPLEMENTED.format(type(self).__name__))

    def __repr__(self) -> str:
        return f"Timer(out_keys={self.out_keys})"

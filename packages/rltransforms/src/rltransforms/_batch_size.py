"""Changing an env's batch size: `BatchSizeTransform`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import TensorDictBase

from rlspecs import Composite

from ._base import Transform

__all__ = ["BatchSizeTransform"]

ONE_OF_ERROR = "One and only one of batch_size OR reshape_fn must be provided."
EXPAND_ERROR = (
    "BatchSizeTransform: cannot expand the reset output of batch size {got} to batch_size "
    "{expected} (the base env's batch size must be expandable to it)"
)
STEP_BATCH_ERROR = (
    "BatchSizeTransform: the base env's step returned batch size {got}, expected {expected}; "
    "batch_size= suits a base env whose step follows the batch size of its input (a "
    "non-batch-locked env); use reshape_fn= to reshape a batch-locked env's batch"
)

ReshapeFn = Callable[[Any], Any]
ResetFunc = Callable[..., TensorDictBase]


class BatchSizeTransform(Transform):
    """Gives an env another batch size: a set one (`batch_size`) or a reshaped one (`reshape_fn`).

    Exactly one of the two is given:

    - `batch_size`: the env's new batch size, which the base env's batch size must be
      expandable to. Made for non-batch-locked (stateless) envs, whose step follows the batch
      size of its input: reset outputs are expanded to `batch_size` (copied, so that entries do
      not share memory), specs are expanded, and step outputs are returned as the base env
      makes them (they must have `batch_size`).
    - `reshape_fn`: a function applied to tensordicts, specs and a tensor of the base env's batch
      size (reshape, flatten, unflatten, squeeze or unsqueeze of the batch dims, e.g.
      `lambda data: data.reshape(1, 1)`). Step and reset outputs and specs go through it; the
      env's input is reshaped back to the base env's batch size before the base env sees it.

    `reset_func(tensordict, tensordict_reset)` (with `env=` the transformed env too when
    `env_kwarg=True`) may replace the reset output: it gets the reset input (or an empty
    tensordict) and the base env's reset output, and returns the new reset output, which is
    then expanded or reshaped as above.

    Args:
        batch_size: the new batch size (exclusive with `reshape_fn`).
        reshape_fn: a batch-size-changing function (exclusive with `batch_size`).
        reset_func: builds the reset output from the reset input and the base env's output.
        env_kwarg: whether `reset_func` takes the env as keyword argument `env`.

    Examples:
        >>> from rltransforms import TransformedEnv
        >>> env = TransformedEnv(base_env, BatchSizeTransform(reshape_fn=lambda d: d.reshape(1, 1)))
        >>> env.batch_size, env.observation_spec["observation"].shape
        (torch.Size([1, 1]), torch.Size([1, 1, 1]))
        >>> env.rollout(3).batch_size
        torch.Size([1, 1, 3])
    """

    def __init__(
        self,
        batch_size: Sequence[int] | torch.Size | None = None,
        reshape_fn: ReshapeFn | None = None,
        reset_func: ResetFunc | None = None,
        env_kwarg: bool = False,
    ) -> None:
        super().__init__()
        if (batch_size is None) == (reshape_fn is None):
            raise ValueError(ONE_OF_ERROR)
        self.batch_size = None if batch_size is None else torch.Size(batch_size)
        self.reshape_fn = reshape_fn
        self.reset_func = reset_func
        self.env_kwarg = env_kwarg

    @property
    def has_inverse(self) -> bool:
        # only a reshaped env's input is reshaped back for the base env
        return self.reshape_fn is not None

    def _parent_batch_size(self) -> torch.Size | None:
        parent = self.parent
        return None if parent is None else parent.batch_size

    # ------------------------------------------------------------------ data
    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.reshape_fn is not None:
            return self.reshape_fn(next_tensordict)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """`reshape_fn(tensordict)`, or `tensordict` itself with `batch_size` (as torchrl 0.4)."""
        return self._call(tensordict)

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        if self.batch_size is not None and next_tensordict.batch_size != self.batch_size:
            raise RuntimeError(
                STEP_BATCH_ERROR.format(
                    got=tuple(next_tensordict.batch_size), expected=tuple(self.batch_size)
                )
            )
        return self._call(next_tensordict)

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.reshape_fn is not None:
            batch_size = self._parent_batch_size()
            if batch_size is not None:
                return tensordict.reshape(batch_size)
        return tensordict

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        # a partial reset's "_reset" flags come with the env's batch size: the base env gets
        # them with its own
        if tensordict is None or self.reshape_fn is None:
            return tensordict
        return self._inv_call(tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        if self.reset_func is not None:
            if self.env_kwarg:
                tensordict_reset = self.reset_func(tensordict, tensordict_reset, env=self.container)
            else:
                tensordict_reset = self.reset_func(tensordict, tensordict_reset)
        if self.batch_size is None:
            return self.reshape_fn(tensordict_reset)
        if tensordict_reset.batch_size == self.batch_size:
            return tensordict_reset
        try:
            expanded = tensordict_reset.expand(self.batch_size)
        except RuntimeError as err:
            raise RuntimeError(
                EXPAND_ERROR.format(
                    got=tuple(tensordict_reset.batch_size), expected=tuple(self.batch_size)
                )
            ) from err
        # expanded entries share one storage: later in-place writes (a partial reset) need copies
        return expanded.clone()

    # ----------------------------------------------------------------- specs
    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        if self.batch_size is not None:
            return self.batch_size
        return self.reshape_fn(torch.zeros(batch_size, device="meta")).shape

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        if self.batch_size is not None:
            return output_spec.expand(self.batch_size)
        return self.reshape_fn(output_spec)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        if self.batch_size is not None:
            return input_spec.expand(self.batch_size)
        return self.reshape_fn(input_spec)

    def __repr__(self) -> str:
        how = f"batch_size={self.batch_size}" if self.reshape_fn is None else "reshape_fn"
        return f"BatchSizeTransform({how})"

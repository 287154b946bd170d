"""Action transforms: `DiscreteActionProjection` (a smaller discrete action space behind a larger
one) and `ActionMask` (the action spec follows a mask the env outputs)."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase
from torch import nn

from rlspecs import Composite, OneHot, TensorSpec

from ._base import Transform

__all__ = ["DiscreteActionProjection"]

PROJECTION_SIZE_ERROR = (
    "The `max_actions` int must be greater or equal to `num_actions_effective` "
    "(got max_actions={max_actions}, num_actions_effective={num_actions_effective})."
)
PROJECTION_SHAPE_ERROR = (
    "DiscreteActionProjection: action.shape[-1]={got} must match self.max_actions={expected} "
    "(the one-hot action the policy sends)."
)
PROJECTION_KEY_ERROR = (
    "DiscreteActionProjection: {key!r} not found in the action spec (keys: {keys})"
)


class DiscreteActionProjection(Transform):
    """Lets a policy with `max_actions` one-hot actions drive an env with `num_actions_effective`.

    Before the base env steps, an action index at or above `num_actions_effective` is replaced by
    a random valid one, and the one-hot action is cut to `num_actions_effective` entries; the
    action spec the outside sees is a `OneHot(max_actions)`. Called on a tensordict (a replay
    buffer sample, `include_forward=True`), the map goes the other way: an env action is widened
    to `max_actions` entries.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = DiscreteActionProjection(num_actions_effective=2, max_actions=3)
        >>> t.inv(TensorDict(action=torch.tensor([0, 1, 0])))["action"]
        tensor([0, 1])
    """

    def __init__(
        self,
        num_actions_effective: int,
        max_actions: int,
        action_key: NestedKey = "action",
        include_forward: bool = True,
    ) -> None:
        if max_actions < num_actions_effective:
            raise RuntimeError(
                PROJECTION_SIZE_ERROR.format(
                    max_actions=max_actions, num_actions_effective=num_actions_effective
                )
            )
        super().__init__(in_keys=[action_key] if include_forward else [], in_keys_inv=[action_key])
        self.num_actions_effective = num_actions_effective
        self.max_actions = max_actions

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        # env outputs hold no action to widen: the caller's action is left as sent
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Widen the env actions at in_keys to `max_actions` one-hot entries (stored data)."""
        return super()._call(tensordict)

    def _apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        index = action.long().argmax(-1)
        return nn.functional.one_hot(index, self.max_actions).to(action.dtype)

    def _inv_apply_transform(self, action: torch.Tensor) -> torch.Tensor:
        if action.shape[-1] != self.max_actions:
            raise RuntimeError(
                PROJECTION_SHAPE_ERROR.format(got=action.shape[-1], expected=self.max_actions)
            )
        index = action.long().argmax(-1)
        invalid = index >= self.num_actions_effective
        if invalid.any():
            index = index.masked_scatter(
                invalid,
                torch.randint(
                    self.num_actions_effective, (int(invalid.sum()),), device=index.device
                ),
            )
        return nn.functional.one_hot(index, self.num_actions_effective).to(action.dtype)

    def _wide_spec(self, spec: TensorSpec) -> OneHot:
        return OneHot(
            self.max_actions,
            shape=(*spec.shape[:-1], self.max_actions),
            dtype=spec.dtype,
            device=spec.device,
        )

    def transform_input_spec(self, input_spec: TensorSpec) -> TensorSpec:
        if not isinstance(input_spec, Composite):
            return self._wide_spec(input_spec)
        action_spec = input_spec["full_action_spec"]
        key = self.in_keys_inv[0]
        if key not in action_spec.keys(True, True):
            keys = list(action_spec.keys(True, True))
            raise KeyError(PROJECTION_KEY_ERROR.format(key=key, keys=keys))
        action_spec[key] = self._wide_spec(action_spec[key])
        return input_spec

    def __repr__(self) -> str:
        return (
            f"DiscreteActionProjection(num_actions_effective={self.num_actions_effective}, "
            f"max_actions={self.max_actions}, in_keys_inv={self.in_keys_inv})"
        )

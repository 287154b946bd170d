"""Partial-reset plumbing shared by the stateful transforms: which reset key, which sub-envs."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

MANY_RESET_KEYS_ERROR = (
    "{cls}: the env has several reset keys {keys}; pass reset_key= to say which one to follow"
)


class ResetKeyMixin:
    """A `reset_key` property: the one given, else the parent env's only reset key.

    Without a parent (a transform called on a tensordict) the root `"_reset"` is used.
    """

    @property
    def reset_key(self) -> NestedKey:
        """The reset entry read at `_reset` to know which sub-envs restart."""
        reset_key = self.__dict__.get("_reset_key")
        if reset_key is not None:
            return reset_key
        parent = self.parent
        if parent is None:
            return "_reset"
        reset_keys = parent.reset_keys  # cached by the env
        if len(reset_keys) > 1:
            raise RuntimeError(
                MANY_RESET_KEYS_ERROR.format(cls=type(self).__name__, keys=reset_keys)
            )
        return reset_keys[0] if reset_keys else "_reset"

    @reset_key.setter
    def reset_key(self, value: NestedKey | None) -> None:
        self.__dict__["_reset_key"] = None if value is None else unravel_key(value)


def get_reset(reset_key: NestedKey, tensordict: TensorDictBase) -> torch.Tensor:
    """The reset mask over the batch dims of the node holding `reset_key` (all True if absent).

    Extra trailing dims of the mask (e.g. the `(*batch, 1)` shape of a done flag) are reduced
    with `any`.
    """
    node = tensordict
    if isinstance(reset_key, tuple) and len(reset_key) > 1:
        inner = tensordict.get(reset_key[:-1], None)
        if isinstance(inner, TensorDictBase):
            node = inner
    reset = tensordict.get(reset_key, None)
    if reset is None:
        return torch.ones(node.batch_size, dtype=torch.bool, device=node.device)
    if reset.ndim > node.batch_dims:
        reset = reset.flatten(node.batch_dims, -1).any(-1)
    return reset


def expand_right(mask: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """`mask` (over the leading dims of `target`) viewed with trailing singleton dims."""
    return mask.reshape(*mask.shape, *(1,) * (target.ndim - mask.ndim))

"""``Compose``: several transforms run as one, in order (their inverses in reverse)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rlspecs import Composite

from ._base import Transform, as_transform

if TYPE_CHECKING:
    from rlspecs import TensorSpec

    from ._transformed_env import TransformedEnv

__all__ = ["Compose", "members"]

INSERT_INDEX_ERROR = "Compose.insert: index expected to be between [-{n}, {n}], got index={index}"


class Compose(Transform):
    """A chain of transforms applied in order (inverse transforms in reverse order).

    Members may be transforms or callables (tensordict -> tensordict). A Compose supports
    `len`, iteration, indexing (a slice gives a new Compose of copies), `append` and `insert`.

    Examples:
        >>> from rltransforms import RewardSum, StepCounter
        >>> t = Compose(RewardSum(), StepCounter(max_steps=10))
        >>> len(t), type(t[1]).__name__
        (2, 'StepCounter')
    """

    def __init__(self, *transforms: Transform | Callable[[TensorDictBase], TensorDictBase]) -> None:
        super().__init__()
        if len(transforms) == 1 and isinstance(transforms[0], (list, tuple)):
            transforms = tuple(transforms[0])
        transforms = [as_transform(t, "Compose") for t in transforms]
        for transform in transforms:
            transform.set_container(self)
        self.transforms = nn.ModuleList(transforms)

    @property
    def has_inverse(self) -> bool:
        return any(t.has_inverse for t in self.transforms)

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        for transform in self.transforms:
            next_tensordict = transform._call(next_tensordict)
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Call each member on `tensordict` in turn (their `forward`, as outside an env)."""
        for transform in self.transforms:
            tensordict = transform(tensordict)
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for transform in self.transforms:
            next_tensordict = transform._step(tensordict, next_tensordict)
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        for transform in self.transforms:
            tensordict_reset = transform._reset(tensordict, tensordict_reset)
        return tensordict_reset

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        for transform in reversed(self.transforms):
            tensordict = transform._inv_call(tensordict)
        return tensordict

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        for transform in reversed(self.transforms):
            tensordict = transform._reset_env_preprocess(tensordict)
        return tensordict

    def _post_step_mdp_hooks(
        self, tensordict: TensorDictBase, tensordict_: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        for transform in self.transforms:
            tensordict, tensordict_ = transform._post_step_mdp_hooks(tensordict, tensordict_)
        return tensordict, tensordict_

    @property
    def has_post_step_mdp_hooks(self) -> bool:
        overridden = type(self)._post_step_mdp_hooks is not Compose._post_step_mdp_hooks
        return overridden or any(t.has_post_step_mdp_hooks for t in self.transforms)

    def transform_fake_tensordict(self, fake_tensordict: TensorDictBase) -> TensorDictBase:
        for transform in self.transforms:
            fake_tensordict = transform.transform_fake_tensordict(fake_tensordict)
        return fake_tensordict

    def _check_batched_worker_compat(self) -> None:
        for transform in self.transforms:
            transform._check_batched_worker_compat()

    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        for transform in self.transforms:
            device = transform.transform_env_device(device)
        return device

    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        for transform in self.transforms:
            batch_size = transform.transform_env_batch_size(batch_size)
        return batch_size

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        for transform in self.transforms:
            output_spec = transform.transform_output_spec(output_spec)
        return output_spec

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        # the base env's input spec passes the members in order, as its output spec does
        for transform in self.transforms:
            input_spec = transform.transform_input_spec(input_spec)
        return input_spec

    def _chain(self, name: str, spec: TensorSpec) -> TensorSpec:
        for transform in self.transforms:
            spec = getattr(transform, name)(spec)
        return spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        return self._chain("transform_observation_spec", observation_spec)

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        return self._chain("transform_reward_spec", reward_spec)

    def transform_done_spec(self, done_spec: TensorSpec) -> TensorSpec:
        return self._chain("transform_done_spec", done_spec)

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        return self._chain("transform_action_spec", action_spec)

    def transform_state_spec(self, state_spec: TensorSpec) -> TensorSpec:
        return self._chain("transform_state_spec", state_spec)

    def __getitem__(self, index: int | slice | Sequence[int]) -> Transform:
        if isinstance(index, int):
            return self.transforms[index]
        if isinstance(index, slice):
            members = self.transforms[index]
        else:
            members = [self.transforms[i] for i in index]
        return Compose(*[t.clone() for t in members])

    def __len__(self) -> int:
        return len(self.transforms)

    def __iter__(self) -> Iterator[Transform]:
        return iter(self.transforms)

    def append(self, transform: Transform | Callable[[TensorDictBase], TensorDictBase]) -> None:
        """Add a transform at the end of the chain (a plain Compose adds its members)."""
        transform = as_transform(transform, "Compose.append")
        added = members(transform) if type(self) is type(transform) is Compose else [transform]
        for member in added:
            member.set_container(self)
            member.eval()
            self.transforms.append(member)
        self._on_transform_change()

    def insert(
        self, index: int, transform: Transform | Callable[[TensorDictBase], TensorDictBase]
    ) -> None:
        """Insert a transform at `index` (negative indices count from the end)."""
        transform = as_transform(transform, "Compose.insert")
        n = len(self.transforms)
        if abs(index) > n:
            raise ValueError(INSERT_INDEX_ERROR.format(n=n, index=index))
        transform.set_container(self)
        transform.eval()
        self.transforms.insert(index if index >= 0 else index + n, transform)
        self._on_transform_change()

    def to(self, *args: Any, **kwargs: Any) -> Compose:
        """Move every member with its own `to` (some transforms move more than buffers)."""
        for transform in self.transforms:
            transform.to(*args, **kwargs)
        return super().to(*args, **kwargs)

    def _on_transform_change(self) -> None:
        for transform in self.transforms:
            transform.empty_cache()
        super()._on_transform_change()

    def empty_cache(self) -> None:
        super().empty_cache()
        for transform in self.transforms:
            transform.empty_cache()

    def set_missing_tolerance(self, mode: bool = False) -> None:
        super().set_missing_tolerance(mode)
        for transform in self.transforms:
            transform.set_missing_tolerance(mode)

    def clone(self) -> Compose:
        return Compose(*[t.clone() for t in self.transforms])

    def init(self, tensordict: TensorDictBase) -> None:
        """Call each member's `init`."""
        for transform in self.transforms:
            transform.init(tensordict)

    def dump(self, **kwargs: Any) -> None:
        """Call each member's `dump` with `kwargs`."""
        for transform in self.transforms:
            transform.dump(**kwargs)

    def close(self) -> None:
        for transform in self.transforms:
            transform.close()

    def _parent_view(self, transform: Transform) -> TransformedEnv | None:
        """The env made of this Compose's parent plus the transforms before `transform`."""
        outer = self.parent
        if outer is None:
            return None
        index = next(i for i, t in enumerate(self.transforms) if t is transform)
        if index == 0:
            return outer
        previous = Compose(*[t.clone() for t in self.transforms[:index]])
        return outer._with_transform(previous)

    def __repr__(self) -> str:
        inner = ",\n    ".join(repr(t) for t in self.transforms)
        return f"Compose(\n    {inner})" if inner else "Compose()"


def members(transform: Transform) -> list[Transform]:
    """The transforms of a plain Compose (detached from it), or `[transform]`."""
    if type(transform) is not Compose:
        return [transform]
    members = list(transform)
    for member in members:
        member.reset_parent()
    return members

"""`AutoResetTransform` and `AutoResetEnv`: envs that reset themselves when an episode ends.

Such an env returns, at the step that ends an episode, the first observation of the next one.
The transform moves that observation out of the transition (replacing it by a fill value) and
hands it back as the result of the `reset` that `rollout`/`step_and_maybe_reset` calls next;
`AutoResetEnv` makes that reset a pass-through instead of resetting the base env again.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, unravel_key

from ._base import Transform, _group_of, _key_tuple, done_roots
from ._resets import expand_right
from ._transformed_env import TransformedEnv

__all__ = ["AutoResetEnv", "AutoResetTransform"]

CONTAINER_ERROR = (
    "AutoResetTransform must be held by an AutoResetEnv, got {container}; build the env with "
    "AutoResetEnv(base_env, AutoResetTransform()) or pass auto_reset=True to the env's "
    "constructor"
)
FORWARD_ERROR = (
    "AutoResetTransform only works inside an AutoResetEnv (it moves the first observation of "
    "each new episode from the step to the following reset); it cannot be called on a "
    "tensordict"
)
HETEROGENEOUS_ERROR = (
    "AutoResetTransform: observation {key!r} has shape {shape} in the observation spec: its "
    "shape differs across a stacked group (heterogeneous agents), which is not supported; "
    "give the agents observations of one shape"
)
INSERT_ERROR = (
    "Cannot insert a transform in an AutoResetEnv: its AutoResetTransform must see the base "
    "env's outputs first; append transforms instead, or wrap it in a TransformedEnv"
)


@dataclass
class _Group:
    """One reset level: its done leaves and the observation leaves that restart with it."""

    root: tuple[str, ...]
    done_keys: list[NestedKey]
    obs_keys: list[NestedKey]


class AutoResetTransform(Transform):
    """Hides the observations an auto-resetting env returns when an episode ends.

    At a step that ends an episode (a done flag set), the base env has already restarted and
    its observations are the first of the next episode. For the sub-envs (or agents) that are
    done, this transform keeps those observations aside and writes a fill value in their place
    under `"next"` (NaN for floats, -1 for signed ints, False for bools by default). The reset
    that follows (`maybe_reset` in `rollout(break_when_any_done=False)` or
    `step_and_maybe_reset`) gets them back as its output instead of resetting the base env
    again. Must sit in an `AutoResetEnv`; `EnvType(..., auto_reset=True)` builds one.

    Each done level (the root, or a nested group such as `("agents", "done")`) fills the
    observations under it with its own mask; observations outside every done level are left
    as the env returned them. Observations whose shape differs across a stacked group
    (heterogeneous agents) are not supported (NotImplementedError at the first step).

    The base env must accept a first `reset()` (with or without effect) and reset itself in
    `_step` when done; its `_reset` is only called again for resets without `"_reset"` flags
    (a fresh start, which drops the kept observations).

    Keyword Args:
        replace: False leaves the observations as the env returned them (no fill, whatever the
            fill arguments); default True.
        fill_float: the fill value of floating point observations ("nan" for NaN; None: no
            fill).
        fill_int: the fill value of signed integer observations (None: no fill).
        fill_bool: the fill value of other (boolean, unsigned) observations (None: no fill).

    Examples:
        >>> import torch
        >>> class SelfResetting(MyEnv):  # restarts by itself when its episode ends
        ...     def _step(self, td):
        ...         out = super()._step(td)
        ...         if out["done"].any():
        ...             self.count.zero_()
        ...             out["observation"] = self.count.clone()
        ...         return out
        >>> env = AutoResetEnv(SelfResetting(), AutoResetTransform())
        >>> env.base_env.max_steps = 1  # done when the count passes 1
        >>> def push(td):
        ...     return td.set("action", torch.ones(1))
        >>> r = env.rollout(4, push, break_when_any_done=False)
        >>> r["next", "done"].squeeze(-1)
        tensor([False,  True, False,  True])
        >>> r["next", "observation"].squeeze(-1)  # done steps: int observations filled with -1
        tensor([ 1, -1,  1, -1], dtype=torch.int32)
        >>> r["observation"].squeeze(-1)  # the resets after done steps start new episodes
        tensor([0, 1, 0, 1], dtype=torch.int32)
    """

    def __init__(
        self,
        *,
        replace: bool | None = None,
        fill_float: float | str | None = "nan",
        fill_int: int | None = -1,
        fill_bool: bool | None = False,
    ) -> None:
        super().__init__()
        if replace is False:
            fill_float = fill_int = fill_bool = None
        if fill_float == "nan":
            fill_float = float("nan")
        self.fill_float = fill_float
        self.fill_int = fill_int
        self.fill_bool = fill_bool
        self.__dict__["_groups"] = None
        # observations kept from the last step that ended an episode: root -> (mask, values)
        self.__dict__["_saved"] = None
        self._validated = False

    # ------------------------------------------------------------------ plumbing
    def _validate_container(self) -> None:
        if self._validated:
            return
        container = self.container
        if not isinstance(container, AutoResetEnv):
            name = "no env" if container is None else f"a {type(container).__name__}"
            raise RuntimeError(CONTAINER_ERROR.format(container=name))
        self._validated = True

    def set_container(self, container: Any) -> None:
        super().set_container(container)
        self._validated = False

    def reset_parent(self) -> None:
        super().reset_parent()
        self._validated = False

    def empty_cache(self) -> None:
        super().empty_cache()
        self.__dict__["_groups"] = None

    def clone(self) -> AutoResetTransform:
        copied = super().clone()
        copied.__dict__.update(_groups=None, _saved=None)
        copied._validated = False
        return copied

    def _plan(self) -> list[_Group]:
        """The reset levels of the parent env, computed once per parent."""
        groups = self.__dict__["_groups"]
        if groups is None:
            parent = self.parent
            done_spec = parent.full_done_spec
            roots = done_roots(done_spec)
            groups = [_Group(root, [], []) for root in roots]
            by_root = {group.root: group for group in groups}
            for key in done_spec.keys(True, True):
                key = unravel_key(key)
                root = _key_tuple(key)[:-1]
                if root in by_root:  # (a level nested in a reset level follows that level)
                    by_root[root].done_keys.append(key)
            observation_spec = parent.full_observation_spec
            for key in observation_spec.keys(True, True):
                key = unravel_key(key)
                group = by_root.get(_group_of(key, roots))
                if group is not None:
                    shape = observation_spec[key].shape
                    if any(dim < 0 for dim in shape):
                        raise NotImplementedError(
                            HETEROGENEOUS_ERROR.format(key=key, shape=tuple(shape))
                        )
                    group.obs_keys.append(key)
            self.__dict__["_groups"] = groups
        return groups

    def _fill(self, value: torch.Tensor) -> float | int | bool | None:
        if value.dtype.is_floating_point:
            return self.fill_float
        if value.dtype.is_signed:
            return self.fill_int
        return self.fill_bool

    # ------------------------------------------------------------------ data path
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        self._validate_container()
        saved = None  # what an earlier step kept is stale once the env steps again
        for group in self._plan():
            node = next_tensordict.get(group.root) if group.root else next_tensordict
            mask = None
            for key in group.done_keys:
                done = next_tensordict.get(key, None)
                if done is not None:
                    mask = done if mask is None else mask | done
            if mask is None:
                continue
            if mask.ndim > node.batch_dims:
                mask = mask.flatten(node.batch_dims, -1).any(-1)
            if not bool(mask.any()):
                continue
            values = {}
            for key in group.obs_keys:
                value = next_tensordict.get(key, None)
                if value is None:
                    continue
                # a copy: the env may write its next step into the same storage
                values[key] = value.clone()
                fill = self._fill(value)
                if fill is not None:
                    filled = torch.where(
                        expand_right(mask, value), torch.full_like(value, fill), value
                    )
                    next_tensordict.set(key, filled)
            if saved is None:
                saved = {}
            saved[group.root] = (mask, values)
        self.__dict__["_saved"] = saved
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        self._validate_container()
        saved = self.__dict__["_saved"]
        self.__dict__["_saved"] = None
        if saved is None or not _flags_reset(self.container.base_env, tensordict):
            # nothing kept, or a fresh start of the base env: the kept values are stale
            return tensordict_reset
        for root, (mask, values) in saved.items():
            if root:
                node = tensordict_reset.get(root, None)
                if node is None:
                    node = TensorDict(batch_size=mask.shape, device=tensordict_reset.device)
                    tensordict_reset.set(root, node)
                    node = tensordict_reset.get(root)
                for key, value in values.items():
                    node.set(_key_tuple(key)[len(root) :], value)
            else:
                for key, value in values.items():
                    tensordict_reset.set(key, value)
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Raises: the transform needs the env's steps and resets (see the class docstring)."""
        raise RuntimeError(FORWARD_ERROR)

    def __repr__(self) -> str:
        return (
            f"AutoResetTransform(fill_float={self.fill_float}, fill_int={self.fill_int}, "
            f"fill_bool={self.fill_bool})"
        )


def _flags_reset(base_env: Any, tensordict: TensorDictBase | None) -> bool:
    """Whether the reset input holds one of `base_env`'s `"_reset"` flags."""
    if tensordict is None:
        return False
    return any(tensordict.get(key, None) is not None for key in base_env.reset_keys)


class AutoResetEnv(TransformedEnv):
    """A `TransformedEnv` around an env that resets itself when done (see `AutoResetTransform`).

    A reset whose input holds `"_reset"` flags (the one `rollout` and `step_and_maybe_reset`
    call after a done step) does not reset the base env: it returns the observations the
    `AutoResetTransform` kept from that step. A reset without flags resets the base env.
    Transforms can be appended; inserting one raises.

    Examples:
        >>> env = AutoResetEnv(base_env, AutoResetTransform())
        >>> env.reset()["observation"]
        tensor([0], dtype=torch.int32)
    """

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        if tensordict is not None:
            # a shallow selection: the transforms must not touch the caller's entries
            tensordict = tensordict.select(*self.reset_keys, *self.state_keys, strict=False)
        transform = self.transform
        tensordict = transform._reset_env_preprocess(tensordict)
        base_env = self.base_env
        if _flags_reset(base_env, tensordict):
            # the base env already restarted inside its step: nothing to reset there
            tensordict_reset = tensordict.exclude(*base_env.reset_keys)
        else:
            tensordict_reset = base_env._reset(tensordict, **kwargs)
        base_env._complete_done(tensordict_reset)
        if tensordict is None:
            tensordict = tensordict_reset.empty()
        return transform._reset(tensordict, tensordict_reset)

    def insert_transform(self, index: int, transform: Any) -> TransformedEnv:
        """Raises: the `AutoResetTransform` must stay first (append transforms instead)."""
        raise RuntimeError(INSERT_ERROR)

"""`Transform`, the base of every env transform, and `Compose`, a chain of transforms."""

from __future__ import annotations

import copy
import functools
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, unravel_key
from tensordict.nn import dispatch
from torch import nn

from rlspecs import Composite
from rlspecs.private_apis import td_entries, td_set_str

from ._hooks import TransformHooks

if TYPE_CHECKING:
    from collections.abc import Callable

    from rlspecs import TensorSpec

    from ._transformed_env import TransformedEnv

__all__ = ["ObservationTransform", "Transform", "as_transform"]

MISSING_KEY_ERROR = "{cls}: in_key {key!r} not found in the tensordict (keys: {keys})"
NOT_A_TRANSFORM_ERROR = (
    "{where} expected a Transform or a callable (tensordict -> tensordict), "
    "got an object of type {type}"
)
PARENT_SET_ERROR = "{cls} already belongs to an env or a Compose; use transform.clone() to get a copy without parent"
UNREGISTERED_KEY_ERROR = (
    "{cls} writes {key!r} but no spec declares it (spec keys: {keys}); "
    "register it in transform_output_spec/transform_observation_spec"
)


def _as_key_list(value: Sequence[NestedKey] | NestedKey | None) -> list[NestedKey] | None:
    """Normalise one key or a sequence of keys into a list of unravelled keys."""
    if value is None:
        return None
    if isinstance(value, (str, tuple)):
        value = [value]
    return [unravel_key(key) for key in value]


def _key_tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)


def _join(root: tuple[str, ...], leaf: str) -> NestedKey:
    """The key `leaf` under the nesting `root` (a plain string at the root)."""
    return (*root, leaf) if root else leaf


def done_roots(full_done_spec: Composite) -> list[tuple[str, ...]]:
    """The nesting levels holding done flags, outermost first, nested levels under a root dropped.

    Each root is one reset group: `"_reset"` lives at `(*root, "_reset")`.
    """
    roots: list[tuple[str, ...]] = []
    for key in full_done_spec.keys(True, True):
        root = _key_tuple(key)[:-1]
        if root not in roots:
            roots.append(root)
    roots.sort(key=len)
    kept: list[tuple[str, ...]] = []
    for root in roots:
        if not any(root[: len(k)] == k for k in kept):
            kept.append(root)
    return kept


def _spec_keys(spec: Composite) -> set[NestedKey]:
    return {unravel_key(k) for k in spec.keys(True)}


def _expand_mask(mask: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Shape a reset mask like `target`: same numel → reshape, else right-expand the batch dims."""
    if mask.shape == target.shape:
        return mask
    if mask.numel() == target.numel():
        return mask.reshape(target.shape)
    while mask.ndim > 1 and mask.shape[-1] == 1:
        mask = mask.squeeze(-1)
    while mask.ndim < target.ndim:
        mask = mask.unsqueeze(-1)
    return mask.expand_as(target)


def _group_of(key: NestedKey, roots: Sequence[tuple[str, ...]]) -> tuple[str, ...]:
    """The deepest done root that contains `key` (the root level `()` when none does)."""
    path = _key_tuple(key)[:-1]
    best: tuple[str, ...] = ()
    for root in roots:
        if path[: len(root)] == root and len(root) >= len(best):
            best = root
    return best


def _get(tensordict: TensorDictBase, key: NestedKey) -> Any:
    """`tensordict.get(key, None)`, without tensordict's per-call dispatch for plain root keys."""
    if type(tensordict) is TensorDict and type(key) is str:
        return td_entries(tensordict).get(key)
    return tensordict.get(key, None)


def _set(tensordict: TensorDictBase, key: NestedKey, value: torch.Tensor) -> None:
    """`tensordict.set(key, value)` for values derived from the same tensordict (no re-validation)."""
    if type(tensordict) is TensorDict and type(key) is str:
        td_set_str(tensordict, key, value)
    else:
        tensordict.set(key, value)


_SPEC_HOOKS = (
    "transform_output_spec",
    "transform_input_spec",
    "transform_observation_spec",
    "transform_reward_spec",
    "transform_done_spec",
    "transform_action_spec",
    "transform_state_spec",
)


def _unlocked(spec: Any) -> Any:
    """`spec`, or an unlocked copy of it when it is an env's own (a locked or observed Composite)."""
    if isinstance(spec, Composite) and (spec.is_locked or spec.observers):
        return spec.clone().unlock_()
    return spec


def _guard_spec_hook(hook: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """Give `hook` a writable spec: called on an env's locked spec, it works on a copy."""

    @functools.wraps(hook)
    def guarded(self: Transform, spec: Any) -> Any:
        return hook(self, _unlocked(spec))

    guarded._spec_guarded = True  # type: ignore[attr-defined]
    return guarded


class Transform(TransformHooks, nn.Module):
    """Base class of env transforms: rewrites what an env outputs and what it receives.

    Subclasses override the narrowest hook that fits:

    - `_apply_transform(tensor)` / `_inv_apply_transform(tensor)` for a per-key tensor map
      (applied from `in_keys` to `out_keys`, and from `out_keys_inv` to `in_keys_inv` before
      the base env steps: `in_keys_inv` name the entries as the base env sees them);
    - `_call(next_td)` for a map of the whole step output, `_step(td, next_td)` when the data at
      time t is needed too, `_reset(td, td_reset)` for stateful transforms (set the class
      attribute `_call_on_reset = True` to run `_call` on reset outputs, skipping missing keys);
    - `transform_observation_spec` / `transform_reward_spec` / `transform_done_spec` /
      `transform_action_spec` / `transform_state_spec` (or the whole `transform_output_spec` /
      `transform_input_spec`) so that the specs describe the transformed data. The per-group
      methods accept a `Composite` or a single leaf spec (then transformed as the in_key's spec).

    Outside an env, `t(td)` (`forward`) applies the transform to a tensordict (stored data, a
    replay-buffer sample, a step of a model in `nn.Sequential`) and `t.inv(td)` the inverse to a
    shallow copy. `TransformedEnv` transforms the specs once (output spec first, then input spec)
    and caches them; per step only `_inv_call`, `_step` and `_reset` run.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class AddOne(Transform):
        ...     def _apply_transform(self, obs):
        ...         return obs + 1
        >>> AddOne(in_keys=["obs"])(TensorDict(obs=torch.zeros(2)))["obs"]
        tensor([1., 1.])
    """

    _call_on_reset = False  # observation-like transforms also rewrite the reset output
    invertible = False  # torchrl's flag: whether `_inv_apply_transform` is a real inverse

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # spec hooks edit their argument in place; one called by hand on an env's (locked)
        # spec gets a copy instead, as torchrl's did
        super().__init_subclass__(**kwargs)
        for name in _SPEC_HOOKS:
            hook = cls.__dict__.get(name)
            if hook is not None and not getattr(hook, "_spec_guarded", False):
                setattr(cls, name, _guard_spec_hook(hook))

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__()
        # set through __dict__ so that nn.Module never registers the env as a submodule
        self.__dict__["_container"] = None
        self.__dict__["_parent"] = None
        self._missing_tolerance = False
        self.in_keys = in_keys
        self.out_keys = out_keys
        self.in_keys_inv = in_keys_inv
        self.out_keys_inv = out_keys_inv

    # ----------------------------------------------------------------- keys
    @property
    def in_keys(self) -> list[NestedKey]:
        """Keys read by the forward transform."""
        return self.__dict__.get("_in_keys") or []

    @in_keys.setter
    def in_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        self.__dict__["_in_keys"] = _as_key_list(value)

    @property
    def out_keys(self) -> list[NestedKey]:
        """Keys written by the forward transform (default: the in_keys)."""
        out_keys = self.__dict__.get("_out_keys")
        return list(self.in_keys) if out_keys is None else out_keys

    @out_keys.setter
    def out_keys(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        self.__dict__["_out_keys"] = _as_key_list(value)

    @property
    def in_keys_inv(self) -> list[NestedKey]:
        """Keys as the base env expects them, written by the inverse transform."""
        return self.__dict__.get("_in_keys_inv") or []

    @in_keys_inv.setter
    def in_keys_inv(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        self.__dict__["_in_keys_inv"] = _as_key_list(value)

    @property
    def out_keys_inv(self) -> list[NestedKey]:
        """Keys as the outside sees them, read by the inverse transform (default: in_keys_inv)."""
        out_keys_inv = self.__dict__.get("_out_keys_inv")
        return list(self.in_keys_inv) if out_keys_inv is None else out_keys_inv

    @out_keys_inv.setter
    def out_keys_inv(self, value: Sequence[NestedKey] | NestedKey | None) -> None:
        self.__dict__["_out_keys_inv"] = _as_key_list(value)

    @property
    def has_inverse(self) -> bool:
        """Whether the transform rewrites the env input (TransformedEnv skips a copy otherwise)."""
        return bool(self.in_keys_inv) or type(self)._inv_call is not Transform._inv_call

    # ------------------------------------------------------------ data path
    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        """Map one tensor read at an in_key to the value written at the matching out_key."""
        raise NotImplementedError(
            f"{type(self).__name__} defines neither _apply_transform nor _call"
        )

    def _inv_apply_transform(self, state: torch.Tensor) -> torch.Tensor:
        """Map one tensor read at an out_key_inv to the value the base env gets (identity)."""
        return state

    def _missing(self, key: NestedKey, tensordict: TensorDictBase) -> None:
        if not self._missing_tolerance:
            raise KeyError(
                MISSING_KEY_ERROR.format(
                    cls=type(self).__name__, key=key, keys=sorted(map(str, tensordict.keys(True)))
                )
            )

    def _map_entries(
        self,
        source: TensorDictBase,
        target: TensorDictBase,
        src_keys: Sequence[NestedKey],
        dst_keys: Sequence[NestedKey],
        fn: Callable[[torch.Tensor], torch.Tensor],
    ) -> TensorDictBase:
        """Write `fn(source[src])` at `target[dst]` for each key pair (missing keys: `_missing`)."""
        for src, dst in zip(src_keys, dst_keys):
            value = _get(source, src)
            if value is None:
                self._missing(src, source)
            else:
                target.set(dst, fn(value))
        return target

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Apply `_apply_transform` from each in_key to its out_key."""
        return self._map_entries(
            next_tensordict, next_tensordict, self.in_keys, self.out_keys, self._apply_transform
        )

    def _inv_call(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Apply `_inv_apply_transform` from each out_key_inv to its in_key_inv."""
        return self._map_entries(
            tensordict, tensordict, self.out_keys_inv, self.in_keys_inv, self._inv_apply_transform
        )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        """Transform the step output `next_tensordict`; `tensordict` is the input at time t."""
        return self._call(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        """Transform the reset output; `tensordict` holds the reset input (`_reset` flags, state)."""
        if self._call_on_reset:
            with self._tolerate_missing():
                tensordict_reset = self._call(tensordict_reset)
        return tensordict_reset

    def _reset_env_preprocess(self, tensordict: TensorDictBase | None) -> TensorDictBase | None:
        """Rewrite the reset input before the base env sees it (identity by default)."""
        return tensordict

    @dispatch(source="in_keys", dest="out_keys")
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Apply the transform to a tensordict outside an env (stored data, a model's input).

        Tensors may be passed as keyword arguments named after the in_keys instead
        (`t(observation=x)`, nested keys joined by `_`); the out_keys' values come back.
        """
        return self._call(tensordict)

    @dispatch(source="out_keys_inv", dest="in_keys_inv")
    def inv(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Apply the inverse transform to a shallow copy of `tensordict` (the input is untouched).

        Tensors may be passed as keyword arguments named after the out_keys_inv instead
        (`t.inv(action=x)`); the in_keys_inv's values come back.
        """
        return self._inv_call(tensordict.clone(False))

    def init(self, tensordict: TensorDictBase) -> None:
        """torchrl's hook to prepare a transform from a first tensordict (nothing by default)."""

    def dump(self, **kwargs: Any) -> None:
        """torchrl's hook to write out what a transform gathered, e.g. a recorder's video.

        Nothing by default; `Compose` calls each member's.
        """

    def reset(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Reset a stateful transform for the sub-envs flagged in `tensordict` (all when unflagged).

        The reset output is `tensordict` itself: the transform writes its reset entries there.
        """
        return self._reset(tensordict, tensordict)

    @contextmanager
    def _tolerate_missing(self) -> Iterator[None]:
        previous = self._missing_tolerance
        self._missing_tolerance = True
        try:
            yield
        finally:
            self._missing_tolerance = previous

    def set_missing_tolerance(self, mode: bool = False) -> None:
        """When True, a missing in_key is skipped instead of raising KeyError."""
        self._missing_tolerance = mode

    @property
    def missing_tolerance(self) -> bool:
        """Whether missing in_keys are skipped."""
        return self._missing_tolerance

    # ---------------------------------------------------------------- specs
    def transform_env_device(self, device: torch.device | None) -> torch.device | None:
        """The device of the transformed env, given the base env's (unchanged by default)."""
        return device

    def transform_env_batch_size(self, batch_size: torch.Size) -> torch.Size:
        """The batch size of the transformed env, given the base env's (unchanged by default)."""
        return batch_size

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        """Transform the output spec in place (observation, reward and done groups) and return it."""
        output_spec = _unlocked(output_spec)
        if "full_observation_spec" in output_spec.keys():
            output_spec["full_observation_spec"] = self.transform_observation_spec(
                output_spec["full_observation_spec"]
            )
        if "full_reward_spec" in output_spec.keys():
            output_spec["full_reward_spec"] = self.transform_reward_spec(
                output_spec["full_reward_spec"]
            )
        if "full_done_spec" in output_spec.keys():
            output_spec["full_done_spec"] = self.transform_done_spec(output_spec["full_done_spec"])
        if self.container_ref is not None:
            # standalone calls (a spec built by hand) need not hold every key
            self._check_registered(output_spec)
        return output_spec

    def _check_registered(self, output_spec: Composite) -> None:
        known = {unravel_key(k[1:]) for k in output_spec.keys(True) if isinstance(k, tuple)}
        for key in set(self.out_keys) - set(self.in_keys):
            if key not in known:
                raise KeyError(
                    UNREGISTERED_KEY_ERROR.format(
                        cls=type(self).__name__, key=key, keys=sorted(map(str, known))
                    )
                )

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        """Transform the input spec in place (action and state groups) and return it."""
        input_spec = _unlocked(input_spec)
        keys = input_spec.keys()
        if "full_state_spec" not in keys or input_spec["full_state_spec"] is None:
            input_spec["full_state_spec"] = Composite(
                shape=input_spec.shape, device=input_spec.device
            )
        input_spec["full_state_spec"] = self.transform_state_spec(input_spec["full_state_spec"])
        if "full_action_spec" in keys:
            input_spec["full_action_spec"] = self.transform_action_spec(
                input_spec["full_action_spec"]
            )
        return input_spec

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        """The observation spec after the transform (identity by default)."""
        return observation_spec

    def transform_reward_spec(self, reward_spec: TensorSpec) -> TensorSpec:
        """The reward spec after the transform (identity by default)."""
        return reward_spec

    def transform_done_spec(self, done_spec: TensorSpec) -> TensorSpec:
        """The done spec after the transform (identity by default)."""
        return done_spec

    def transform_action_spec(self, action_spec: TensorSpec) -> TensorSpec:
        """The action spec after the transform (identity by default)."""
        return action_spec

    def transform_state_spec(self, state_spec: TensorSpec) -> TensorSpec:
        """The state spec after the transform (identity by default)."""
        return state_spec

    def _map_specs(
        self,
        spec: TensorSpec,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey],
        fn: Callable[[TensorSpec], TensorSpec],
    ) -> TensorSpec:
        """Write `fn(spec[in_key])` at each out_key whose in_key is in `spec`.

        A leaf `spec` (not a Composite) is taken as the spec of the in_key: `fn(spec)` is returned.
        """
        if not isinstance(spec, Composite):
            return fn(spec)
        keys = _spec_keys(spec)
        for in_key, out_key in zip(in_keys, out_keys):
            if in_key in keys:
                spec[out_key] = fn(spec[in_key])
        return spec

    def _map_input_specs(
        self, input_spec: TensorSpec, fn: Callable[[TensorSpec], TensorSpec]
    ) -> TensorSpec:
        """The input spec as the outside sees it: `fn(spec[in_key_inv])` at each out_key_inv.

        `fn` maps a base env's input spec to the outside's (the inverse of what
        `_inv_apply_transform` does to the data). A renamed entry leaves its old name. A leaf
        `input_spec` is taken as the spec of the in_key_inv: `fn(input_spec)` is returned.
        """
        if not isinstance(input_spec, Composite):
            return fn(input_spec)
        for group in ("full_action_spec", "full_state_spec"):
            spec = input_spec[group] if group in input_spec.keys() else None
            if spec is None:
                continue
            keys = _spec_keys(spec)
            for in_key, out_key in zip(self.in_keys_inv, self.out_keys_inv):
                if in_key in keys:
                    spec[out_key] = fn(spec[in_key])
                    if out_key != in_key:
                        del spec[in_key]
        return input_spec

    # ------------------------------------------------------ parent / container
    def set_container(self, container: Transform | TransformedEnv | None) -> None:
        """Attach the transform to an env or a Compose (a transform has one container)."""
        if container is not None and self.container_ref is not None:
            raise AttributeError(PARENT_SET_ERROR.format(cls=type(self).__name__))
        self.__dict__["_container"] = weakref.ref(container) if container is not None else None
        self.__dict__["_parent"] = None

    @property
    def container_ref(self) -> Transform | TransformedEnv | None:
        """The direct container (env or Compose), or None."""
        ref = self.__dict__.get("_container")
        return ref() if ref is not None else None

    def reset_parent(self) -> None:
        """Detach the transform from its container."""
        self.__dict__["_container"] = None
        self.__dict__["_parent"] = None

    @property
    def container(self) -> TransformedEnv | None:
        """The env that holds this transform (through any Compose), or None."""
        container = self.container_ref
        while isinstance(container, Transform):
            container = container.container_ref
        return container

    @property
    def parent(self) -> TransformedEnv | None:
        """The env as this transform sees it: the base env plus the transforms before this one.

        Built on first access and cached until the container changes.
        """
        parent = self.__dict__.get("_parent")
        if parent is None:
            container = self.container_ref
            if container is None:
                return None
            # the container (a Compose, or a TransformedEnv) knows what precedes this transform
            parent = container._parent_view(self)
            self.__dict__["_parent"] = parent
        return parent

    def empty_cache(self) -> None:
        """Forget the cached parent env."""
        self.__dict__["_parent"] = None

    def _on_transform_change(self) -> None:
        """Tell the container chain that specs must be rebuilt."""
        self.empty_cache()
        container = self.container_ref
        if container is not None:
            container._on_transform_change()

    def clone(self) -> Transform:
        """A copy of the transform without container (buffers and parameters are shared)."""
        copied = copy.copy(self)
        state = dict(self.__dict__)
        for name in ("_parameters", "_buffers", "_modules"):
            state[name] = copy.copy(state[name])
        state["_container"] = None
        state["_parent"] = None
        copied.__dict__.update(state)
        return copied

    def close(self) -> None:
        """Release resources held by the transform (none by default)."""

    def to(self, *args: Any, **kwargs: Any) -> Transform:
        """Move buffers, forgetting the cached parent (it may live on another device)."""
        self.empty_cache()
        return super().to(*args, **kwargs)

    def __getstate__(self) -> dict[str, Any]:
        # the container travels with the transform (pickle handles the env <-> transform cycle)
        state = self.__dict__.copy()
        state["_container"] = self.container_ref
        state["_parent"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        container = state["_container"]
        state["_container"] = weakref.ref(container) if container is not None else None
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(in_keys={self.in_keys}, out_keys={self.out_keys})"


class ObservationTransform(Transform):
    """Base of observation-wise transforms: in_keys default to `["observation", "pixels"]`.

    The transform also rewrites reset outputs (missing in_keys skipped there).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> class Double(ObservationTransform):
        ...     def _apply_transform(self, obs):
        ...         return obs * 2
        >>> Double()(TensorDict(observation=torch.ones(1), pixels=torch.ones(1)))["pixels"]
        tensor([2.])
    """

    _call_on_reset = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        in_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
        out_keys_inv: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(
            in_keys=["observation", "pixels"] if in_keys is None else in_keys,
            out_keys=out_keys,
            in_keys_inv=in_keys_inv,
            out_keys_inv=out_keys_inv,
        )


class _CallableTransform(Transform):
    """A plain callable (tensordict -> tensordict) run on step and reset outputs."""

    def __init__(self, func: Callable[[TensorDictBase], TensorDictBase]) -> None:
        super().__init__()
        self.func = func

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        return self.func(next_tensordict)

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self.func(tensordict_reset)

    def __repr__(self) -> str:
        return f"_CallableTransform({self.func!r})"


def as_transform(value: Any, where: str) -> Transform:
    """`value` itself if it is a Transform, a `_CallableTransform` for a callable, else ValueError."""
    if isinstance(value, Transform):
        return value
    if callable(value):
        return _CallableTransform(value)
    raise ValueError(NOT_A_TRANSFORM_ERROR.format(where=where, type=type(value).__name__))

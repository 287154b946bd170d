"""`TransformedEnv`: an env seen through a transform."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from tensordict import TensorDictBase
from torch import nn

from rlcore import EnvBase, placeholder_next

from ._auto_unwrap import auto_unwrap_transformed_env
from ._base import Transform, as_transform
from ._compose import Compose
from ._compose import members as compose_members

__all__ = ["TransformedEnv"]

SPEC_ATTRIBUTE_ERROR = (
    "Could not get {attr} of the TransformedEnv because an internal error was raised; "
    "call env.transform.transform_output_spec(env.base_env.output_spec.clone()) "
    "(or transform_input_spec) to see it"
)
NO_BASE_ENV_ERROR = "{cls} has no base env yet, cannot access {attr!r}"

# Looked up on the TransformedEnv itself, never forwarded: a spec or key property that fails
# must surface its own error rather than silently answering with the base env's value.
_NEVER_FORWARDED = frozenset(
    {
        "action_spec",
        "done_spec",
        "full_action_spec",
        "full_done_spec",
        "full_observation_spec",
        "full_reward_spec",
        "full_state_spec",
        "input_spec",
        "observation_spec",
        "output_spec",
        "reward_spec",
        "state_spec",
        "action_keys",
        "action_key",
        "reward_keys",
        "reward_key",
        "done_keys",
        "done_key",
        "reset_keys",
        "done_keys_groups",
        "observation_keys",
        "state_keys",
        "_parameters",
        "_buffers",
        "_modules",
        "base_env",
        "transform",
    }
)


ENV_ARGUMENT = (
    "TransformedEnv takes the env to transform as base_env (or env, torchrl 0.4's name): "
    "exactly one of them, got base_env={base_env!r} and env={env!r}."
)
_PARTIAL_STEP = "_step"  # current torchrl's partial-step entry (rlcore's step contract)
NO_PARTIAL_STEPS = (
    "{cls} cannot step some of its rows only: its transform ({transform}) asks rows {rows} to "
    "step and the others to skip (a '_step' mask), and the base env {base} is batch-locked and "
    "does not take partial steps. Batched envs (SerialEnv, ParallelEnv) and envs that are not "
    "batch-locked do."
)


def _row_mask(mask: torch.Tensor | bool, batch_size: torch.Size) -> torch.Tensor:
    """A ``"_step"`` mask as one flag per row of the batch (trailing dims reduced)."""
    mask = torch.as_tensor(mask, dtype=torch.bool)
    if mask.shape == batch_size:
        return mask
    if mask.numel() == batch_size.numel():
        return mask.reshape(batch_size)
    if mask.numel() == 1:
        return mask.reshape(()).expand(batch_size)
    return mask.reshape(*batch_size, -1).any(-1)


def _resolve_auto_unwrap(auto_unwrap: bool | None) -> bool:
    """The argument, else the switch (whose default, unset, is torchrl 0.4's nesting)."""
    if auto_unwrap is not None:
        return bool(auto_unwrap)
    return auto_unwrap_transformed_env()


class TransformedEnv(EnvBase):
    """An env whose outputs go through `transform` and whose inputs go through its inverse.

    Specs are the base env's specs passed through the transform, computed once and recomputed
    when the transform changes (`append_transform`, `insert_transform`, `Compose.append`,
    setting `env.transform`, `to`) and when the base env's specs change (a setter, or an edit
    inside them such as `env.base_env.observation_spec["x"] = spec`; if the transform refuses
    the edited specs, their next use raises). Edits made to this env's own specs last until
    they are recomputed. The device and batch size are
    the base env's as the
    transform sees them (`Transform.transform_env_device` / `transform_env_batch_size`).
    Unknown attributes are looked up on the base env; `set_seed`, `close` and `to` are
    forwarded to it.

    Wrapping a `TransformedEnv` in a `TransformedEnv` nests it, as torchrl 0.4 did (the inner
    env is this env's ``base_env``). Current torchrl unwraps instead: the result holds the
    inner base env and `Compose(*inner transforms (cloned), *transforms)` (both envs of exactly
    that class: subclasses never unwrap). ``auto_unwrap=True`` asks for that, and so does the
    switch `set_auto_unwrap_transformed_env(True)` (or ``AUTO_UNWRAP_TRANSFORMED_ENV=1``);
    ``auto_unwrap`` wins over the switch. Current torchrl, left unset, unwraps and warns; we
    keep the seed era's nesting then, silently.

    A ``"_step"`` mask written by the transform's inverse (`ConditionalSkip`, `MultiAction`)
    steps only the rows it flags, as current torchrl: when no row steps, the base env and the
    transforms' ``_step`` are skipped and the output is the input's observations and done
    flags again with a zero reward (`rlcore.placeholder_next`); when some do, an env that is
    not batch-locked steps those rows alone (the others get that placeholder), a batch-locked
    base env that takes partial steps (``_supports_partial_steps``: batched envs) gets the
    mask, and any other base env raises `NotImplementedError`.

    Args:
        base_env: the env to transform (any `EnvBase`, batched envs included).
        transform: a `Transform`, or a callable (tensordict -> tensordict) run on step and reset
            outputs; None gives an empty `Compose`.
        cache_specs: torchrl 0.4's flag (default True). When False the specs are recomputed
            from the base env and the transform on every read, so that a transform edited in
            place (its keys, its parameters) shows in the specs at once; slower.
        auto_unwrap: whether to flatten a wrapped `TransformedEnv`; None (default) follows
            `auto_unwrap_transformed_env()` (False, torchrl 0.4's nesting, when unset).
        device: if given, the base env is moved there first.
        env: torchrl 0.4's name of ``base_env`` (give one of the two).

    Examples:
        >>> from rltransforms import StepCounter, TransformedEnv
        >>> env = TransformedEnv(base_env, StepCounter(max_steps=3))
        >>> env.rollout(10)["next", "step_count"].squeeze(-1)
        tensor([1, 2, 3])
    """

    def __init__(
        self,
        base_env: EnvBase | None = None,
        transform: Transform | Callable[[TensorDictBase], TensorDictBase] | None = None,
        cache_specs: bool = True,
        *,
        auto_unwrap: bool | None = None,
        device: torch.device | str | None = None,
        env: EnvBase | None = None,
    ) -> None:
        if (base_env is None) == (env is None):
            raise TypeError(ENV_ARGUMENT.format(base_env=base_env, env=env))
        if base_env is None:
            base_env = env
        if device is not None:
            base_env = base_env.to(device)
        if transform is not None:
            transform = as_transform(transform, "TransformedEnv")
        # exact types: a subclass may add behaviour that unwrapping would lose
        if type(base_env) is TransformedEnv and type(self) is TransformedEnv:
            auto_unwrap = _resolve_auto_unwrap(auto_unwrap)
        else:
            auto_unwrap = False
        if auto_unwrap:
            members = compose_members(base_env.transform.clone())
            if transform is not None:
                members += compose_members(transform)
            transform = Compose(*members)
            base_env = base_env.base_env
        if transform is None:
            transform = Compose()
        super().__init__(
            device=base_env.device,
            batch_size=base_env.batch_size,
            run_type_checks=base_env._run_type_checks,
            allow_done_after_reset=base_env._allow_done_after_reset,
        )
        self._batch_locked = base_env.batch_locked
        self.__dict__["cache_specs"] = bool(cache_specs)
        self._set_base_env(base_env)
        self._set_transform(transform, build=True)

    # ------------------------------------------------------------ wiring
    @property
    def base_env(self) -> EnvBase:
        """The wrapped env."""
        return self.__dict__["_base_env"]

    @property
    def transform(self) -> Transform:
        """The transform (a `Compose` when several were appended)."""
        return self.__dict__["_transform"]

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "transform":
            self._set_transform(value, build=True)
        elif name == "base_env":
            self._set_base_env(value)
            self._build_specs()
        else:
            super().__setattr__(name, value)

    def _set_base_env(self, env: EnvBase) -> None:
        previous = self.__dict__.get("_base_env")
        if previous is not None and previous is not env:
            previous._spec_remove_dependent(self)
        self._modules["base_env"] = env
        self.__dict__["_base_env"] = env
        env._spec_add_dependent(self)  # its spec changes make ours stale

    def _on_base_spec_change(self) -> None:
        """The base env's specs changed: rebuild ours now, so no step runs on the old ones.

        An edit may pass through states the transform refuses (a key renamed by two edits):
        then the specs stay stale and their next use rebuilds them again, raising if the
        base env's specs are still refused.
        """
        try:
            self._build_specs()
        except Exception:  # noqa: BLE001 - raised again by the next use of the specs
            self.transform.empty_cache()
            self.empty_cache()

    def _specs_need_rebuild(self) -> bool:
        state = self.__dict__
        if state.get("_building_specs"):  # a spec hook reading this env's specs meanwhile
            return False
        return state.get("_specs_stale") or not state.get("cache_specs", True)

    @property
    def output_spec(self) -> Any:
        """The base env's output spec through the transform (rebuilt after base spec changes)."""
        if self._specs_need_rebuild():
            self._build_specs()
        return EnvBase.output_spec.fget(self)

    output_spec = output_spec.setter(EnvBase.output_spec.fset)

    @property
    def input_spec(self) -> Any:
        """The base env's input spec through the transform (rebuilt after base spec changes)."""
        if self._specs_need_rebuild():
            self._build_specs()
        return EnvBase.input_spec.fget(self)

    input_spec = input_spec.setter(EnvBase.input_spec.fset)

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.base_env._spec_add_dependent(self)  # dependents are not pickled

    def _set_transform(self, transform: Transform, build: bool) -> None:
        transform = as_transform(transform, "TransformedEnv.transform")
        previous = self.__dict__.get("_transform")
        if previous is not None and previous.container_ref is self:
            previous.reset_parent()  # (not when it was just wrapped in the new Compose)
        transform = transform.to(self.base_env.device) if self.base_env.device else transform
        transform.set_container(self)
        transform.eval()
        self._modules["transform"] = transform
        self.__dict__["_transform"] = transform
        if build:
            self._build_specs()

    def _on_transform_change(self) -> None:
        self._build_specs()

    def _build_specs(self) -> None:
        """Pass the base env's specs through the transform (output first, then input)."""
        transform = self.transform
        transform.empty_cache()
        base_env = self.base_env
        state = self.__dict__
        state["_specs_stale"] = False  # (spec hooks may read this env's specs meanwhile)
        state["_building_specs"] = True
        state["_device"] = transform.transform_env_device(base_env.device)
        state["_batch_size"] = transform.transform_env_batch_size(base_env.batch_size)
        try:
            output_spec = base_env.output_spec.clone()
            output_spec.unlock_()
            output_spec = transform.transform_output_spec(output_spec)
            input_spec = base_env.input_spec.clone()
            input_spec.unlock_()
            input_spec = transform.transform_input_spec(input_spec)
            # stored as the transform made them (the spec setters would complete the done spec:
            # an ExcludeTransform("done") must stay without "done")
            self._spec_check_batch("output_spec", output_spec)
            self._spec_check_batch("input_spec", input_spec)
        except BaseException:
            state["_specs_stale"] = True  # still to rebuild: the next use raises again
            raise
        finally:
            state["_building_specs"] = False
        self._spec_store("_output_spec", output_spec)
        self._spec_store("_input_spec", input_spec)
        self.__dict__["_has_inverse"] = transform.has_inverse
        self.__dict__["_has_hooks"] = transform.has_post_step_mdp_hooks or (
            getattr(base_env, "_post_step_mdp_hooks", None) is not None
        )

    def append_transform(
        self, transform: Transform | Callable[[TensorDictBase], TensorDictBase]
    ) -> TransformedEnv:
        """Add `transform` after the current ones; specs are recomputed."""
        transform = as_transform(transform, "TransformedEnv.append_transform")
        current = self.transform
        if not isinstance(current, Compose):
            current.reset_parent()
            self._set_transform(Compose(current), build=False)
        self.transform.append(transform.to(self.device) if self.device else transform)
        return self

    def insert_transform(
        self, index: int, transform: Transform | Callable[[TensorDictBase], TensorDictBase]
    ) -> TransformedEnv:
        """Insert `transform` at `index` in the chain; specs are recomputed."""
        transform = as_transform(transform, "TransformedEnv.insert_transform")
        current = self.transform
        if not isinstance(current, Compose):
            current.reset_parent()
            self._set_transform(Compose(current), build=False)
        self.transform.insert(index, transform.to(self.device) if self.device else transform)
        return self

    # --------------------------------------------------------- data path
    @property
    def _supports_partial_steps(self) -> bool:
        # a "_step" mask goes through to the base env's _step: its own support decides
        return self.__dict__["_base_env"]._supports_partial_steps

    @property
    def _action_required(self) -> bool:
        # a base env stepped without an action (rlcore's step contract) is so when transformed
        return self.__dict__["_base_env"]._action_required

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        # the base env gets an inverted shallow copy; the transforms' `_step` gets the caller's
        # tensordict as it was (torchrl 0.4): an inverse never shows through to `_step` or to
        # the root of what `step` returns
        tensordict_in = tensordict
        if self.__dict__["_has_inverse"]:
            tensordict_in = self.transform._inv_call(tensordict.clone(False))
            if _PARTIAL_STEP in tensordict_in.keys():
                return self._step_rows(tensordict, tensordict_in)
        base_env = self.__dict__["_base_env"]
        next_tensordict = base_env._step(tensordict_in)
        base_env._complete_done(next_tensordict)
        return self.transform._step(tensordict, next_tensordict)

    def _step_rows(
        self, tensordict: TensorDictBase, tensordict_in: TensorDictBase
    ) -> TensorDictBase:
        """`_step` of an input whose inverse wrote a ``"_step"`` mask: step the rows it flags."""
        mask = _row_mask(tensordict_in.pop(_PARTIAL_STEP), tensordict_in.batch_size)
        base_env = self.__dict__["_base_env"]
        transform = self.transform
        if bool(mask.all()):
            next_tensordict = base_env._step(tensordict_in)
            base_env._complete_done(next_tensordict)
            return transform._step(tensordict, next_tensordict)
        if not bool(mask.any()):
            # nothing steps: neither the base env nor the transforms (as current torchrl)
            return placeholder_next(self, tensordict_in)
        if not self.batch_locked:
            stepped = base_env._step(tensordict_in[mask])
            base_env._complete_done(stepped)
            stepped = transform._step(tensordict[mask], stepped)
            next_tensordict = placeholder_next(self, tensordict_in)
            next_tensordict[mask] = stepped
            return next_tensordict
        if not base_env._supports_partial_steps:
            raise NotImplementedError(
                NO_PARTIAL_STEPS.format(
                    cls=type(self).__name__,
                    transform=type(transform).__name__,
                    rows=mask.nonzero().tolist(),
                    base=type(base_env).__name__,
                )
            )
        # a batched env reads the mask and fills the other rows itself
        tensordict_in.set(_PARTIAL_STEP, mask)
        next_tensordict = base_env._step(tensordict_in)
        base_env._complete_done(next_tensordict)
        return transform._step(tensordict, next_tensordict)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        if tensordict is not None:
            # a shallow selection: the transforms must not touch the caller's entries
            tensordict = tensordict.select(*self.reset_keys, *self.state_keys, strict=False)
        transform = self.transform
        tensordict = transform._reset_env_preprocess(tensordict)
        base_env = self.base_env
        tensordict_reset = base_env._reset(tensordict, **kwargs)
        base_env._complete_done(tensordict_reset)
        if tensordict is None:
            tensordict = tensordict_reset.empty()
        return transform._reset(tensordict, tensordict_reset)

    # ----------------------------------------------------- hooks of the transforms
    @property
    def _post_step_mdp_hooks(
        self,
    ) -> Callable[[TensorDictBase, TensorDictBase], tuple[TensorDictBase, TensorDictBase]] | None:
        """The transforms' post-``step_mdp`` hooks, then the base env's; None when none has one.

        Called as ``transition, root = env._post_step_mdp_hooks(transition, root)`` once
        `step_mdp` has built ``root`` from ``transition``, by this env's
        `step_and_maybe_reset` (a collector's loop). Current torchrl's ``rollout`` calls it too;
        rlcore's rollout does not yet, so `rollout` runs without it (its steps would otherwise
        differ: rlcore takes the last step with `step`, without `step_mdp`).
        """
        if self._specs_need_rebuild():
            self._build_specs()
        return self._run_post_step_mdp_hooks if self.__dict__.get("_has_hooks") else None

    def _run_post_step_mdp_hooks(
        self, tensordict: TensorDictBase, tensordict_: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        tensordict, tensordict_ = self.transform._post_step_mdp_hooks(tensordict, tensordict_)
        base_hooks = getattr(self.__dict__["_base_env"], "_post_step_mdp_hooks", None)
        if base_hooks is not None:
            tensordict, tensordict_ = base_hooks(tensordict, tensordict_)
        return tensordict, tensordict_

    def step_and_maybe_reset(
        self, tensordict: TensorDictBase
    ) -> tuple[TensorDictBase, TensorDictBase]:
        """`EnvBase.step_and_maybe_reset`, with the post-``step_mdp`` hooks of the transforms
        (`_post_step_mdp_hooks`) run between `step_mdp` and the reset of done sub-envs."""
        state = self.__dict__
        if state.get("_specs_stale"):
            self._build_specs()
        if not state.get("_has_hooks") or state.get("_in_rollout"):
            return super().step_and_maybe_reset(tensordict)
        device = state["_device"]
        if device is not None and tensordict.device != device:
            tensordict = tensordict.to(device)
        tensordict = self.step(tensordict)
        tensordict, root = self._run_post_step_mdp_hooks(tensordict, self._step_mdp(tensordict))
        return tensordict, self.maybe_reset(root)

    def rollout(self, max_steps: int, *args: Any, **kwargs: Any) -> TensorDictBase:
        """`EnvBase.rollout` (same arguments). The post-``step_mdp`` hooks do not run in it:
        rlcore's rollout steps the last step without `step_mdp`, so they would leave its steps
        with different entries."""
        state = self.__dict__
        if not state.get("_has_hooks"):
            return super().rollout(max_steps, *args, **kwargs)
        state["_in_rollout"] = state.get("_in_rollout", 0) + 1
        try:
            return super().rollout(max_steps, *args, **kwargs)
        finally:
            state["_in_rollout"] -= 1

    def fake_tensordict(self) -> TensorDictBase:
        """The fake transition built from the specs, then by `transform_fake_tensordict`."""
        return self.transform.transform_fake_tensordict(super().fake_tensordict())

    def _check_batched_worker_compat(self) -> None:
        """Raise if a transform of this env (or of a wrapped `TransformedEnv`) must not run in a
        batched env's worker (`NextObservationDelta`). For batched envs to call on their sub-envs
        when built, as torchrl's do (rlbatched does not call it yet)."""
        self.transform._check_batched_worker_compat()
        check = getattr(self.__dict__["_base_env"], "_check_batched_worker_compat", None)
        if check is not None:
            check()

    def _parent_view(self, transform: Transform) -> TransformedEnv:
        """What ``transform`` (this env's transform) sees: the base env, untransformed."""
        return TransformedEnv(self.base_env, auto_unwrap=False)

    def _with_transform(self, transform: Transform) -> TransformedEnv:
        """This env seen through ``transform`` too (a ``Compose`` member's parent)."""
        return TransformedEnv(self, transform, auto_unwrap=True)

    def _set_seed(self, seed: int | None) -> None:
        """Unused: `set_seed` is forwarded to the base env."""

    def set_seed(self, seed: int | None = None, static_seed: bool = False) -> int | None:
        """Seed the base env; returns the next seed."""
        return self.base_env.set_seed(seed, static_seed=static_seed)

    # ----------------------------------------------------------- plumbing
    @property
    def is_closed(self) -> bool:
        """Whether the base env is closed."""
        base_env = self.__dict__.get("_base_env")
        return True if base_env is None else base_env.is_closed

    @is_closed.setter
    def is_closed(self, value: bool) -> None:
        # the base env tracks its own state (a batched env starts its workers on reset)
        return

    def __del__(self) -> None:
        # the base env may be shared (a transform's parent env wraps the same base env)
        return

    def close(self, **kwargs: Any) -> None:
        """Close the base env and the transform."""
        self.base_env.close(**kwargs)
        self.transform.close()

    def to(self, device: torch.device | str) -> TransformedEnv:
        """Move the base env, the transform and the specs to `device`."""
        self._set_base_env(self.base_env.to(device))
        self.transform.to(device)
        self._build_specs()
        return self

    def train(self, mode: bool = True) -> TransformedEnv:
        """Put the transform in training (or eval) mode; the env itself has no mode."""
        self.transform.train(mode)
        return self

    def eval(self) -> TransformedEnv:
        """Put the transform in eval mode (`train(False)`)."""
        return self.train(False)

    def state_dict(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """The transform's state (buffers such as ObservationNorm's loc/scale)."""
        return self.transform.state_dict(*args, **kwargs)

    def load_state_dict(self, state_dict: dict[str, Any], **kwargs: Any) -> Any:
        return self.transform.load_state_dict(state_dict, **kwargs)

    def set_missing_tolerance(self, mode: bool = False) -> None:
        """When True, transforms skip missing in_keys instead of raising."""
        self.transform.set_missing_tolerance(mode)

    def __getattr__(self, name: str) -> Any:
        try:
            return nn.Module.__getattr__(self, name)
        except AttributeError as err:
            if name in _NEVER_FORWARDED:
                if name.endswith("_spec"):
                    raise AttributeError(SPEC_ATTRIBUTE_ERROR.format(attr=name)) from err
                raise
            if name.startswith("__"):
                raise
            base_env = self.__dict__.get("_base_env")
            if base_env is None:
                raise AttributeError(
                    NO_BASE_ENV_ERROR.format(cls=type(self).__name__, attr=name)
                ) from err
            return getattr(base_env, name)

    def __repr__(self) -> str:
        return f"TransformedEnv(\n    env={self.base_env},\n    transform={self.transform})"

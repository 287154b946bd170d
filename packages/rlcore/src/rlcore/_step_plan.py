"""The step contract compiled for one env: what its step, reset and rollout read from its specs.

``EnvBase`` runs every step through these, whatever the path (``step``, the rollout's stepper
path, the batched envs): the input rules (``rlcore.step_inputs``), the reward shapes and the
done levels the done rule completes (``rlcore._done_rule``), the key order of a step's and a
reset's entries (``rlcore._key_order``), the root/``"next"`` shift (``StepMDP``), the done
leaves that decide whether a root is done (the rollout's stop, ``maybe_reset``) and the checks
of a reset's done flags. Each is computed once from the specs and kept in the env's spec cache,
which every spec change empties: nothing walks a spec per step.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey

from rlcore._done_rule import complete_done, done_levels
from rlcore._key_order import in_order, root_order
from rlcore._resets import any_true, merge_reset, reduce_to_batch
from rlcore._step_mdp import StepMDP
from rlcore.step_inputs import ACTION, STATE, InputRules
from rlspecs import Composite
from rlspecs.private_apis import td_entries

__all__ = ["StepPlanMixin"]

_NO_DIMS = torch.Size(())

DONE_AFTER_PARTIAL_RESET = (
    "Env done entry {key!r} is True after reset where {reset_key!r} asked for a reset; _reset "
    "must clear it (or build the env with allow_done_after_reset=True)"
)
DONE_AFTER_RESET = (
    "The done entry {key!r} is (partially) True after a call to reset() in env {cls}; _reset "
    "must return done=False (or build the env with allow_done_after_reset=True)"
)
DTYPE_MISMATCH = "expected {name}.dtype to be {expected} but got {got} (key {key!r})"
SHAPE_MISMATCH = "expected {name}.shape to be {expected} but got {got} (key {key!r})"


class StepPlanMixin:
    """The cached plan of a step and the processing of its outputs (a mixin of ``EnvBase``).

    Examples:
        >>> env._next_order  # a step's "next" entries: observations, rewards, done flags
        ('observation', 'reward', 'done', 'terminated')
    """

    # An env that checks its input itself, as part of writing it somewhere (ParallelEnv, into
    # its workers' shared buffer, with the same rules), sets this False: one check per step.
    _checks_step_inputs = True
    # Whether a step without one of the action leaves raises (KeyError naming it) before
    # _step runs. An env that ignores its action and is stepped without one (torchrl's mocks
    # MockSerialEnv, MockBatchedLockedEnv) sets it False; the shapes and dtypes of the leaves
    # it is given are still checked.
    _action_required = True

    @property
    def _step_inputs(self) -> InputRules | bool:
        """The rules ``step`` checks its input with (``rlcore.step_inputs``), or False."""

        def compile_rules() -> InputRules | bool:
            if not self._checks_step_inputs:
                return False
            roles = {ACTION: self.full_action_spec, STATE: self.full_state_spec}
            free = not self._batch_locked and not self.batch_size
            return InputRules(
                roles,
                f"{type(self).__name__}.step",
                free_leading=free,
                require_actions=self._action_required,
            )

        return self._cache_get("step_inputs", compile_rules)

    @property
    def _done_levels(self) -> list:
        return self._cache_get("done_levels", lambda: done_levels(self.full_done_spec))

    @property
    def _reward_shapes(self) -> list:
        return self._cache_get(
            "reward_shapes",
            lambda: [(key, self.full_reward_spec[key].shape) for key in self.reward_keys],
        )

    @property
    def _next_order(self) -> tuple[str, ...]:
        """The order of a step's ``"next"`` entries (``rlcore._key_order``)."""
        order = self.__dict__["_cache"].get("next_order")
        if order is None:
            order = self._cache_get(
                "next_order",
                lambda: root_order(
                    self.full_observation_spec, self.full_reward_spec, self.full_done_spec
                ),
            )
        return order

    @property
    def _reset_order(self) -> tuple[str, ...]:
        """The order of a reset's entries (``rlcore._key_order``)."""
        return self._cache_get(
            "reset_order",
            lambda: root_order(
                self.full_observation_spec, self.full_done_spec, self.full_state_spec
            ),
        )

    @property
    def _step_mdp(self) -> StepMDP:
        return self._cache_get("step_mdp", lambda: StepMDP(self, exclude_action=False))

    @property
    def _any_done_keys(self) -> list:
        """Done leaves deciding whether a root is done: a level's leaves prevail over sub-levels.

        Within a level, ``done`` alone is read when present (it is ``terminated | truncated``).
        """
        return self._cache_get(
            "any_done_keys", lambda: _prevailing_done_keys(self.full_done_spec, ())
        )

    @property
    def _flat_done(self) -> bool:
        """True when every done leaf is at the root."""
        return self._cache_get("flat_done", lambda: all(isinstance(k, str) for k in self.done_keys))

    def _leading_dims(self, data: TensorDictBase) -> torch.Size:
        batch_size = self.batch_size
        if not batch_size:
            return data.batch_size
        return data.batch_size[: data.batch_dims - len(batch_size)]

    @property
    def _complete_step_keys(self) -> list | tuple:
        """``[(key, shape)]`` of every reward and done leaf when all sit at the root, else ``()``.

        A plain step output holding each of these with exactly that shape needs neither
        reward reshaping nor done completion (see ``_step_proc_data``). The cache would
        recompute a None on every call, hence the empty tuple.
        """

        def plan() -> list | tuple:
            levels = self._done_levels
            if any(level.prefix for level in levels) or any(
                type(key) is not str for key, _ in self._reward_shapes
            ):
                return ()
            keys = list(self._reward_shapes)
            for level in levels:
                keys.extend(zip(level.names, level.shapes))
            return keys

        return self._cache_get("complete_step_keys", plan)

    def _step_proc_data(self, next_td: TensorDictBase) -> TensorDictBase:
        cache = self.__dict__["_cache"]
        keys = cache.get("complete_step_keys")
        if keys is None:
            keys = self._complete_step_keys
        if not self._batch_locked:
            keys = None
        if keys and type(next_td) is TensorDict:
            # fast path: every reward and done leaf is already there with its spec shape, so
            # the general path below would change nothing (it only reshapes or fills leaves)
            entries = td_entries(next_td)
            for key, shape in keys:
                value = entries.get(key)
                if not isinstance(value, torch.Tensor) or value.shape != shape:
                    break
            else:
                if self.__dict__["_run_type_checks"]:
                    self._type_check(next_td)
                return in_order(next_td, cache.get("next_order") or self._next_order)
        leading = self._leading_dims(next_td) if not self._batch_locked else _NO_DIMS
        for key, shape in self._reward_shapes:
            reward = _entry(next_td, key)
            if reward is None:
                continue
            expected = leading + shape if leading else shape
            if reward.shape != expected and reward.numel() == expected.numel():
                next_td.set(key, reward.reshape(expected))
        complete_done(self._done_levels, next_td, leading)
        if self.__dict__["_run_type_checks"]:
            self._type_check(next_td)
        return in_order(next_td, self._next_order)

    def _complete_done(self, data: TensorDictBase) -> TensorDictBase:
        leading = self._leading_dims(data) if not self._batch_locked else _NO_DIMS
        return complete_done(self._done_levels, data, leading)

    def _type_check(self, next_td: TensorDictBase) -> None:
        """Checks dtypes (done, reward, observations) and observation shapes against the specs."""
        output_spec = self.output_spec
        leading = self._leading_dims(next_td) if not self._batch_locked else _NO_DIMS
        groups = (
            ("done", output_spec["full_done_spec"]),
            ("reward", output_spec["full_reward_spec"]),
            ("observation", output_spec["full_observation_spec"]),
        )
        for name, spec in groups:
            for key in spec.keys(True, True):
                value = next_td.get(key, None)
                if not isinstance(value, torch.Tensor):
                    continue
                leaf = spec[key]
                if value.dtype != leaf.dtype:
                    raise TypeError(
                        DTYPE_MISMATCH.format(
                            name=name, expected=leaf.dtype, got=value.dtype, key=key
                        )
                    )
                expected = leading + leaf.shape
                if (
                    name == "observation"
                    and all(s >= 0 for s in expected)
                    and value.shape != expected
                ):
                    raise TypeError(
                        SHAPE_MISMATCH.format(
                            name=name, expected=expected, got=value.shape, key=key
                        )
                    )

    def _reset_proc_data(
        self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        self._complete_done(tensordict_reset)
        self._reset_check_done(tensordict, tensordict_reset)
        if tensordict is None:
            return in_order(tensordict_reset, self._reset_order)
        return merge_reset(tensordict, tensordict_reset, self.reset_keys)

    def _reset_check_done(
        self, tensordict: TensorDictBase | None, tensordict_reset: TensorDictBase
    ) -> None:
        if self.__dict__["_allow_done_after_reset"]:
            return
        checked: list[tuple[str, ...]] = []
        for reset_key, group in zip(self.reset_keys, self.done_keys_groups):
            path = (reset_key,) if isinstance(reset_key, str) else reset_key
            if any(path[: len(root)] == root for root in checked):
                continue
            checked.append(path[:-1])
            reset = _entry(tensordict, reset_key) if tensordict is not None else None
            for done_key in group:
                done = _entry(tensordict_reset, done_key)
                if done is None or not bool(done.any()):
                    continue
                if reset is None:
                    raise RuntimeError(
                        DONE_AFTER_RESET.format(key=done_key, cls=type(self).__name__)
                    )
                mask = reset
                if mask.ndim > done.ndim:
                    mask = reduce_to_batch(mask, done.shape)
                mask = mask.reshape(*mask.shape, *([1] * (done.ndim - mask.ndim)))
                if bool((done & mask).any()):
                    raise RuntimeError(
                        DONE_AFTER_PARTIAL_RESET.format(key=done_key, reset_key=reset_key)
                    )

    # ------------------------------------------------------------------ done / auto-reset
    def _any_done(self, tensordict: TensorDictBase) -> bool:
        for key in self._any_done_keys:
            value = _entry(tensordict, key)
            if value is not None and any_true(value):
                return True
        return False

    def _root_action_leaves(self) -> list | tuple:
        """``[(key, spec)]`` of the action leaves when all sit at the root, else ``()``."""

        def leaves() -> list | tuple:
            keys = self.action_keys
            if not all(type(key) is str for key in keys):
                return ()
            full = self.full_action_spec
            return [(key, full[key]) for key in keys]

        return self._cache_get("root_action_leaves", leaves)


def _entry(tensordict: TensorDictBase, key: NestedKey) -> Any:
    """``tensordict.get(key, None)``, without its key parsing for a plain td and a str key."""
    if type(tensordict) is TensorDict and type(key) is str:
        return td_entries(tensordict).get(key)
    return tensordict.get(key, None)


def _prevailing_done_keys(spec: Composite, prefix: tuple[str, ...]) -> list:
    names = [name for name, item in spec.items() if not isinstance(item, Composite)]
    if names:
        # "done" is terminated | truncated by contract: it alone tells whether the level ended
        if "done" in names:
            names = ["done"]
        return [(*prefix, name) if prefix else name for name in names]
    keys = []
    for name, item in spec.items():
        keys.extend(_prevailing_done_keys(item, (*prefix, name)))
    return keys

"""The rollout loop of ``GymLikeEnv``: library results straight into the recording.

``EnvBase.rollout`` steps through ``step`` (a ``"next"`` tensordict per step, reward and done
post-processing), ``step_mdp`` and ``maybe_reset``, then records each transition. A wrapper
that owns its step knows all of that in advance: its observations come from ``_read_obs``, its
rewards and done flags are NumPy values of known shapes, the root done flags are always False
(a finished sub-env is reset before the policy sees it) and nothing else changes between
steps. So this loop, per step:

- builds the policy's tensordict from a dict (the previous root's entries, the new
  observations, shared False flags), with no key parsing or checks;
- calls the policy exactly as ``rollout`` does, reads the action, calls the library;
- writes the reward and done flags into preallocated NumPy buffers ``[T, *batch]`` (grown
  geometrically) and appends the observation and root tensors to one list per key;
- resets finished sub-envs with the library call and ``torch.where`` (as ``maybe_reset``).

At the end each list is stacked once and each buffer becomes one tensor: the result is the
one ``EnvBase.rollout`` returns (keys and their order, values, shapes, dtypes, the ``"time"``
name, a transition handed to ``callback`` at every step, ``"next"`` written into the caller's
``tensordict``). What this loop does not handle is decided before the first library call
(``fast_rollout`` returns None and ``rollout`` takes the general path): subclasses that change
``step``/``reset`` and friends, info dict readers, type checks, non-CPU devices,
``auto_cast_to_device``, nested specs, ``nn.Module`` policies on tensors (the general path
adapts them) and input tensordicts holding more than tensors. A policy that changes the
tensordict's layout mid-rollout (a new key, a nested entry, a ``"next"`` entry) hands the
rollout over to the general path from that step on, with the steps so far kept.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

from rlcore import EnvBase
from rlspecs.private_apis import td_entries, td_has_names, td_is_locked, td_new, td_set_str

from ._gym_vector import any_true

if TYPE_CHECKING:
    from ._gym_like import GymLikeEnv

__all__ = ["class_allows", "fast_rollout", "layout_plan"]

# the EnvBase/GymLikeEnv methods this loop stands in for: a subclass changing one of them
# keeps the general path
BYPASSED = (
    "step",
    "_step",
    "_step_proc_data",
    "_reset",
    "reset",
    "_reset_proc_data",
    "maybe_reset",
    "step_and_maybe_reset",
    "_finish",
    "_any_done",
)
ROLLOUT_OPTIONS = {
    "auto_reset",
    "auto_cast_to_device",
    "break_when_any_done",
    "return_contiguous",
    "tensordict",
}
DONE_NAMES = ("terminated", "truncated", "done")
FLAG_NAMES = ("reward", "terminated", "truncated")


@lru_cache(maxsize=128)
def class_allows(cls: type) -> bool:
    """Whether ``cls`` keeps every ``GymLikeEnv`` method the fast paths stand in for.

    Examples:
        >>> from rllibs import GymEnv
        >>> class_allows(GymEnv)
        True
    """
    from ._gym_like import GymLikeEnv

    return all(getattr(cls, name) is getattr(GymLikeEnv, name) for name in BYPASSED)


class _Plan:
    """What the loop needs to know about an env, read once from its specs."""

    __slots__ = ("batched",)

    def __init__(self, batched: bool) -> None:
        self.batched = batched


def _make_plan(env: GymLikeEnv) -> _Plan | None:
    keys = env.observation_keys
    flag_shape = torch.Size((*env.batch_size, 1))
    if (
        len(env.batch_size) > 1
        or not all(type(key) is str for key in keys)
        or env.action_keys != ["action"]
        or env.reward_keys != ["reward"]
        or sorted(env.done_keys) != sorted(DONE_NAMES)
        or env.state_keys
        or env.full_reward_spec["reward"].shape != flag_shape
        or any(env.full_done_spec[name].shape != flag_shape for name in DONE_NAMES)
    ):
        return None
    return _Plan(bool(env.batch_size))


def layout_plan(env: GymLikeEnv) -> _Plan | None:
    """What the fast paths need to know of ``env``'s layout; None where they don't apply.

    Cached with the env's key lists: a spec change (e.g. an info reader's) recomputes it.

    Examples:
        >>> from rllibs import GymEnv
        >>> layout_plan(GymEnv("Pendulum-v1")).batched
        False
    """
    plan = env._cache_get("gym_rollout_plan", lambda: _make_plan(env) or False)
    return plan or None


def _plain(td: Any, env: EnvBase) -> bool:
    return (
        type(td) is TensorDict
        and td.batch_size == env.batch_size
        and not td_is_locked(td)
        and not td_has_names(td)
        and all(type(value) is torch.Tensor for value in td_entries(td).values())
    )


def _is_module_on_tensors(policy: Any) -> bool:
    return (
        isinstance(policy, nn.Module)
        and not isinstance(policy, TensorDictModuleBase)
        and not hasattr(policy, "in_keys")
    )


def fast_rollout(
    env: GymLikeEnv,
    max_steps: Any,
    policy: Any,
    callback: Callable | None,
    options: dict[str, Any],
) -> TensorDictBase | None:
    """``env.rollout(max_steps, policy, callback, **options)``, or None where it does not apply.

    None is returned before anything is run, so that the caller can take the general path.

    Examples:
        >>> from rllibs import GymEnv
        >>> env = GymEnv("Pendulum-v1")
        >>> fast_rollout(env, 3, None, None, {}).batch_size
        torch.Size([3])
    """
    auto_reset = options.get("auto_reset", True)
    tensordict = options.get("tensordict")
    device = env.device
    if (
        not options.keys() <= ROLLOUT_OPTIONS
        or not isinstance(max_steps, int)
        or max_steps < 1
        or options.get("auto_cast_to_device", False)
        or _is_module_on_tensors(policy)
        or env.__dict__["_run_type_checks"]
        or env._info_dict_readers
        or (device is not None and device.type != "cpu")
        or not class_allows(type(env))
        or (tensordict is None and not auto_reset)
        or (tensordict is not None and not _plain(tensordict, env))
    ):
        return None
    plan = layout_plan(env)
    if plan is None:
        return None
    root = env.reset(tensordict) if auto_reset else env.maybe_reset(tensordict)
    return _Loop(env, plan, policy, callback, options, root is tensordict).run(root, max_steps)


class _Resume:
    """The policy for the general path taking over: the first root already went through it."""

    def __init__(self, act: Callable) -> None:
        self.act = act
        self.first = True

    def __call__(self, td: TensorDictBase) -> Any:
        if self.first:
            self.first = False
            return td
        return self.act(td)


class _Loop:
    """One fast rollout: the recording state and the step loop."""

    def __init__(
        self,
        env: GymLikeEnv,
        plan: _Plan,
        policy: Any,
        callback: Callable | None,
        options: dict[str, Any],
        callers_root: bool,
    ) -> None:
        self.env = env
        self.plan = plan
        self.act = env.rand_action if policy is None else policy
        self.callback = callback
        self.break_when_any_done = options.get("break_when_any_done", True)
        self.return_contiguous = options.get("return_contiguous", True)
        # the general path writes "next" into the caller's tensordict at the first step
        self.callers_root = callers_root
        batch = env.batch_size
        self.batch = batch
        self.flag_shape = torch.Size((*batch, 1))
        self.layout: tuple[str, ...] = ()
        self.root_columns: list[list[torch.Tensor]] = []
        # observation keys in the order _read_obs gives them (the order of "next"), read at
        # the first step
        self.obs_keys: tuple[str, ...] = ()
        self.obs_columns: list[list[torch.Tensor]] = []
        # each step's reward, terminated and truncated as the library returned them
        self.flags: dict[str, list] = {name: [] for name in FLAG_NAMES}
        self.root_device: torch.device | None = None

    # ------------------------------------------------------------------ the loop
    def run(self, root: TensorDictBase, max_steps: int) -> TensorDictBase:
        env, plan, act = self.env, self.plan, self.act
        batched = plan.batched
        batch, flag_shape = self.batch, self.flag_shape
        device = env.device
        read_obs, write_action = env._read_obs, env._write_action
        env_step = env._env_step if env.frame_skip == 1 else env._library_step
        callback, break_when_any_done = self.callback, self.break_when_any_done
        falses = {name: torch.zeros(flag_shape, dtype=torch.bool) for name in DONE_NAMES}
        rewards, terminateds, truncateds = (self.flags[name] for name in FLAG_NAMES)
        layout: tuple[str, ...] = ()
        root_columns: list[list[torch.Tensor]] = []
        steps = 0
        for i in range(max_steps):
            out = act(root)
            if out is not None and out is not root:
                root.update(out)
            entries = td_entries(root) if type(root) is TensorDict else None
            if i == 0:
                if entries is None or not self._start(root, entries):
                    return self._hand_over(root, 0, max_steps)
                layout, root_columns = self.layout, self.root_columns
            elif entries is None or len(entries) != len(layout):
                return self._hand_over(root, i, max_steps)
            for key, column in zip(layout, root_columns):
                value = entries.get(key)
                if type(value) is not torch.Tensor:
                    return self._hand_over(root, i, max_steps)
                column.append(value)
            obs, reward, terminated, truncated, _ = env_step(write_action(entries["action"]))
            rewards.append(reward)
            terminateds.append(terminated)
            truncateds.append(truncated)
            if batched:
                any_done = any_true(terminated) or any_true(truncated)
            else:
                any_done = bool(terminated) or bool(truncated)
            observations = read_obs(obs)
            if i == 0:
                self.obs_keys = obs_keys = tuple(observations)
                self.obs_columns = obs_columns = [[] for _ in obs_keys]
            for key, column in zip(obs_keys, obs_columns):
                column.append(observations[key])
            steps = i + 1
            new_root = None
            if i == 0 and self.callers_root or callback is not None:
                new_root = dict(entries)
                td_set_str(root, "next", self._next_td(i, observations))
                if callback is not None:
                    callback(env, root)
            if i == max_steps - 1 or (break_when_any_done and any_done):
                break
            if new_root is None:
                new_root = dict(entries)
            new_root.update(observations)
            new_root.update(falses)
            if any_done:
                self._reset_finished(new_root, terminated | truncated)
            root = td_new(new_root, batch, device)
        return self._result(steps)

    def _start(self, root: TensorDict, entries: dict) -> bool:
        """Read the layout of the first root (after the policy): only tensors, no "next"."""
        if (
            "action" not in entries
            or "next" in entries
            or "reward" in entries
            or not all(type(value) is torch.Tensor for value in entries.values())
        ):
            return False
        self.layout = tuple(entries)
        self.root_columns = [[] for _ in self.layout]
        self.root_device = root.device
        return True

    def _reset_finished(self, new_root: dict, done: Any) -> None:
        """Start new episodes where ``done`` (as ``maybe_reset``), updating ``new_root``."""
        env = self.env
        seed = env._take_seed(None)
        if self.plan.batched:
            mask = torch.from_numpy(np.array(done, dtype=bool).reshape(self.flag_shape))
            request = td_new({"_reset": mask}, self.batch, env.device)
            obs, _ = env._env_reset(request, seed)
            observations = env._read_obs(obs)
            for key in self.obs_keys:
                new, old = observations[key], new_root[key]
                where = mask.reshape(*mask.shape[:1], *([1] * (new.ndim - 1)))
                new_root[key] = torch.where(where, new, old)
        else:
            obs, _ = env._env_reset(None, seed)
            new_root.update(env._read_obs(obs))

    # ------------------------------------------------------------------ results
    def _flags(self, start: int, stop: int) -> dict[str, torch.Tensor]:
        """Reward and done flags of steps ``start:stop``, as ``[*batch, T, 1]`` tensors."""
        batched = self.plan.batched
        shape = (*self.batch, stop - start, 1)
        out = {}
        row = (*self.batch, 1) if batched else (1,)
        for name, dtype in zip(FLAG_NAMES, (self.env._reward_dtype, bool, bool)):
            steps = self.flags[name][start:stop]
            try:
                values = np.asarray(steps, dtype=dtype)
            except ValueError:  # steps of different shapes, e.g. scalars and (1,) arrays
                values = np.stack([np.asarray(v, dtype=dtype).reshape(row) for v in steps])
            if batched:  # [T, num_envs(, 1)] -> [num_envs, T(, 1)]
                values = np.ascontiguousarray(np.moveaxis(values, 0, 1))
            out[name] = torch.from_numpy(values).reshape(shape)
        out["done"] = out["terminated"] | out["truncated"]
        return out

    def _next_td(self, i: int, observations: dict) -> TensorDict:
        source = {key: observations[key] for key in self.obs_keys}
        dim = len(self.batch)
        for name, value in self._flags(i, i + 1).items():
            source[name] = value.squeeze(dim)
        return td_new(source, self.batch, self.env.device)

    def _result(self, steps: int) -> TensorDictBase:
        dim = len(self.batch)
        batch = torch.Size((*self.batch, steps))
        try:
            next_source = {
                key: torch.stack(column, dim)
                for key, column in zip(self.obs_keys, self.obs_columns)
            }
            next_source.update(self._flags(0, steps))
            source = {
                key: torch.stack(column, dim) for key, column in zip(self.layout, self.root_columns)
            }
        except RuntimeError:  # entries whose shape changed between steps
            if self.return_contiguous:
                raise
            out = LazyStackedTensorDict.maybe_dense_stack(self._steps(steps), dim)
        else:
            source["next"] = td_new(next_source, batch, self.env.device)
            out = td_new(source, batch, self.root_device)
        out.refine_names(..., "time")
        return out

    def _steps(self, steps: int) -> list[TensorDict]:
        """The recorded steps as one transition tensordict each."""
        out = []
        for i in range(steps):
            observations = {key: column[i] for key, column in zip(self.obs_keys, self.obs_columns)}
            source = {key: column[i] for key, column in zip(self.layout, self.root_columns)}
            source["next"] = self._next_td(i, observations)
            out.append(td_new(source, self.batch, self.root_device))
        return out

    def _hand_over(self, root: TensorDictBase, step: int, max_steps: int) -> TensorDictBase:
        """Run steps ``step:`` on the general path (its policy skips ``root``, already seen)."""
        for column in self.root_columns:
            del column[step:]
        rest = EnvBase.rollout(
            self.env,
            max_steps - step,
            _Resume(self.act),
            self.callback,
            auto_reset=False,
            break_when_any_done=self.break_when_any_done,
            return_contiguous=self.return_contiguous,
            tensordict=root,
        )
        if step == 0:
            return rest
        dim = len(self.batch)
        steps = self._steps(step) + list(rest.unbind(dim))
        if self.return_contiguous:
            out = torch.stack(steps, dim)
        else:
            out = LazyStackedTensorDict.maybe_dense_stack(steps, dim)
        out.refine_names(..., "time")
        return out

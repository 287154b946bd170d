"""The rollout loop of ``EnvBase``: policy adaptation, stepping, auto-reset, recording.

How the steps are recorded (per-leaf lists, or preallocated buffers at large batches) is in
``rlcore._recording``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import torch
from tensordict import TensorDictBase

from rlcore._done_rule import done_from
from rlcore._partial_steps import PARTIAL_STEP
from rlcore._policies import ActionReplay, adapt_policy, policy_device
from rlcore._recording import Recorder
from rlcore._resets import terminated_or_truncated
from rlcore._rollout_stepper import stepper_rollout

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["run_rollout"]

NO_TENSORDICT = "rollout: a tensordict must be provided when auto_reset=False"
BAD_MAX_STEPS = "rollout: max_steps must be a positive integer, got {max_steps!r}"
BOTH_BREAKS = "Cannot have both break_when_all_done and break_when_any_done True at the same time."
POLICY_AND_ACTIONS = "Cannot pass both `policy` and `actions` to rollout()."
NO_TRUNCATED = (
    "set_truncated was set to True but no truncated key could be found. Make sure a "
    "'truncated' entry was set in the environment full_done_keys using "
    "`env.add_truncated_keys()`."
)


def resolve_breaks(any_done: bool | None, all_done: bool | None) -> tuple[bool, bool]:
    """``break_when_any_done`` (True unless ``break_when_all_done``) and
    ``break_when_all_done`` (False), as current torchrl reads them.

    Examples:
        >>> resolve_breaks(None, None), resolve_breaks(None, True)
        ((True, False), (False, True))
    """
    all_done = bool(all_done)
    if any_done is None:
        any_done = not all_done
    if any_done and all_done:
        raise TypeError(BOTH_BREAKS)
    return any_done, all_done


def run_rollout(
    env: EnvBase,
    max_steps: int,
    policy: Any,
    callback: Callable | None,
    *,
    auto_reset: bool = True,
    auto_cast_to_device: bool = False,
    break_when_any_done: bool | None = None,
    return_contiguous: bool = True,
    tensordict: TensorDictBase | None = None,
    actions: Iterable[Any] | None = None,
    break_when_all_done: bool | None = None,
    set_truncated: bool = False,
    out: TensorDictBase | None = None,
    trust_policy: bool = False,
    storing_device: Any = None,
    use_stepper: bool = True,
) -> TensorDictBase:
    """Implements ``EnvBase.rollout``: through the env's stepper where it offers one
    (``rlcore._rollout_stepper``, ``use_stepper``), else a tensordict per step."""
    break_when_any_done, break_when_all_done = resolve_breaks(
        break_when_any_done, break_when_all_done
    )
    if actions is not None:
        if policy is not None:
            raise ValueError(POLICY_AND_ACTIONS)
        if hasattr(actions, "__len__"):
            max_steps = min(max_steps, len(actions))
        policy = ActionReplay(env, actions)
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(BAD_MAX_STEPS.format(max_steps=max_steps))
    result = None
    if use_stepper and not break_when_all_done:
        options = {
            "auto_reset": auto_reset,
            "auto_cast_to_device": auto_cast_to_device,
            "break_when_any_done": break_when_any_done,
            "return_contiguous": return_contiguous,
            "tensordict": tensordict,
        }
        general = functools.partial(run_rollout, use_stepper=False)
        result = stepper_rollout(env, max_steps, policy, callback, options, general)
    if result is None:
        result = _general(
            env,
            max_steps,
            policy,
            callback,
            auto_reset,
            auto_cast_to_device,
            break_when_any_done,
            break_when_all_done,
            return_contiguous,
            tensordict,
        )
    if set_truncated:
        _set_truncated(env, result)
    if storing_device is not None and result.device != torch.device(storing_device):
        result = result.to(storing_device)
    if out is not None:
        out.update_(result)
        result = out
    return result


def _set_truncated(env: EnvBase, data: TensorDictBase) -> None:
    """The last step of every trajectory truncated (and done), as current torchrl does."""
    found = False
    for key in env.done_keys:
        name = key if isinstance(key, str) else key[-1]
        if name != "truncated":
            continue
        path = ("next", key) if isinstance(key, str) else ("next", *key)
        truncated = data.get(path).clone()
        truncated[(slice(None),) * (data.ndim - 1) + (-1,)] = True
        data.set(path, truncated)
        done_path = (*path[:-1], "done")
        done = data.get(done_path, None)
        data.set(done_path, truncated if done is None else done_from(done, truncated))
        found = True
    if not found:
        raise RuntimeError(NO_TRUNCATED)


def _general(
    env: EnvBase,
    max_steps: int,
    policy: Any,
    callback: Callable | None,
    auto_reset: bool,
    auto_cast_to_device: bool,
    break_when_any_done: bool,
    break_when_all_done: bool,
    return_contiguous: bool,
    tensordict: TensorDictBase | None,
) -> TensorDictBase:
    """The rollout loop with a tensordict per step (every env, every option)."""
    if policy is None:
        act = env.rand_action
        device_of_policy = None
    else:
        act = adapt_policy(env, policy)
        device_of_policy = policy_device(policy) if auto_cast_to_device else None
    env_device = env.device
    cast = device_of_policy is not None and device_of_policy != env_device

    if auto_reset:
        td = env.reset(tensordict)
    elif tensordict is None:
        raise RuntimeError(NO_TENSORDICT)
    else:
        td = env.maybe_reset(tensordict)
    batch_dims = td.batch_dims
    exact = not (break_when_any_done or break_when_all_done)
    recorder = Recorder(batch_dims, max_steps, exact=exact)
    step_mdp = env._step_mdp
    state = env.__dict__
    type_checks = state["_run_type_checks"]
    running: torch.Tensor | None = None  # break_when_all_done: the rows still stepping
    previous: TensorDictBase | None = None
    try:
        for i in range(max_steps):
            if cast:
                td_policy = td.to(device_of_policy)
                out = act(td_policy)
                if out is not None and out is not td_policy:
                    td_policy.update(out)
                td = td_policy.to(env_device) if env_device is not None else td_policy
            else:
                out = act(td)
                if out is not None and out is not td:
                    td.update(out)
            last = i == max_steps - 1
            if break_when_all_done:
                if running is not None:
                    td.set(PARTIAL_STEP, running)
                transition = env.step(td)
                if running is not None:  # finished rows repeat their last transition
                    transition = _keep_finished(transition, previous, running)
                previous = transition
                if not last:
                    td = step_mdp(transition)
                    running = _still_running(env, td, running)
            elif break_when_any_done or last:
                transition = env.step(td)
                if not last:
                    td = step_mdp(transition)
            else:
                transition, td = env.step_and_maybe_reset(td)
            # Type checks run on the first step only (check_env_specs runs a fresh rollout).
            state["_run_type_checks"] = False
            recorder.add(transition)
            if callback is not None:
                callback(env, transition)
            if last or (break_when_any_done and env._any_done(td)):
                break
            if break_when_all_done and not bool(running.any()):
                break
    finally:
        state["_run_type_checks"] = type_checks
    return recorder.result(return_contiguous)


def _still_running(
    env: EnvBase, root: TensorDictBase, running: torch.Tensor | None
) -> torch.Tensor:
    """The rows of ``root`` that are not done (and were running), as a ``"_step"`` mask."""
    done = terminated_or_truncated(root, env.full_done_spec, key="_neg_step")
    flags = root.pop("_neg_step", None)
    if not done or flags is None:
        now = torch.ones(root.batch_size, dtype=torch.bool, device=root.device)
    else:
        now = ~flags.reshape(root.batch_size)
    return now if running is None else running & now


def _keep_finished(
    transition: TensorDictBase, previous: TensorDictBase, running: torch.Tensor
) -> TensorDictBase:
    """``transition`` where ``running``, ``previous`` (the last recorded step) elsewhere."""
    transition.pop(PARTIAL_STEP, None)
    if bool(running.all()):
        return transition
    mask = running.reshape(transition.batch_size)
    return transition.where(mask, previous.exclude(PARTIAL_STEP))

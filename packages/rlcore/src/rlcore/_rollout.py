"""The rollout loop of ``EnvBase``: policy adaptation, per-leaf recording, final stacking.

Each step's leaves are appended to one list per leaf (the layout of the tensordict is read
once, at the first step) and every list is stacked once at the end into ``[*batch, T, ...]``.
Measured here, this costs about 0.5 µs per leaf and step, against about 2 µs for a copy into a
preallocated ``[*batch, T, ...]`` buffer slice and far more for stacking tensordicts. When a step
does not match the first step's layout (new keys, lazy stacks, non-tensor data), the loop falls
back to keeping whole tensordicts and stacking them (lazily when ``return_contiguous=False``).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase, is_tensor_collection
from tensordict.nn import TensorDictModuleBase
from torch import nn

from rlspecs.private_apis import td_entries, td_new

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["run_rollout"]

NO_TENSORDICT = "rollout: a tensordict must be provided when auto_reset=False"
BAD_MAX_STEPS = "rollout: max_steps must be a positive integer, got {max_steps!r}"


class TensorPolicy:
    """Adapts an ``nn.Module`` on tensors: observations in, action(s) out."""

    def __init__(self, module: nn.Module, in_keys: list, out_keys: list) -> None:
        self.module = module
        self.in_keys = in_keys
        self.out_keys = out_keys

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = self.module(*[tensordict.get(key) for key in self.in_keys])
        if isinstance(out, tuple):
            for key, value in zip(self.out_keys, out):
                tensordict.set(key, value)
        else:
            tensordict.set(self.out_keys[0], out)
        return tensordict


def _takes_tensordict(function: Callable) -> bool:
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return True
    if set(params) in ({"tensordict"}, {"td"}):
        return True
    if len(params) == 1:
        annotation = next(iter(params.values())).annotation
        return isinstance(annotation, type) and issubclass(annotation, TensorDictBase)
    return False


def adapt_policy(env: EnvBase, policy: Any) -> Callable[[TensorDictBase], Any]:
    """Returns a callable on tensordicts for ``policy`` (see ``EnvBase.rollout``)."""
    if isinstance(policy, TensorDictModuleBase):
        return policy
    if (
        isinstance(policy, nn.Module)
        and not hasattr(policy, "in_keys")
        and not _takes_tensordict(policy.forward)
    ):
        return TensorPolicy(policy, list(env.full_observation_spec.keys()), list(env.action_keys))
    return policy


def _policy_device(policy: Any) -> torch.device | None:
    parameters = getattr(policy, "parameters", None)
    if parameters is None:
        return None
    for param in parameters():
        return param.device
    return None


class _Layout:
    """The structure of a plain tensordict: leaf names, sub-tensordicts, batch size, device."""

    __slots__ = ("size", "leaves", "children", "batch_size", "device")

    def __init__(self, size, leaves, children, batch_size, device) -> None:
        self.size = size
        self.leaves = leaves
        self.children = children
        self.batch_size = batch_size
        self.device = device


def _layout(td: Any) -> _Layout | None:
    if type(td) is not TensorDict:
        return None
    entries = td_entries(td)
    leaves, children = [], []
    for key, value in entries.items():
        if type(value) is TensorDict:
            sub = _layout(value)
            if sub is None:
                return None
            children.append((key, sub))
        elif isinstance(value, torch.Tensor) and not is_tensor_collection(value):
            leaves.append(key)
        else:
            return None
    return _Layout(len(entries), tuple(leaves), tuple(children), td.batch_size, td.device)


def _gather(td: Any, layout: _Layout, out: list) -> bool:
    if type(td) is not TensorDict:
        return False
    entries = td_entries(td)
    if len(entries) != layout.size:
        return False
    for key in layout.leaves:
        value = entries.get(key)
        if value is None:
            return False
        out.append(value)
    for key, sub in layout.children:
        if not _gather(entries.get(key), sub, out):
            return False
    return True


def _build(layout: _Layout, values: Iterator, make: Callable, batch: Callable) -> TensorDict:
    source = {key: make(next(values)) for key in layout.leaves}
    for key, sub in layout.children:
        source[key] = _build(sub, values, make, batch)
    return td_new(source, batch(layout.batch_size), layout.device)


class Recorder:
    """Collects rollout steps as one list per leaf; stacks once at the end."""

    def __init__(self) -> None:
        self.layout: _Layout | None = None
        self.columns: list[list[torch.Tensor]] = []
        self.tds: list[TensorDictBase] | None = None
        self.count = 0

    def add(self, td: TensorDictBase) -> None:
        if self.tds is not None:
            self.tds.append(td.copy())
            return
        if self.layout is None:
            self.layout = _layout(td)
            if self.layout is None:
                self.tds = [td.copy()]
                self.count = 1
                return
        values: list[torch.Tensor] = []
        if _gather(td, self.layout, values) and (
            not self.columns or len(values) == len(self.columns)
        ):
            if not self.columns:
                self.columns = [[value] for value in values]
            else:
                for column, value in zip(self.columns, values):
                    column.append(value)
        else:
            self.tds = self._unpack() + [td.copy()]
        self.count += 1

    def _unpack(self) -> list[TensorDictBase]:
        layout = self.layout
        return [
            _build(layout, iter([column[i] for column in self.columns]), _same, _same)
            for i in range(self.count)
        ]

    def result(self, batch_dims: int, return_contiguous: bool) -> TensorDictBase:
        if self.tds is None:
            steps = self.count

            def stack(column: list[torch.Tensor]) -> torch.Tensor:
                return torch.stack(column, batch_dims)

            def batch(size: torch.Size) -> torch.Size:
                return torch.Size((*size[:batch_dims], steps, *size[batch_dims:]))

            try:
                out = _build(self.layout, iter(self.columns), stack, batch)
            except RuntimeError:
                if return_contiguous:
                    raise
                self.tds = self._unpack()
        if self.tds is not None:
            if return_contiguous:
                out = torch.stack(self.tds, batch_dims)
            else:
                out = LazyStackedTensorDict.maybe_dense_stack(self.tds, batch_dims)
        out.refine_names(..., "time")
        return out


def _same(value: Any) -> Any:
    return value


def run_rollout(
    env: EnvBase,
    max_steps: int,
    policy: Any,
    callback: Callable | None,
    *,
    auto_reset: bool,
    auto_cast_to_device: bool,
    break_when_any_done: bool,
    return_contiguous: bool,
    tensordict: TensorDictBase | None,
) -> TensorDictBase:
    """Implements ``EnvBase.rollout``."""
    if not isinstance(max_steps, int) or max_steps < 1:
        raise ValueError(BAD_MAX_STEPS.format(max_steps=max_steps))
    if policy is None:
        act = env.rand_action
        policy_device = None
    else:
        act = adapt_policy(env, policy)
        policy_device = _policy_device(policy) if auto_cast_to_device else None
    env_device = env.device
    cast = policy_device is not None and policy_device != env_device

    if auto_reset:
        td = env.reset(tensordict)
    elif tensordict is None:
        raise RuntimeError(NO_TENSORDICT)
    else:
        td = env.maybe_reset(tensordict)
    batch_dims = td.batch_dims
    recorder = Recorder()
    step_mdp = env._step_mdp
    state = env.__dict__
    type_checks = state["_run_type_checks"]
    try:
        for i in range(max_steps):
            if cast:
                td_policy = td.to(policy_device)
                out = act(td_policy)
                if out is not None and out is not td_policy:
                    td_policy.update(out)
                td = td_policy.to(env_device) if env_device is not None else td_policy
            else:
                out = act(td)
                if out is not None and out is not td:
                    td.update(out)
            last = i == max_steps - 1
            if break_when_any_done or last:
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
    finally:
        state["_run_type_checks"] = type_checks
    return recorder.result(batch_dims, return_contiguous)

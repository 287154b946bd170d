"""The worker side of ParallelEnv: sub-envs bound to their slices of the shared tensordict.

Each worker process runs ``_run_worker_pipe_shared_mem`` for a contiguous block of sub-envs
(one by default) and serves their commands (``rlworkers.serve``). Start-up has two steps: each
sub-env is built, and its start reply carries its metadata when the main process asked for
them (it runs no sub-env code itself: ``rlbatched._metadata``); then ``"bind"`` hands the
process the shared buffer, laid out from those metadata, and each sub-env becomes a
``_WorkerEnv`` bound to its slice. A step writes the sub-env's outputs into its row of the
shared ``"next"`` buffers: straight from the simulator where the sub-env offers a stepper whose
layout is the shared one (every unbatched ``rllibs.GymEnv``: ``rlcore.Stepper``; the step
contract fills its done flags), else through the tensordict its step returns. Without buffers
(``use_buffers=False``), ``"bind"`` says ``DIRECT`` and each sub-env becomes a ``_DirectEnv``,
taking and returning tensordicts through its pipe.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rlcore import EnvBase, Stepper, fill_level, is_current, stepper_of
from rlcore.step_inputs import get_many
from rlworkers import CloudpickleBox, serve

from ._batched_base import step_function
from ._metadata import EnvMetaData
from ._tensordict_ops import copy_into, leaves, shallow_copy

__all__ = ["DIRECT", "STEP", "StepperRow"]

STEP = b"s"  # the one-byte per-step command
DIRECT = "direct"  # the "bind" payload of every sub-env of a ParallelEnv without buffers


def _worker_entry(conn, run_fn: Callable, num_threads: int, *args) -> None:
    """Worker target: set the thread count first, then run the worker loop ``run_fn``."""
    torch.set_num_threads(num_threads)
    run_fn(conn, *args)


class StepperRow:
    """A sub-env's stepper bound to its row of the shared buffers (in its worker).

    ``build`` gives one only where the stepper's output is exactly what the general path
    writes: its observation and scalar leaves, with the done flags the step contract fills,
    are the shared ``"next"`` leaves (same keys, shapes and dtypes, on the CPU), and the env is
    unbatched and batch-locked (``rlcore.stepper_of`` checks the rest).

    Examples:
        >>> from rlmocks import CountingEnv
        >>> env = CountingEnv()
        >>> shared = env.fake_tensordict()
        >>> StepperRow.build(env, shared.exclude("next"), shared.get("next")) is None  # none
        True
    """

    def __init__(
        self, env: EnvBase, stepper: Stepper, action: Any, outs: list, scalars: list, flags: list
    ) -> None:
        self.level = env._done_levels[0]  # the done leaves, all at the root
        self.stepper = stepper
        self.action = action
        self.outs = outs
        self.scalars = scalars
        self.flags = flags

    @classmethod
    def build(cls, env: EnvBase, root: TensorDictBase, nxt: TensorDictBase) -> StepperRow | None:
        """The stepper row of ``env`` over its shared slices ``root`` and ``nxt``, or None."""
        if env.batch_size or not env._batch_locked or len(env._done_levels) != 1:
            return None
        stepper = stepper_of(env)
        if stepper is None:
            return None
        level = env._done_levels[0]
        written = {leaf.key: (leaf.shape, leaf.dtype) for leaf in stepper.obs_leaves}
        written.update((leaf.key, (leaf.shape, leaf.dtype)) for leaf in stepper.scalar_leaves)
        for name, shape, spec in zip(level.names, level.shapes, level.specs):
            written.setdefault(name, (shape, spec.dtype))
        if set(nxt.keys(True, True)) != set(written):
            return None
        for key, (shape, dtype) in written.items():
            value = nxt.get(key)
            if value.shape != shape or value.dtype != dtype or value.device.type != "cpu":
                return None
        action = root.get(stepper.action_key, None)
        if not isinstance(action, torch.Tensor) or action.device.type != "cpu":
            return None
        if stepper.numpy_action:
            action = action.numpy()
        # each row's buffers, with a leading dim of 1: row 0 of a batch of one
        outs = [nxt.get(leaf.key).unsqueeze(0).numpy() for leaf in stepper.obs_leaves]
        scalars = [
            (leaf.key, nxt.get(leaf.key).numpy(), tuple(leaf.shape), leaf.numpy_dtype)
            for leaf in stepper.scalar_leaves
        ]
        flags = [(name, nxt.get(name).numpy()) for name in level.names]
        return cls(env, stepper, action, outs, scalars, flags)

    def step(self) -> None:
        """Step on the shared action; the outputs land in the shared buffers."""
        values = self.stepper.step(self.action, self.outs, 0)
        names = self.level.names
        present = {}
        for (key, view, shape, dtype), value in zip(self.scalars, values):
            value = np.asarray(value, dtype).reshape(shape)
            if key in names:
                present[key] = value
            else:
                view[...] = value
        fill_level(self.level, present, lambda spec: np.zeros(tuple(spec.shape), dtype=bool))
        for name, view in self.flags:
            view[...] = present[name]


class _DirectEnv:
    """A sub-env whose data go through its pipe (lives in the worker): a ``ParallelEnv`` with
    ``use_buffers=False``. Steps and resets take and return tensordicts (``"step_td"``,
    ``"reset_td"``); seeding, attributes and calls are those of every sub-env."""

    def __init__(self, env: EnvBase):
        self.env = env
        self.step_fn = step_function(env)

    def handlers(self) -> dict[str, Callable[[Any], Any]]:
        """The commands this worker answers (see ``rlworkers.serve``)."""
        return {
            "step_td": self.step_td,
            "reset_td": self.reset_td,
            "seed": self.seed,
            "getattr": self.getattr,
            "call": self.call,
            "close": self.close,
        }

    def step_td(self, td: TensorDictBase) -> TensorDictBase:
        """The next step of the sub-env (what ``SerialEnv`` stacks for it)."""
        return self.step_fn(td)

    def reset_td(self, payload: tuple) -> TensorDictBase:
        """Reset the sub-env; its observations, done flags and state (as ``SerialEnv`` keeps).

        The keys are read from the specs at each reset: a sub-env may change them.
        """
        td, kwargs = payload
        env = self.env
        keys = [
            *env.full_observation_spec.keys(True, True),
            *env.full_done_spec.keys(True, True),
            *env.full_state_spec.keys(True, True),
        ]
        return env.reset(td, **kwargs).select(*keys, strict=False)

    def seed(self, payload: tuple) -> int | None:
        seed, static_seed = payload
        return self.env.set_seed(seed, static_seed=static_seed)

    def getattr(self, name: str) -> tuple[str, Any]:
        value = getattr(self.env, name)
        return ("callable", None) if callable(value) else ("value", value)

    def call(self, payload: tuple) -> Any:
        name, args, kwargs = payload
        return getattr(self.env, name)(*args, **kwargs)

    def close(self, _: Any = None) -> None:
        self.env.close()


class _WorkerEnv(_DirectEnv):
    """A sub-env bound to its slice of the shared tensordict (lives in the worker)."""

    def __init__(self, env: EnvBase, shared: TensorDictBase):
        super().__init__(env)
        self.root = shared.exclude("next")
        self.next = shared.get("next")
        self.next_leaves = _split(leaves(self.next))
        inputs = {*env.full_action_spec.keys(True, True), *env.full_state_spec.keys(True, True)}
        inputs |= set(env.full_observation_spec.keys(True, True))
        self.step_view = self.root.select(*inputs, strict=False)
        reset_keys = set(env.full_observation_spec.keys(True, True))
        reset_keys |= set(env.full_done_spec.keys(True, True))
        reset_keys |= set(env.full_state_spec.keys(True, True))
        self.reset_view = self.root.select(*reset_keys, strict=False)
        self.reset_leaves = _split(leaves(self.reset_view))
        self.sync_cuda = self.root.device is not None and self.root.device.type == "cuda"
        self.stepper_row = StepperRow.build(env, self.root, self.next)
        # the input keys the caller leaves out of its steps, sent through the pipe when they
        # change (command "step") and kept for the flag-only steps that follow ("step_hot")
        self.skipped: list | None = None

    def handlers(self) -> dict[str, Callable[[Any], Any]]:
        """The commands this worker answers (see ``rlworkers.serve``)."""
        return {
            **super().handlers(),
            "step": self.step,
            "step_hot": self.step_hot,
            "reset": self.reset,
        }

    def step(self, skipped: list | None) -> None:
        """Step on the shared inputs less the ``skipped`` keys the caller did not give; the
        next ``step_hot`` leaves out the same keys."""
        self.skipped = skipped
        self.step_hot()

    def step_hot(self, _: Any = None) -> None:
        """Step on the shared inputs, less the keys the last ``step`` command named."""
        row, skipped = self.stepper_row, self.skipped
        # a stepper reads the action alone, which a step always has
        if row is not None:
            if is_current(self.env, row.stepper):
                row.step()
                return
            self.stepper_row = None  # the specs changed: the general path from now on
        td = shallow_copy(self.step_view)
        if skipped:
            td = td.exclude(*skipped)
        _write(self.next, self.next_leaves, self.step_fn(td))
        if self.sync_cuda:
            torch.cuda.synchronize(self.root.device)

    def reset(self, payload: tuple) -> None:
        """Reset the env; it is given its shared slice (where the main process wrote the
        caller's entries, less the ``skipped`` ones) when the caller passed a tensordict, as
        ``SerialEnv`` passes it."""
        masks, kwargs, skipped = payload
        td = None
        if masks is not None or skipped is not None:
            td = (self.root.exclude(*skipped) if skipped else self.root).clone()
        if masks is not None:
            for key, mask in masks.items():
                td.set(key, torch.from_numpy(mask).to(self.root.device))
        out = self.env.reset(td, **kwargs)
        _write(self.reset_view, self.reset_leaves, out)
        if self.sync_cuda:
            torch.cuda.synchronize(self.root.device)


class _OwnGenerator:
    """The torch global generator state of one sub-env among several in a process.

    Sub-envs that draw from (or seed) torch's global generator would otherwise share it when
    they share a process, and their draws would depend on how the sub-envs are split across
    processes. Each command of the sub-env runs with its own state swapped in (~2 µs each way).
    """

    def __init__(self, state: torch.Tensor) -> None:
        self.state = state

    def run(self, fn: Callable, *args: Any, **kwargs: Any) -> Any:
        torch.set_rng_state(self.state)
        try:
            return fn(*args, **kwargs)
        finally:
            self.state = torch.get_rng_state()

    def wrap(self, handlers: dict[str, Callable[[Any], Any]]) -> dict[str, Callable[[Any], Any]]:
        return {name: functools.partial(self.run, handler) for name, handler in handlers.items()}


def _split(pairs: list | None) -> tuple[list, list] | None:
    """``[(key, tensor)]`` -> ``([keys], [tensors])``."""
    if pairs is None:
        return None
    return [key for key, _ in pairs], [tensor for _, tensor in pairs]


def _write(view: TensorDictBase, leaves: list | None, src: TensorDictBase) -> None:
    if leaves is None:
        view.update_(src.select(*view.keys(True, True), strict=False))
        return
    keys, dsts = leaves
    copy_into(dsts, get_many(src, keys))


def _run_worker_pipe_shared_mem(
    conn,
    indices: list[int],
    env_fns: list[Callable[..., EnvBase]] | CloudpickleBox,
    env_kwargs: list[dict] | CloudpickleBox,
    report: list[bool],
) -> None:
    """Worker loop: build the sub-envs ``indices`` one after the other (those flagged in
    ``report`` answer their start with their ``EnvMetaData``), bind them to the shared buffer on
    ``"bind"``, then serve their commands until "close"."""
    torch.set_grad_enabled(False)
    shared: dict[str, Any] = {}
    # the process's generator state before any sub-env ran: each sub-env starts from it, as it
    # would alone in its process
    first_state = torch.get_rng_state() if len(indices) > 1 else None

    def setup(position: int) -> dict[str, Callable[[Any], Any]]:
        # inside setup, so that a factory that cannot be unpickled is reported as its error
        if not shared:
            fns, kwargs = env_fns, env_kwargs
            if isinstance(fns, CloudpickleBox):
                fns, kwargs = fns.obj, kwargs.obj
            shared.update(fns=fns, kwargs=kwargs)
        make, kw = shared["fns"][position], shared["kwargs"][position]
        own = None if first_state is None else _OwnGenerator(first_state)
        env = make(**kw) if own is None else own.run(make, **kw)
        handlers: dict[str, Callable[[Any], Any]] = {}

        def bind(payload: tuple | str | None) -> None:
            """Bind the sub-env to its slice of the shared buffer (sent to the process's first
            sub-env: the buffer's handle and its layout, each pickled), or to its pipe alone
            (``DIRECT``: no shared buffer)."""
            if payload == DIRECT:
                bound = _DirectEnv(env).handlers()
            else:
                if payload is not None:
                    buffer, layout = (pickle.loads(part) for part in payload)
                    shared["views"] = layout.views(buffer)
                bound = _WorkerEnv(env, shared["views"][indices[position]]).handlers()
            handlers.update(bound if own is None else own.wrap(bound))

        handlers.update(
            start=(lambda _: EnvMetaData.from_env(env)) if report[position] else lambda _: None,
            bind=bind,
            close=lambda _: env.close(),
        )
        return handlers

    setups = [functools.partial(setup, position) for position in range(len(indices))]
    serve(conn, setups, hot={STEP: "step_hot"})

"""SyncDataCollector: batches of frames gathered from one env in the calling process."""

from __future__ import annotations

import copy
import os
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.nn import InteractionType, set_interaction_type
from tensordict.utils import NestedKey
from torch import nn

from rlcore import EnvBase, import_optional
from rlcore.env_flags import truth_value
from rlspecs import parse_device
from rltransforms import StepCounter, TransformedEnv

from ._base import CollectorBase
from ._options import (
    DEFAULT_EXPLORATION_TYPE,
    PostProc,
    apply_postproc,
    check_init_random_frames,
    check_postproc,
    check_reset_when_done,
    exploration_from_args,
)
from ._split import TRAJ_IDS, split_trajectories

_BAD_ENV = "create_env_fn must be an EnvBase or a callable returning one, got {type}."
_BAD_FRAMES_PER_BATCH = "frames_per_batch must be a positive int, got {frames}."
_FRAMES_NOT_DIVISIBLE = (
    "frames_per_batch={frames} is not a multiple of the number of envs {numel} "
    "(env.batch_size={batch}); pick a multiple so that every env runs the same number of steps."
)
# torchrl 0.4's text, word for word (its sentences run together), so filters written for it match
_TOTAL_FRAMES_REMAINDER = (
    "total_frames ({total}) is not exactly divisible by frames_per_batch ({frames})."
    "This means {extra} additional frames will be collected."
    "To silence this message, set the environment variable RL_WARNINGS to False."
)
_NO_TRUNCATED = (
    "set_truncated was set to True but no truncated key could be found in the environment "
    "(done keys: {keys}). Make sure the truncated keys are properly set using "
    "`env.add_truncated_keys()` before passing the env to the collector."
)
_RESET_SINGLE_ENV = (
    "resetting a single env (env.batch_size=()) with an index is not permitted; call reset() "
    "without index."
)
_BAD_RESET_INDEX = "reset index {index!r} does not select envs of env.batch_size={batch}: {err}"
_MISSING_STATE = "state_dict has no {key!r} entry (it holds {keys}); strict=False skips it."
_POLICY_NO_STATE = (
    "state_dict holds a 'policy_state_dict' but the collector's policy ({type}) has no "
    "load_state_dict."
)


Policy = Callable[[TensorDictBase], TensorDictBase]


def _leaf(key: NestedKey) -> str:
    return key if isinstance(key, str) else key[-1]


def rl_warnings_enabled() -> bool:
    """Whether torchrl-style advisory warnings are on: the ``RL_WARNINGS`` env variable.

    Read at each call (torchrl 0.4 reads it once, at import); unset means on. Accepts
    the words torchrl's ``strtobool`` does, in any case.
    """
    return truth_value("RL_WARNINGS", os.environ.get("RL_WARNINGS", "1"))


def warn_total_frames_remainder(total_frames: int | None, frames_per_batch: int) -> None:
    """Warns (``UserWarning``, as torchrl 0.4) when whole batches overshoot ``total_frames``.

    Collection stops at the first whole batch that reaches ``total_frames``, so a total that
    is not a multiple of ``frames_per_batch`` collects ``frames_per_batch - remainder`` more
    frames. Silent for no limit (``None`` or negative) and under ``RL_WARNINGS=0``. The
    warning points at the line that built the collector (call this from ``__init__``).
    """
    if total_frames is None or total_frames < 0:
        return
    remainder = total_frames % frames_per_batch
    if remainder and rl_warnings_enabled():
        warnings.warn(
            _TOTAL_FRAMES_REMAINDER.format(
                total=total_frames, frames=frames_per_batch, extra=frames_per_batch - remainder
            ),
            UserWarning,
            stacklevel=3,
        )


def _on_device(module: nn.Module, device: torch.device) -> bool:
    tensors = [*module.parameters(), *module.buffers()]
    return all(t.device == device for t in tensors)


class SyncDataCollector(CollectorBase):
    """Runs a policy in an env and yields batches of ``frames_per_batch`` frames.

    Each batch has shape ``[*env.batch_size, frames_per_batch // env.batch_size.numel()]``
    (last dim named ``"time"``) and holds what ``env.rollout`` would return, plus
    ``("collector", "traj_ids")``: an id per trajectory, fresh after every reset.
    Trajectories carry over from one batch to the next; done envs are reset as
    the collection goes. Iteration stops once ``total_frames`` frames were
    yielded (``-1``: never).

    Args:
        create_env_fn: an env, or a callable returning one.
        policy: a callable reading and writing a tensordict (a TensorDict module);
            ``None`` samples random actions from the env's action spec.
        frames_per_batch: frames per yielded batch, a multiple of the env's batch numel.
        total_frames: frames to collect in all, ``-1`` or ``None`` for no limit. Collection
            stops after the first whole batch that reaches it: a total that is not a
            multiple of ``frames_per_batch`` collects more frames, with a ``UserWarning``
            as in torchrl 0.4 (silenced by the env variable ``RL_WARNINGS=0``).
        device: default for ``env_device``, ``policy_device`` and ``storing_device``.
        storing_device: device of the yielded batches (defaults to the env's device, else CPU).
        env_device: device the env is moved to.
        policy_device: device the policy runs on; a policy with parameters on
            another device is copied there (see ``update_policy_weights_``).
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        max_frames_per_traj: truncate trajectories after this many steps
            (through a ``StepCounter``).
        init_random_frames: the policy is ignored (random actions from the env's
            action spec) until this many frames were collected; whole batches, so
            it is rounded up to a multiple of ``frames_per_batch``. ``None`` or
            negative: no random frames.
        reset_at_each_iter: reset every env at the start of each batch.
        postproc: a callable applied to each batch (after ``split_trajs``) before
            it is yielded; it gets a batch of its own (a copy, or a shallow copy
            of the buffer with ``return_same_td``) and returns a tensordict.
            A module is moved to ``storing_device``.
        split_trajs: yield ``[n_trajectories, max_length]`` batches (see
            ``split_trajectories``) instead of ``[*batch, time]`` ones.
        exploration_type: the ``tensordict.nn.InteractionType`` (``rlmodules.ExplorationType``)
            set while the policy runs; probabilistic modules sample with ``RANDOM``
            (default) and take their mode or mean with ``MODE`` / ``MEAN``.
        exploration_mode: deprecated alias of ``exploration_type``, as a string
            (``"random"``, ``"mode"``, ...); warns.
        return_same_td: yield the internal buffer itself, overwritten by the
            next batch, instead of a copy.
        reset_when_done: must stay ``True``: done envs are always reset (as in
            torchrl 0.4, where ``False`` raises a ``ValueError`` too).
        set_truncated: mark the last step of every batch as truncated: each
            ``("next", ..., "truncated")`` entry and its ``"done"`` are set to
            ``True`` there (``"terminated"`` is left alone). The env keeps running:
            the next batch continues the same trajectories. Raises a ``RuntimeError``
            when the env has no truncated key (see ``env.add_truncated_keys()``).
        progress_bar: show a tqdm progress bar over ``total_frames``.

    Examples:
        >>> import torch
        >>> from rlcollectors import SyncDataCollector
        >>> from rlmocks import CountingEnv
        >>> step_up = lambda td: td.set("action", torch.ones(1, dtype=torch.int8))
        >>> collector = SyncDataCollector(
        ...     CountingEnv(max_steps=3), step_up, frames_per_batch=10, total_frames=20
        ... )
        >>> for batch in collector:
        ...     print(batch.shape, batch["collector", "traj_ids"].tolist())
        torch.Size([10]) [0, 0, 0, 0, 1, 1, 1, 1, 2, 2]
        torch.Size([10]) [2, 2, 3, 3, 3, 3, 4, 4, 4, 4]
        >>> collector.shutdown()
    """

    def __init__(
        self,
        create_env_fn: EnvBase | Callable[..., EnvBase],
        policy: Policy | None = None,
        *,
        frames_per_batch: int,
        total_frames: int | None = -1,
        device: torch.device | str | None = None,
        storing_device: torch.device | str | None = None,
        env_device: torch.device | str | None = None,
        policy_device: torch.device | str | None = None,
        create_env_kwargs: dict[str, Any] | None = None,
        max_frames_per_traj: int | None = None,
        init_random_frames: int | None = None,
        reset_at_each_iter: bool = False,
        postproc: PostProc | None = None,
        split_trajs: bool = False,
        exploration_type: InteractionType = DEFAULT_EXPLORATION_TYPE,
        exploration_mode: str | None = None,
        return_same_td: bool = False,
        reset_when_done: bool = True,
        set_truncated: bool = False,
        progress_bar: bool = False,
    ) -> None:
        self._closed = True  # until the env exists, so shutdown() from a failed init is a no-op
        if not isinstance(frames_per_batch, int) or frames_per_batch <= 0:
            raise ValueError(_BAD_FRAMES_PER_BATCH.format(frames=frames_per_batch))
        warn_total_frames_remainder(total_frames, frames_per_batch)
        check_reset_when_done(reset_when_done)
        check_postproc(postproc)
        self.init_random_frames: int | float = check_init_random_frames(init_random_frames)
        self.exploration_type = exploration_from_args(exploration_type, exploration_mode)
        env = self._make_env(create_env_fn, create_env_kwargs)
        env_device = parse_device(env_device if env_device is not None else device)
        if env_device is not None:
            env = env.to(env_device)
        if max_frames_per_traj is not None:
            env = TransformedEnv(env, StepCounter(max_frames_per_traj))
        self.env = env
        self._closed = False

        numel = env.batch_size.numel()
        if frames_per_batch % numel:
            self.shutdown()
            raise ValueError(
                _FRAMES_NOT_DIVISIBLE.format(
                    frames=frames_per_batch, numel=numel, batch=tuple(env.batch_size)
                )
            )
        self.frames_per_batch = frames_per_batch
        self.total_frames = -1 if total_frames is None else total_frames
        self._steps = frames_per_batch // numel
        self._time_dim = env.batch_dims

        self.env_device = env.device
        self.policy_device = parse_device(policy_device if policy_device is not None else device)
        self.storing_device = parse_device(
            storing_device if storing_device is not None else device
        ) or (self.env_device or torch.device("cpu"))
        self._to_storage = self.env_device != self.storing_device
        self._policy_source = policy
        self.policy = self._place_policy(policy)
        self._cast_to_policy = (
            self.policy_device is not None and self.policy_device != self.env_device
        )
        self._policy_out_keys: list[NestedKey] | None = getattr(self.policy, "out_keys", None)

        self.reset_at_each_iter = reset_at_each_iter
        self.split_trajs = split_trajs
        self.return_same_td = return_same_td
        self.reset_when_done = reset_when_done
        self.progress_bar = progress_bar
        # "done" is terminated | truncated, so the "done" leaves alone tell where trajectories end
        done_keys = list(env.done_keys)
        self._done_keys = [k for k in done_keys if _leaf(k) == "done"]
        self._done_keys = self._done_keys or done_keys
        self.set_truncated = set_truncated
        # the ("next", ...) entries set_truncated flips on the last step: truncated and its done
        self._truncation_keys: list[NestedKey] = []
        if set_truncated:
            truncated = [k for k in done_keys if _leaf(k) == "truncated"]
            if not truncated:
                self.shutdown()
                raise RuntimeError(_NO_TRUNCATED.format(keys=done_keys))
            for key in truncated:
                done = (*key[:-1], "done") if isinstance(key, tuple) else "done"
                self._truncation_keys += [key, done] if done in done_keys else [key]
        self.postproc = postproc
        if postproc is not None and isinstance(postproc, nn.Module):
            postproc.to(self.storing_device)
        self._frames = 0
        self._iter = -1
        self._carrier: TensorDictBase | None = None
        self._buffer: TensorDictBase | None = None
        self._buffer_env_part: TensorDictBase | None = None
        self._buffer_keys: set[NestedKey] = set()
        # the batch's step outputs and trajectory ids, stacked into the buffer once per batch
        self._steps_out: list[TensorDictBase | None] = [None] * self._steps
        self._traj_ids_out: list[torch.Tensor | None] = [None] * self._steps
        self._traj_ids = torch.empty(env.batch_size, dtype=torch.int64, device=self.storing_device)
        self._next_traj_id = 0

    @staticmethod
    def _make_env(create_env_fn: Any, kwargs: dict[str, Any] | None) -> EnvBase:
        env = (
            create_env_fn if isinstance(create_env_fn, EnvBase) else create_env_fn(**(kwargs or {}))
        )
        if not isinstance(env, EnvBase):
            raise TypeError(_BAD_ENV.format(type=type(env).__name__))
        return env

    def _place_policy(self, policy: Policy | None) -> Policy | None:
        device = self.policy_device
        if isinstance(policy, nn.Module) and device is not None and not _on_device(policy, device):
            # the caller's policy stays where it is; update_policy_weights_ syncs the copy
            return copy.deepcopy(policy).to(device)
        return policy

    def _iterate(self) -> Iterator[TensorDictBase]:
        bar = self._make_bar()
        try:
            while self.total_frames < 0 or self._frames < self.total_frames:
                self._check_open()
                batch = self.rollout()
                self._frames += batch.numel()
                self._iter += 1
                if bar is not None:
                    bar.update(batch.numel())
                if self.split_trajs:
                    batch = split_trajectories(batch)
                elif not self.return_same_td:
                    batch = batch.clone()
                elif self.postproc is not None:
                    batch = batch.copy()  # entries the postproc adds stay out of the buffer
                if self.postproc is not None:
                    batch = apply_postproc(self.postproc, batch)
                yield batch
        finally:
            if bar is not None:
                bar.close()

    def _make_bar(self) -> Any:
        if not self.progress_bar:
            return None
        tqdm = import_optional("tqdm", "rlcollectors", "progress", "progress_bar=True").tqdm
        return tqdm(
            total=self.total_frames if self.total_frames >= 0 else None, initial=self._frames
        )

    @torch.no_grad()
    def rollout(self) -> TensorDictBase:
        """Collects one batch into the internal buffer and returns that buffer.

        The actions are random (from the env's action spec) while fewer than
        ``init_random_frames`` frames were collected; the policy runs under
        ``exploration_type``.
        """
        self._check_open()
        env = self.env
        if self._carrier is None or self.reset_at_each_iter:
            self._carrier = env.reset()
            self._start_trajectories(None)
        carrier = self._carrier
        steps, traj_ids = self._steps_out, self._traj_ids_out
        to_storage = self._to_storage
        act = self._act if self._frames >= self.init_random_frames else env.rand_action
        with set_interaction_type(self.exploration_type):
            for t in range(self._steps):
                carrier = act(carrier)
                stepped, carrier = env.step_and_maybe_reset(carrier)
                steps[t] = stepped.to(self.storing_device) if to_storage else stepped
                traj_ids[t] = self._traj_ids
                self._start_trajectories(self._ended(stepped))
        self._carrier = carrier
        buffer = self._write_buffer()
        if self._truncation_keys:
            nxt = buffer.get("next")
            for key in self._truncation_keys:
                nxt.get(key).select(self._time_dim, -1).fill_(True)
        return buffer

    def _write_buffer(self) -> TensorDictBase:
        """Stacks the batch's steps into the buffer, laid out like the last step."""
        steps = self._steps_out
        keys = set(steps[-1].keys(include_nested=True, leaves_only=True))
        if keys != self._buffer_keys:
            # first batch, or the steps' entries changed: lay out a (new) buffer
            self._allocate(steps[-1])
            self._buffer_keys = keys
        torch.stack(steps, self._time_dim, out=self._buffer_env_part)
        torch.stack(self._traj_ids_out, self._time_dim, out=self._buffer.get(TRAJ_IDS))
        # drop the references so the steps' memory is freed between batches
        for t in range(self._steps):
            steps[t] = self._traj_ids_out[t] = None
        return self._buffer

    def _allocate(self, step: TensorDictBase) -> None:
        self._buffer = step.unsqueeze(-1).expand(*self.env.batch_size, self._steps).clone()
        self._buffer_env_part = self._buffer.copy()  # same tensors, without the collector entry
        traj_ids = torch.empty(
            self._buffer.batch_size, dtype=torch.int64, device=self.storing_device
        )
        self._buffer.set(TRAJ_IDS, traj_ids)
        self._buffer.refine_names(*[None] * self._time_dim, "time")

    def _act(self, carrier: TensorDictBase) -> TensorDictBase:
        policy = self.policy
        if policy is None:
            return self.env.rand_action(carrier)
        if not self._cast_to_policy:
            out = policy(carrier)
            if out is not carrier:
                carrier.update(out)
            return carrier
        out = policy(carrier.to(self.policy_device))
        if self._policy_out_keys is None:
            self._policy_out_keys = [
                k for k in out.keys(True, True) if k not in carrier.keys(True, True)
            ]
        update = out.select(*self._policy_out_keys, strict=False)
        return carrier.update(update.to(self.env_device) if self.env_device is not None else update)

    def _ended(self, stepped: TensorDictBase) -> torch.Tensor:
        nxt = stepped.get("next")
        batch = self.env.batch_size
        ended = None
        for key in self._done_keys:
            done = nxt.get(key).reshape(*batch, -1).any(-1)
            ended = done if ended is None else ended | done
        return ended

    def _start_trajectories(self, mask: torch.Tensor | None) -> None:
        """Gives fresh ids to the envs in ``mask`` (all envs when ``mask`` is None)."""
        if mask is None:
            n = self._traj_ids.numel()
            self._traj_ids = torch.arange(
                self._next_traj_id, self._next_traj_id + n, device=self.storing_device
            ).view(self._traj_ids.shape)
            self._next_traj_id += n
            return
        mask = mask.to(self.storing_device)
        n = int(mask.sum())
        if n:
            self._traj_ids = self._traj_ids.clone()
            self._traj_ids[mask] = torch.arange(
                self._next_traj_id, self._next_traj_id + n, device=self.storing_device
            )
            self._next_traj_id += n

    def set_seed(self, seed: int, static_seed: bool = False) -> int:
        """Seeds the env and returns the seed that follows; the next batch starts from a reset."""
        self._check_open()
        out = self.env.set_seed(seed, static_seed=static_seed)
        self._carrier = None
        return out

    @torch.no_grad()
    def reset(self, index: Any = None, **kwargs: Any) -> None:
        """Resets the envs; the next batch starts from the new state.

        Args:
            index: which sub-envs to reset, as an index into ``env.batch_size``
                (an int, a slice, a bool mask...); ``None`` resets them all.
            **kwargs: passed to ``env.reset``.

        The reset envs start new trajectories (fresh ``("collector", "traj_ids")``);
        the others carry on. Before the first batch every env is reset.

        Examples:
            >>> import torch
            >>> from rlcollectors import SyncDataCollector
            >>> from rlmocks import CountingEnv
            >>> step_up = lambda td: td.set("action", torch.ones(2, 1, dtype=torch.int8))
            >>> collector = SyncDataCollector(
            ...     CountingEnv(max_steps=9, batch_size=[2]), step_up, frames_per_batch=4
            ... )
            >>> collector.next()["next", "observation"].squeeze(-1).tolist()
            [[1, 2], [1, 2]]
            >>> collector.reset(index=0)
            >>> collector.next()["next", "observation"].squeeze(-1).tolist()
            [[1, 2], [3, 4]]
            >>> collector.shutdown()
        """
        self._check_open()
        env = self.env
        batch = env.batch_size
        if index is not None and not batch:
            raise RuntimeError(_RESET_SINGLE_ENV)
        if index is None or self._carrier is None:
            # before the first batch no env has a state to keep: all are reset
            self._carrier = env.reset(**kwargs)
            self._start_trajectories(None)
            return
        mask = torch.zeros(batch, dtype=torch.bool, device=env.device)
        try:
            mask[index] = True
        except (IndexError, TypeError, RuntimeError) as err:
            raise IndexError(
                _BAD_RESET_INDEX.format(index=index, batch=tuple(batch), err=err)
            ) from err
        carrier = self._carrier
        for reset_key, group in zip(env.reset_keys, env.done_keys_groups):
            shape = env.full_done_spec[group[0]].shape
            flags = mask.reshape(*batch, *[1] * (len(shape) - len(batch))).expand(shape)
            carrier.set(reset_key, flags.clone())
        self._carrier = env.reset(carrier, **kwargs)
        self._start_trajectories(mask)

    def state_dict(self) -> OrderedDict:
        """The collector's state: env and policy states, frames and batches so far.

        Returns an ``OrderedDict`` with (as torchrl 0.4) ``"env_state_dict"`` (the
        transforms' state for a ``TransformedEnv``, e.g. normalisation statistics,
        else empty), ``"policy_state_dict"`` (when the policy has a ``state_dict``),
        ``"frames"`` and ``"iter"`` (index of the last batch, ``-1`` before the first).

        Examples:
            >>> from rlcollectors import SyncDataCollector
            >>> from rlmocks import CountingEnv
            >>> collector = SyncDataCollector(CountingEnv(), frames_per_batch=5)
            >>> _ = collector.next()
            >>> state = collector.state_dict()
            >>> list(state), state["frames"], state["iter"]
            (['env_state_dict', 'frames', 'iter'], 5, 0)
            >>> collector.shutdown()
        """
        env_state = self.env.state_dict() if isinstance(self.env, TransformedEnv) else OrderedDict()
        state = OrderedDict()
        if callable(getattr(self.policy, "state_dict", None)):
            state["policy_state_dict"] = self.policy.state_dict()
        state["env_state_dict"] = env_state
        state["frames"] = self._frames
        state["iter"] = self._iter
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> None:
        """Loads a ``state_dict()`` into the env's transforms and the policy, and restores counts.

        With ``strict=False`` missing ``"env_state_dict"`` / ``"policy_state_dict"``
        entries are skipped and passed on as ``strict=False`` to the modules.
        """
        self._check_open()
        keys = list(state_dict)
        needed = ["env_state_dict", "frames", "iter"]
        if strict and callable(getattr(self.policy, "state_dict", None)):
            needed.append("policy_state_dict")
        for key in needed:
            if key not in state_dict and (strict or key in ("frames", "iter")):
                raise KeyError(_MISSING_STATE.format(key=key, keys=keys))
        policy_state = state_dict.get("policy_state_dict")
        if policy_state is not None:
            if not callable(getattr(self.policy, "load_state_dict", None)):
                raise TypeError(_POLICY_NO_STATE.format(type=type(self.policy).__name__))
        env_state = state_dict.get("env_state_dict")
        if env_state is not None and (env_state or isinstance(self.env, TransformedEnv)):
            self.env.load_state_dict(env_state, strict=strict)
        if policy_state is not None:
            self.policy.load_state_dict(policy_state, strict=strict)
        self._frames = int(state_dict["frames"])
        self._iter = int(state_dict["iter"])

    def update_policy_weights_(
        self, policy_weights: TensorDictBase | nn.Module | None = None
    ) -> None:
        """Copies weights into the policy the collector runs.

        With no argument, copies from the policy given at construction (a no-op when
        the collector runs that very object). A module or a tensordict of weights
        (``TensorDict.from_module`` layout) is copied from instead.
        """
        if not isinstance(self.policy, nn.Module):
            return
        if policy_weights is None:
            if self.policy is self._policy_source:
                return
            policy_weights = self._policy_source
        if isinstance(policy_weights, nn.Module):
            policy_weights = TensorDict.from_module(policy_weights)
        TensorDict.from_module(self.policy).data.update_(policy_weights.data)

    def shutdown(self) -> None:
        """Closes the env; iterating afterwards raises a RuntimeError."""
        if self._closed:
            return
        self._closed = True
        self._carrier = None
        self._buffer = None
        self._buffer_env_part = None
        self._buffer_keys = set()
        if not self.env.is_closed:
            self.env.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={type(self.env).__name__}, frames_per_batch={self.frames_per_batch}, "
            f"total_frames={self.total_frames}, frames={self._frames}, storing_device={self.storing_device})"
        )

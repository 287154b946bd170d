"""SyncDataCollector: batches of frames gathered from one env in the calling process."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase
from tensordict.utils import NestedKey
from torch import nn

from rlcore import EnvBase, import_optional
from rlcore.transforms import StepCounter, TransformedEnv
from rlspecs import parse_device

from ._base import CollectorBase
from ._split import TRAJ_IDS, split_trajectories

_BAD_ENV = "create_env_fn must be an EnvBase or a callable returning one, got {type}."
_BAD_FRAMES_PER_BATCH = "frames_per_batch must be a positive int, got {frames}."
_FRAMES_NOT_DIVISIBLE = (
    "frames_per_batch={frames} is not a multiple of the number of envs {numel} "
    "(env.batch_size={batch}); pick a multiple so that every env runs the same number of steps."
)

Policy = Callable[[TensorDictBase], TensorDictBase]


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
        total_frames: frames to collect in all, ``-1`` for no limit.
        device: default for ``env_device``, ``policy_device`` and ``storing_device``.
        storing_device: device of the yielded batches (defaults to the env's device, else CPU).
        env_device: device the env is moved to.
        policy_device: device the policy runs on; a policy with parameters on
            another device is copied there (see ``update_policy_weights_``).
        create_env_kwargs: keyword arguments for ``create_env_fn``.
        max_frames_per_traj: truncate trajectories after this many steps
            (through a ``StepCounter``).
        reset_at_each_iter: reset every env at the start of each batch.
        split_trajs: yield ``[n_trajectories, max_length]`` batches (see
            ``split_trajectories``) instead of ``[*batch, time]`` ones.
        return_same_td: yield the internal buffer itself, overwritten by the
            next batch, instead of a copy.
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
        total_frames: int = -1,
        device: torch.device | str | None = None,
        storing_device: torch.device | str | None = None,
        env_device: torch.device | str | None = None,
        policy_device: torch.device | str | None = None,
        create_env_kwargs: dict[str, Any] | None = None,
        max_frames_per_traj: int | None = None,
        reset_at_each_iter: bool = False,
        split_trajs: bool = False,
        return_same_td: bool = False,
        progress_bar: bool = False,
    ) -> None:
        self._closed = True  # until the env exists, so shutdown() from a failed init is a no-op
        if not isinstance(frames_per_batch, int) or frames_per_batch <= 0:
            raise ValueError(_BAD_FRAMES_PER_BATCH.format(frames=frames_per_batch))
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
        self.total_frames = total_frames
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
        self.progress_bar = progress_bar
        # "done" is terminated | truncated, so the "done" leaves alone tell where trajectories end
        done_keys = list(env.done_keys)
        self._done_keys = [k for k in done_keys if (k if isinstance(k, str) else k[-1]) == "done"]
        self._done_keys = self._done_keys or done_keys
        self._frames = 0
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
                if bar is not None:
                    bar.update(batch.numel())
                if self.split_trajs:
                    yield split_trajectories(batch)
                else:
                    yield batch if self.return_same_td else batch.clone()
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
        """Collects one batch into the internal buffer and returns that buffer."""
        self._check_open()
        env = self.env
        if self._carrier is None or self.reset_at_each_iter:
            self._carrier = env.reset()
            self._start_trajectories(None)
        carrier = self._carrier
        steps, traj_ids = self._steps_out, self._traj_ids_out
        to_storage = self._to_storage
        for t in range(self._steps):
            carrier = self._act(carrier)
            stepped, carrier = env.step_and_maybe_reset(carrier)
            steps[t] = stepped.to(self.storing_device) if to_storage else stepped
            traj_ids[t] = self._traj_ids
            self._start_trajectories(self._ended(stepped))
        self._carrier = carrier
        return self._write_buffer()

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

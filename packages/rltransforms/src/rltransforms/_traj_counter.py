"""`TrajCounter`: a trajectory counter shared by every env holding it, across processes too."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import torch
from tensordict import NestedKey, TensorDict, TensorDictBase, unravel_key

from rlcore import keep_shared
from rlspecs import Bounded, Composite

from ._base import Transform, _get
from ._process_lock import _ProcessLock

__all__ = ["TrajCounter"]

CALL_ERROR = "{cls} can only be called within an environment step or reset."
STEP_BEFORE_RESET_ERROR = "_step was called before _reset was called."
NO_DONE_ERROR = "Could not find root of traj_count key {key} in done keys {done_keys}."
NOT_COMPOSITE_ERROR = "observation_spec was expected to be of type Composite. Got {type} instead."
NO_RESET_KEY_ERROR = (
    "Did not find reset key that matched the prefix of the traj counter key. Reset keys: "
    "{reset_keys}, traj count: {key}"
)


def _prefix(key: NestedKey) -> tuple[str, ...]:
    return () if isinstance(key, str) else tuple(key[:-1])


class TrajCounter(Transform):
    """Numbers trajectories: each reset gives the sub-envs it resets the next free numbers.

    The count lives in shared memory under a process-shared lock, so that every env holding
    the counter (clones of one `TrajCounter`, the envs an `EnvCreator` builds, `ParallelEnv`
    workers started by fork, spawn or forkserver) draws from the same sequence: no two
    trajectories get the same number. The number is written at `out_key` on reset and carried
    over at every step. A nested `out_key` counts the trajectories of the done entries at the
    same level (`("agents", "traj_count")` for `("agents", "done")`).

    `state_dict()` holds `"traj_count"` (the next number, as in torchrl) and the shared counter
    itself (`"_extra_state"`, which `EnvCreator` shares with the envs it builds).

    Args:
        out_key: where to write the trajectory number (default `"traj_count"`).
        repeats: kept for torchrl's signature (unused there too).

    Examples:
        >>> from rlmocks import CountingEnv
        >>> from rltransforms import StepCounter, TransformedEnv
        >>> env = TransformedEnv(CountingEnv(max_steps=100), StepCounter(3))
        >>> env = env.append_transform(TrajCounter())
        >>> r = env.rollout(7, break_when_any_done=False)
        >>> r["next", "traj_count"].squeeze(-1).tolist()
        [0, 0, 0, 1, 1, 1, 2]
    """

    def __init__(self, out_key: NestedKey = "traj_count", *, repeats: int | None = None) -> None:
        super().__init__(in_keys=[], out_keys=[out_key])
        self._td = TensorDict(traj_count=torch.zeros((), dtype=torch.int64)).share_memory_()
        self.lock = _ProcessLock()
        self._initialized = False
        self.repeats = 0 if repeats is None else repeats
        self._reset_key: NestedKey | None = None
        self._count_shape: torch.Size | None = None

    @property
    def traj_count(self) -> int:
        """The number the next trajectory gets."""
        return int(self._td["traj_count"])

    # ------------------------------------------------------------------ data path
    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        self._initialized = True
        key = self.out_keys[0]
        if self._reset_key is None:
            self._find_reset_key()
        reset = None if tensordict is None else _get(tensordict, self._reset_key)
        shape = self._count_shape
        if reset is None:
            reset = torch.ones(shape, dtype=torch.bool, device=tensordict_reset.device)
        elif reset.shape != shape:
            reset = reset.reshape(shape) if reset.numel() == shape.numel() else reset.expand(shape)
        reset = reset.bool()
        n = int(reset.sum())
        counter = self._td["traj_count"]
        with self.lock:
            first = int(counter)
            counter.add_(n)
        episodes = torch.arange(first, first + n, device=reset.device)
        numbers = torch.zeros(shape, dtype=torch.int64, device=reset.device)
        tensordict_reset.set(key, numbers.masked_scatter(reset, episodes))
        return tensordict_reset

    def _find_reset_key(self) -> None:
        container = self.container
        if container is None:
            raise RuntimeError(CALL_ERROR.format(cls=type(self).__name__))
        container.output_spec  # noqa: B018  (building the specs finds the done entries)
        if self._reset_key is None:
            raise RuntimeError(
                NO_RESET_KEY_ERROR.format(reset_keys=container.reset_keys, key=self.out_keys[0])
            )

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        if not self._initialized:
            raise RuntimeError(STEP_BEFORE_RESET_ERROR)
        key = self.out_keys[0]
        next_tensordict.set(key, tensordict.get(key))
        return next_tensordict

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        raise RuntimeError(CALL_ERROR.format(cls=type(self).__name__))

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Not available: the counter only runs within an env's reset and step."""
        raise RuntimeError(CALL_ERROR.format(cls=type(self).__name__))

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        key = unravel_key(self.out_keys[0])
        done_spec = output_spec["full_done_spec"]
        shape = None
        for done_key in done_spec.keys(True, True):
            done_key = unravel_key(done_key)
            if isinstance(done_key, str) == isinstance(key, str) and _prefix(done_key) == _prefix(
                key
            ):
                shape = done_spec[done_key].shape
                break
        if shape is None:
            done_keys = [unravel_key(k) for k in done_spec.keys(True, True)]
            raise KeyError(NO_DONE_ERROR.format(key=key, done_keys=done_keys))
        prefix = _prefix(key)
        self._reset_key = (*prefix, "_reset") if prefix else "_reset"
        self._count_shape = shape
        return super().transform_output_spec(output_spec)

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        if not isinstance(observation_spec, Composite):
            raise ValueError(NOT_COMPOSITE_ERROR.format(type=type(observation_spec)))
        if self._count_shape is None:
            return observation_spec  # called alone: no done spec to shape the counter after
        observation_spec[self.out_keys[0]] = Bounded(
            low=0,
            high=torch.iinfo(torch.int64).max,
            shape=self._count_shape,
            dtype=torch.int64,
            device=observation_spec.device,
        )
        return observation_spec

    # ------------------------------------------------------------------ state
    def get_extra_state(self) -> OrderedDict:
        return OrderedDict(td=self._td, lock=self.lock)

    def set_extra_state(self, state: dict) -> None:
        """Adopt a shared counter (shared with its source); copy the value of any other."""
        lock = state.get("lock")
        if lock is not None:
            self.lock = lock
        td = state.get("td")
        if td is None:
            return
        if td.is_shared() or td.is_memmap():
            self._td = td
        else:
            self._td["traj_count"].copy_(td["traj_count"])

    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination[prefix + "traj_count"] = self.traj_count

    def _load_from_state_dict(
        self,
        state_dict: dict,
        prefix: str,
        local_metadata: dict,
        strict: bool,
        missing_keys: list,
        unexpected_keys: list,
        error_msgs: list,
    ) -> None:
        count = state_dict.pop(prefix + "traj_count", None)
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, False, missing_keys, unexpected_keys, error_msgs
        )
        if count is not None:
            self._td["traj_count"].fill_(int(count))

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        state["_td"] = keep_shared(self._td)  # the same counter in a process being started
        return state

    def __repr__(self) -> str:
        return f"TrajCounter(out_key={self.out_keys[0]}, traj_count={self.traj_count})"

"""Vector envs (gymnasium's, EnvPool's) under ``EnvBase``'s reset contract, in every autoreset mode.

``EnvBase`` expects a step to return the *true* next observation of every sub-env (the final
one when an episode ends) and a later reset, with a ``"_reset"`` mask, to start new episodes in
exactly the masked sub-envs. Gymnasium's vector envs do this three ways:

- ``NEXT_STEP`` (the default): a step returns the final observation; the *next* step would
  reset the finished sub-env (ignoring its action), so the mask reset happens first, through
  ``reset(options={"reset_mask": mask})``, which also clears gymnasium's pending autoreset;
- ``DISABLED``: the same, gymnasium never resets by itself;
- ``SAME_STEP``: a step returns the *reset* observation of a finished sub-env and its final
  observation in ``info["final_obs"]``; the final observation is put back into the step's
  output and the reset observation is kept for the mask reset that follows, which then costs
  no library call.

``VectorCalls`` makes these calls. A sub-env that finished and was not reset may not be stepped
again (gymnasium would reset it silently, or assert): that raises, naming the sub-envs.
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from rlcore import any_true, done_from

__all__ = ["VectorCalls", "supports_reset_mask"]

STEP_AFTER_DONE = (
    "{owner}: sub-envs {ids} finished at the previous step and were not reset; reset them "
    'before stepping again (env.reset(td) with a "_reset" mask, as rollout and '
    "step_and_maybe_reset do)"
)
NO_RESET_MASK = (
    "{owner}: cannot reset only sub-envs {ids} of {cls}: partial resets need a vector env "
    "whose reset(options={{'reset_mask': mask}}) resets just the masked sub-envs "
    "(gymnasium's SyncVectorEnv or AsyncVectorEnv, or EnvPool); build it with "
    'gymnasium.make_vec(..., vectorization_mode="sync") or "async"'
)
FINAL_KEYS = ("final_obs", "_final_obs", "final_info", "_final_info")


def supports_reset_mask(env: Any) -> bool:
    """Whether ``env.reset(options={"reset_mask": mask})`` resets only the masked sub-envs.

    True for gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` (under any vector wrappers)
    and for EnvPool; custom vector envs (e.g. ``CartPoleVectorEnv``) may reset every sub-env.

    Examples:
        >>> import gymnasium as gym
        >>> supports_reset_mask(gym.make_vec("Pendulum-v1", 2, vectorization_mode="sync"))
        True
    """
    from gymnasium.vector import AsyncVectorEnv, SyncVectorEnv

    base = env.unwrapped
    if isinstance(base, (SyncVectorEnv, AsyncVectorEnv)):
        return True
    envpool = sys.modules.get("envpool.python.envpool")
    return envpool is not None and isinstance(base, envpool.EnvPoolMixin)


def _replace_rows(batched: Any, rows: list[tuple[int, Any]]) -> Any:
    """A copy of ``batched`` (arrays, dicts, tuples of arrays) whose rows ``i`` are ``value``."""
    if isinstance(batched, dict):
        return {
            key: _replace_rows(sub, [(i, v[key]) for i, v in rows]) for key, sub in batched.items()
        }
    if isinstance(batched, tuple):
        return tuple(
            _replace_rows(sub, [(i, v[j]) for i, v in rows]) for j, sub in enumerate(batched)
        )
    out = np.array(batched, copy=True)
    for i, value in rows:
        out[i] = value
    return out


def _where_rows(mask: np.ndarray, new: Any, old: Any) -> Any:
    """``new`` where ``mask`` (one entry per sub-env) holds, else ``old``; arrays, dicts, tuples."""
    if isinstance(new, dict):
        return {key: _where_rows(mask, sub, old[key]) for key, sub in new.items()}
    if isinstance(new, tuple):
        return tuple(_where_rows(mask, sub, old[j]) for j, sub in enumerate(new))
    new = np.asarray(new)
    return np.where(mask.reshape(-1, *([1] * (new.ndim - 1))), new, old)


def _scatter(values: Any, ids: np.ndarray, n: int) -> Any:
    """Values of sub-envs ``ids`` (leading dim ``len(ids)``) as arrays of ``n`` rows (zeros elsewhere)."""
    if isinstance(values, dict):
        return {key: _scatter(sub, ids, n) for key, sub in values.items()}
    if isinstance(values, tuple):
        return tuple(_scatter(sub, ids, n) for sub in values)
    if not isinstance(values, np.ndarray) or values.ndim == 0 or values.shape[0] != len(ids):
        return values
    out = np.zeros((n, *values.shape[1:]), dtype=values.dtype)
    out[ids] = values
    return out


def _copy(values: Any) -> Any:
    if isinstance(values, dict):
        return {key: _copy(sub) for key, sub in values.items()}
    if isinstance(values, tuple):
        return tuple(_copy(sub) for sub in values)
    return np.array(values, copy=True)


def _merge_final_info(info: dict, mask: np.ndarray) -> dict:
    """The info of a SAME_STEP step with finished sub-envs' entries taken from ``final_info``.

    Sub-envs that finished report their last step's info (``final_info``), not their reset's;
    entries only the reset reported read as absent (zero, ``_key`` mask False) for them.
    """
    final = info.get("final_info", {})
    merged = {key: value for key, value in info.items() if key not in FINAL_KEYS}
    for key in [key for key in merged if not key.startswith("_")]:
        if key in final or not isinstance(merged[key], np.ndarray):
            continue
        value = np.array(merged[key], copy=True)
        value[mask] = 0
        merged[key] = value
        present = merged.get(f"_{key}")
        if isinstance(present, np.ndarray):
            merged[f"_{key}"] = present & ~mask
    for key, value in final.items():
        if key.startswith("_"):
            continue
        rows = np.asarray(final.get(f"_{key}", mask), dtype=bool)
        old = merged.get(key)
        if (
            isinstance(old, np.ndarray)
            and isinstance(value, np.ndarray)
            and old.shape == value.shape
        ):
            merged[key] = _where_rows(rows, value, old)
            present = merged.get(f"_{key}")
            merged[f"_{key}"] = rows if present is None else (np.asarray(present) & ~mask) | rows
        else:
            merged[key] = value
            merged[f"_{key}"] = rows
    return merged


class VectorCalls:
    """``reset``/``step`` of a vector env with ``EnvBase``'s semantics (see the module docstring).

    Args:
        env: the vector env (gymnasium ``VectorEnv`` or EnvPool in sync mode).
        owner: the wrapper's name, for error messages.

    Examples:
        >>> import gymnasium as gym
        >>> calls = VectorCalls(gym.make_vec("Pendulum-v1", 2, vectorization_mode="sync"), "doc")
        >>> obs, info = calls.reset(None, seed=0)
        >>> obs.shape
        (2, 3)
    """

    def __init__(self, env: Any, owner: str) -> None:
        from gymnasium.vector import AutoresetMode

        self.env = env
        self.owner = owner
        self.num_envs = int(env.num_envs)
        mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
        self.autoreset_mode = AutoresetMode(mode)
        self.same_step = self.autoreset_mode == AutoresetMode.SAME_STEP
        self.partial_resets = supports_reset_mask(env)
        # copy=False vector envs return their own buffers, rewritten at every step
        self.copy_obs = getattr(env.unwrapped, "copy", True) is False
        self.finished = np.zeros(self.num_envs, dtype=bool)
        self.any_finished = False
        # SAME_STEP: (sub-envs gymnasium already reset, their reset observations and info)
        self.pending: tuple[np.ndarray, Any, dict] | None = None

    def step(self, action: Any) -> tuple[Any, Any, Any, Any, dict]:
        """One step of every sub-env; finished sub-envs report their final observation."""
        if self.any_finished:
            ids = np.flatnonzero(self.finished).tolist()
            raise RuntimeError(STEP_AFTER_DONE.format(owner=self.owner, ids=ids))
        obs, reward, terminated, truncated, info = self.env.step(action)
        done = done_from(np.asarray(terminated), np.asarray(truncated))
        if any_true(done):
            self.finished = done
            self.any_finished = True
            if self.same_step:
                obs, info = self._final_observations(obs, info, done)
        if self.copy_obs:
            obs = _copy(obs)
        return obs, reward, terminated, truncated, info

    def _final_observations(self, obs: Any, info: dict, done: np.ndarray) -> tuple[Any, dict]:
        mask = np.asarray(info.get("_final_obs", done), dtype=bool)
        final = info["final_obs"]
        rows = [(int(i), final[i]) for i in np.flatnonzero(mask)]
        reset_info = {key: value for key, value in info.items() if key not in FINAL_KEYS}
        self.pending = (mask, _copy(obs) if self.copy_obs else obs, reset_info)
        return _replace_rows(obs, rows), _merge_final_info(info, mask)

    def reset(
        self,
        mask: np.ndarray | None,
        seed: int | list[int] | None = None,
        options: dict | None = None,
        **kwargs: Any,
    ) -> tuple[Any, dict]:
        """Resets the sub-envs where ``mask`` (shape ``(num_envs,)``) holds, or all when None.

        Returns the observations and info of every sub-env; rows outside ``mask`` are not
        meaningful (the caller keeps its own there).
        """
        if mask is None or mask.all():
            self.finished[:] = False
            self.any_finished = False
            self.pending = None
            obs, info = self.env.reset(seed=seed, options=options, **kwargs)
            return (_copy(obs) if self.copy_obs else obs), info
        if not mask.any():
            raise ValueError(f"{self.owner}: the '_reset' mask selects no sub-env")
        return self._partial_reset(mask, seed, options, **kwargs)

    def _partial_reset(
        self, mask: np.ndarray, seed: Any, options: dict | None, **kwargs: Any
    ) -> tuple[Any, dict]:
        reused = None  # SAME_STEP: masked sub-envs gymnasium already reset
        if self.pending is not None:
            pending_mask, pending_obs, pending_info = self.pending
            # a seed or options ask for a real reset, even of sub-envs already reset
            reused = mask & pending_mask if seed is None and not options else None
            left = pending_mask & ~mask
            self.pending = (left, pending_obs, pending_info) if left.any() else None
            if reused is not None:
                mask = mask & ~reused
                if not mask.any():
                    self._mark_reset(reused)
                    return pending_obs, pending_info
        if not self.partial_resets:
            ids = np.flatnonzero(mask).tolist()
            cls = type(self.env.unwrapped).__name__
            raise RuntimeError(NO_RESET_MASK.format(owner=self.owner, ids=ids, cls=cls))
        options = {**(options or {}), "reset_mask": mask}
        obs, info = self.env.reset(seed=seed, options=options, **kwargs)
        count = int(mask.sum())
        leading = _leading(obs)
        if leading != self.num_envs and leading == count:  # EnvPool: the reset sub-envs only
            ids = np.flatnonzero(mask)
            obs, info = _scatter(obs, ids, self.num_envs), _scatter(info, ids, self.num_envs)
        elif self.copy_obs:
            obs = _copy(obs)
        self._mark_reset(mask)
        if reused is not None and reused.any():
            obs = _where_rows(reused, pending_obs, obs)
            info = _merge_rows(reused, pending_info, info)
            self._mark_reset(reused)
        return obs, info

    def _mark_reset(self, mask: np.ndarray) -> None:
        self.finished = self.finished & ~mask
        self.any_finished = bool(self.finished.any())


def _merge_rows(mask: np.ndarray, new: dict, old: dict) -> dict:
    """Info of two resets: ``new``'s entries for the sub-envs of ``mask``, ``old``'s elsewhere."""
    merged = dict(old)
    for key, value in new.items():
        current = merged.get(key)
        if key not in merged:
            merged[key] = value
        elif (
            isinstance(value, np.ndarray)
            and isinstance(current, np.ndarray)
            and value.shape == current.shape
            and value.ndim
        ):
            merged[key] = _where_rows(mask, value, current)
    return merged


def _leading(values: Any) -> int:
    while isinstance(values, (dict, tuple)):
        values = next(iter(values.values())) if isinstance(values, dict) else values[0]
    return int(np.shape(values)[0])

"""``MultiThreadedEnvWrapper`` and ``MultiThreadedEnv``: EnvPool's C++ thread pools as ``EnvBase`` envs.

EnvPool (``pip install "rllibs[envpool]"``) steps many sub-envs in C++ threads behind a
gymnasium vector-env API. Two modes:

- **sync** (EnvPool's ``batch_size == num_envs``, the default): every step moves every sub-env;
  the env has ``batch_size=(num_envs,)`` and behaves like ``GymEnv(..., num_envs=N)``: final
  observations in ``next``, partial resets of the masked sub-envs only.
- **async** (``batch_size < num_envs``): each step sends the actions of the rows at hand to
  their sub-envs and returns the next ``batch_size`` results EnvPool has ready, from whichever
  sub-envs finished first. Rows are not tied to sub-envs: every row carries the ``"env_id"`` of
  its sub-env, at the root and under ``"next"``. A finished sub-env is reset by EnvPool when it
  is next sent an action (that action is ignored) and its new episode comes back in a later
  batch (reward 0, ``elapsed_step`` 0 in the info); a reset with a ``"_reset"`` mask therefore
  only accepts rows whose episode just ended and keeps them as they are, done flags cleared.

In both modes a ``"_reset"`` mask that selects no row is a no-op, as in torchrl 0.4: the reset
returns the current observations (and info entries) of every row, done flags cleared, and
calls nothing in EnvPool.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rlcore import done_from
from rlspecs import Bounded

from ._extras import HAS_ENVPOOL, import_optional
from ._gym import set_specs_from_spaces
from ._gym_like import GymLikeEnv
from ._gym_vector import VectorCalls, _merge_rows, _where_rows
from ._wrapper_api import classproperty

__all__ = ["MultiThreadedEnv", "MultiThreadedEnvWrapper"]

NOT_ENVPOOL = (
    "MultiThreadedEnvWrapper needs an EnvPool env (envpool.make(..., env_type='gymnasium')), "
    "got {type}"
)
NO_DM_ENVPOOL = (
    "MultiThreadedEnvWrapper wraps EnvPool's gymnasium API; build the env with "
    "env_type='gymnasium' (or 'gym'), not {type}"
)
SEED_IGNORED = (
    "MultiThreadedEnvWrapper.set_seed({seed}) cannot reseed an existing EnvPool env: EnvPool "
    "seeds its sub-envs when it is made (envpool.make(..., seed=s) seeds sub-env i with s + i); "
    "use MultiThreadedEnv, which rebuilds the pool with the seed"
)
ASYNC_RESET_RUNNING = (
    "MultiThreadedEnvWrapper (async mode): rows {rows} (sub-envs {ids}) are not done; EnvPool "
    "can only restart a sub-env whose episode ended (it does so when next stepping it). Reset "
    "the whole pool with reset() instead"
)
PARTIAL_SEED = (
    "MultiThreadedEnvWrapper: reset(seed={seed}) with a partial '_reset' mask; EnvPool seeds "
    "the whole pool when it is made, so a seed needs a full reset"
)
ASYNC_UNEVEN_RESET = (
    "MultiThreadedEnvWrapper (async mode): cannot restart every sub-env: {left} of them still "
    "owe a result, fewer than a batch ({batch}), so EnvPool would wait for ever; use num_envs "
    "({num_envs}) a multiple of batch_size, or MultiThreadedEnv, which rebuilds the pool"
)
ASYNC_FRAME_SKIP = (
    "MultiThreadedEnvWrapper: frame_skip={frame_skip} is not available in async mode (each step "
    "returns other sub-envs); pass EnvPool's own frame_skip in create_env_kwargs"
)


def _envpool_module(what: str) -> Any:
    return import_optional("envpool", "envpool", what)


def _available_envs() -> list[str]:
    """EnvPool's task ids, sorted; empty without envpool."""
    if not HAS_ENVPOOL:
        return []
    import envpool

    return sorted(envpool.list_all_envs())


def _spaces(env: Any) -> tuple[Any, Any]:
    """EnvPool's single-env spaces (built on first use, then cached by EnvPool)."""
    with warnings.catch_warnings():
        # EnvPool builds its gymnasium Boxes from float64 bounds: gymnasium's notice of the
        # cast to the (float32) dtype says nothing about the env
        warnings.filterwarnings("ignore", ".*precision lowered by casting", UserWarning)
        return env.single_observation_space, env.single_action_space


class MultiThreadedEnvWrapper(GymLikeEnv):
    """Wrap an EnvPool env (gymnasium API) as a batched ``EnvBase`` env.

    Specs come from EnvPool's single-env spaces (as for ``GymWrapper``, except that a non-dict
    observation is always ``"observation"``, images included, as in torchrl); reward and done
    leaves have shape ``(batch, 1)``. See the module docstring for the sync and async modes.
    EnvPool seeds its sub-envs when it is made, so ``set_seed`` warns and does nothing here
    (``MultiThreadedEnv`` rebuilds the pool instead).

    Args:
        env: the EnvPool env, from ``envpool.make(task_id, env_type="gymnasium", ...)``.
        categorical_action_encoding: discrete actions as labels (``Categorical``, the default,
            as torchrl always did for EnvPool) or, when False, one-hot vectors.
        device: device of the specs and outputs.
        frame_skip: times each action is repeated (sync mode only).
        allow_done_after_reset: as for ``EnvBase``.

    Attributes:
        num_workers: the number of sub-envs in the pool.

    Examples:
        >>> import envpool
        >>> pool = envpool.make("Pendulum-v1", env_type="gymnasium", num_envs=3, seed=0)
        >>> env = MultiThreadedEnvWrapper(pool)
        >>> env.rollout(4)["next", "observation"].shape
        torch.Size([3, 4, 3])
    """

    # torchrl 0.4's library attributes
    git_url = "https://github.com/sail-sg/envpool"
    libname = "envpool"
    available_envs = classproperty(lambda cls: _available_envs())
    lib = classproperty(lambda cls: _envpool_module(cls.__name__))

    def __init__(
        self,
        env: Any = None,
        *,
        categorical_action_encoding: bool = True,
        device: Any = None,
        frame_skip: int = 1,
        allow_done_after_reset: bool = False,
    ) -> None:
        envpool = _envpool_module(type(self).__name__)
        if not isinstance(env, envpool.python.envpool.EnvPoolMixin):
            raise TypeError(NOT_ENVPOOL.format(type=type(env).__name__))
        if not hasattr(type(env), "single_observation_space"):  # a class check: no space built
            raise TypeError(NO_DM_ENVPOOL.format(type=type(env).__name__))
        config = env.config
        self.num_workers = int(config["num_envs"])
        self.is_async = bool(env.is_async)
        if self.is_async and frame_skip != 1:
            raise ValueError(ASYNC_FRAME_SKIP.format(frame_skip=frame_skip))
        rows = int(config["batch_size"]) if self.is_async else self.num_workers
        super().__init__(
            device=device,
            batch_size=torch.Size([rows]),
            frame_skip=frame_skip,
            allow_done_after_reset=allow_done_after_reset,
        )
        self.categorical_action_encoding = categorical_action_encoding
        self._attach(env)

    def _attach(self, env: Any) -> None:
        """Use ``env`` (a new pool, after a reseed) and reset it."""
        self._env = env
        self._vector = None if self.is_async else VectorCalls(env, type(self).__name__)
        # async mode: the sub-env of each row, its last observation and whether it just ended
        self._env_ids = np.zeros(self.batch_size[0], dtype=np.int32)
        # both modes: the last observations and info of every row (a reset selecting no row
        # returns them); async: with each row's sub-env id
        self._last_obs: Any = None
        self._last_info: dict = {}
        self._rows_done = np.zeros(self.batch_size[0], dtype=bool)
        # results EnvPool owes us (a pool holds at most one per sub-env), and whether actions
        # were sent since the last full reset
        self._outstanding = 0
        self._stepped = False
        self._make_specs()
        self._env_reset(None, None)

    def _make_specs(self) -> None:
        obs_space, action_space = _spaces(self._env)
        set_specs_from_spaces(
            self,
            obs_space,
            action_space,
            categorical_action_encoding=self.categorical_action_encoding,
            observation_key="observation",
        )
        if self.is_async:
            read = self._read_obs
            self._read_obs = lambda obs: {**read(obs[0]), "env_id": torch.from_numpy(obs[1])}
            observation_spec = self.full_observation_spec.clone()
            observation_spec["env_id"] = Bounded(
                0,
                self.num_workers - 1,
                shape=self.batch_size,
                dtype=torch.int32,
                device=self.device,
            )
            self.full_observation_spec = observation_spec

    # ------------------------------------------------------------------ library calls
    def _env_reset(self, tensordict: TensorDictBase | None, seed: int | None, **kwargs: Any):
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is not None:
            mask = mask.reshape(self.batch_size).cpu().numpy()
            # async: rows are not sub-envs, so even an all-True mask restarts only those rows
            if mask.all() and not self.is_async:
                mask = None
        if seed is not None:
            if mask is not None:
                raise ValueError(PARTIAL_SEED.format(seed=seed))
            self._reseed(seed)
        if mask is not None and not mask.any():
            # torchrl 0.4: a mask selecting no sub-env resets nothing; every row keeps its data
            return self._last_obs, self._last_info
        if not self.is_async:
            obs, info = self._vector.reset(mask, **kwargs)
            if mask is not None:  # rows outside the mask are not meaningful: keep ours there
                obs = _where_rows(mask, obs, self._last_obs)
                info = _merge_rows(mask, info, self._last_info)
            vars(self).update(_last_obs=obs, _last_info=info)
            return obs, info
        if mask is None:
            return self._restart_all()
        running = mask & ~self._rows_done
        if running.any():
            rows = np.flatnonzero(running).tolist()
            ids = self._env_ids[running].tolist()
            raise ValueError(ASYNC_RESET_RUNNING.format(rows=rows, ids=ids))
        self._rows_done &= ~mask
        return self._last_obs, {}

    # The per-step state below goes straight into the instance dict: nn.Module.__setattr__,
    # which looks for parameters, buffers and submodules first, costs ~2 µs an attribute.
    def _env_step(self, action: Any):
        if not self.is_async:
            result = self._vector.step(action)
            vars(self).update(_last_obs=result[0], _last_info=result[-1])
            return result
        self._env.send(action, self._env_ids)
        vars(self).update(_outstanding=self._outstanding + len(self._env_ids), _stepped=True)
        return self._receive()

    def _receive(self) -> tuple:
        obs, reward, terminated, truncated, info = self._env.recv()
        env_ids = np.asarray(info["env_id"], dtype=np.int32)
        vars(self).update(
            _outstanding=self._outstanding - len(env_ids),
            _env_ids=env_ids,
            _rows_done=done_from(np.asarray(terminated), np.asarray(truncated)),
            _last_obs=(obs, env_ids),
            _last_info=info,
        )
        return self._last_obs, reward, terminated, truncated, info

    def _restart_all(self) -> tuple:
        """Async full reset: every sub-env starts a new episode; the first rows are returned."""
        if self._last_obs is not None and not self._stepped:
            # nothing was sent since the last full reset: these rows are fresh episodes
            return self._last_obs, self._last_info
        rows = self.batch_size[0]
        while self._outstanding >= rows:  # results of actions sent before: dropped by a reset
            self._env.recv()
            self._outstanding -= rows
        if self._outstanding:  # fewer left than a batch: recv would wait for ever
            self._replace_pool()
        self._env.async_reset()
        self._outstanding = self.num_workers
        self._stepped = False
        obs, _, _, _, info = self._receive()
        return obs, info

    def _replace_pool(self) -> None:
        raise RuntimeError(
            ASYNC_UNEVEN_RESET.format(
                num_envs=self.num_workers, batch=self.batch_size[0], left=self._outstanding
            )
        )

    def _set_seed(self, seed: int | None) -> None:
        if seed is not None:
            self._reseed(seed)

    def _reseed(self, seed: int) -> None:
        warnings.warn(SEED_IGNORED.format(seed=seed), UserWarning, stacklevel=3)

    def close(self) -> None:
        """Close the EnvPool env, then this env."""
        self._env.close()
        super().close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(num_workers={self.num_workers}, "
            f"batch_size={self.batch_size}, device={self.device})"
        )


class MultiThreadedEnv(MultiThreadedEnvWrapper):
    """Build an EnvPool env by id and wrap it (torchrl's names and arguments).

    ``envpool.make(env_name, env_type="gymnasium", num_envs=num_workers, **create_env_kwargs)``;
    ``ALE/`` prefixes are dropped (EnvPool names Atari games ``"Pong-v5"``). Pass
    ``create_env_kwargs={"batch_size": k}`` with ``k < num_workers`` for the async mode, and
    EnvPool's own options (``num_threads``, ``frame_skip`` for Atari, ...) the same way.
    ``set_seed(s)`` rebuilds the pool with ``seed=s`` (sub-env ``i`` then starts from ``s + i``).

    Args:
        num_workers: the number of sub-envs (``batch_size`` in sync mode).
        env_name: the EnvPool task id, e.g. ``"Pendulum-v1"``.
        create_env_kwargs: keyword arguments of ``envpool.make``.
        categorical_action_encoding: as for ``MultiThreadedEnvWrapper``.
        device: as for ``MultiThreadedEnvWrapper``.
        frame_skip: as for ``MultiThreadedEnvWrapper``.
        allow_done_after_reset: as for ``EnvBase``.

    Examples:
        >>> env = MultiThreadedEnv(2, "CartPole-v1")
        >>> _ = env.set_seed(0)
        >>> env.rollout(3)["action"].shape
        torch.Size([2, 3])
        >>> env.close()
    """

    def __init__(
        self,
        num_workers: int,
        env_name: str,
        *,
        create_env_kwargs: dict[str, Any] | None = None,
        categorical_action_encoding: bool = True,
        device: Any = None,
        frame_skip: int = 1,
        allow_done_after_reset: bool = False,
    ) -> None:
        self.env_name = env_name.replace("ALE/", "")
        self.create_env_kwargs = dict(create_env_kwargs or {})
        super().__init__(
            self._build_env(num_workers),
            categorical_action_encoding=categorical_action_encoding,
            device=device,
            frame_skip=frame_skip,
            allow_done_after_reset=allow_done_after_reset,
        )

    def _build_env(self, num_workers: int) -> Any:
        envpool = _envpool_module(f"MultiThreadedEnv({self.env_name!r})")
        kwargs = {"gym_reset_return_info": True, **self.create_env_kwargs}
        return envpool.make(self.env_name, env_type="gymnasium", num_envs=num_workers, **kwargs)

    def _reseed(self, seed: int) -> None:
        self.create_env_kwargs["seed"] = seed
        old = self._env
        self._attach(self._build_env(self.num_workers))
        old.close()

    def _replace_pool(self) -> None:
        old = self._env
        self._env = self._build_env(self.num_workers)
        _spaces(self._env)
        self._outstanding = 0
        old.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self.env_name}, num_workers={self.num_workers}, "
            f"batch_size={self.batch_size}, device={self.device})"
        )

"""``GymLikeEnv``: the base of wrappers around libraries that return NumPy results and info dicts."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase, Stepper, done_from
from rlspecs import Composite
from rlspecs.private_apis import td_new

from ._gym_stepper import gym_stepper
from ._info_reader import default_info_dict_reader
from ._wrapper_api import LibraryWrapperAPI

__all__ = ["GymLikeEnv"]

BAD_FRAME_SKIP = "frame_skip must be an integer >= 1, got {frame_skip!r}"

InfoDictReader = Callable[[Mapping[str, Any], TensorDictBase], TensorDictBase]


class GymLikeEnv(LibraryWrapperAPI, EnvBase):
    """Base of the wrappers of libraries that return NumPy results and info dicts.

    A subclass builds its specs, then sets two converters, decided once from the specs:
    ``self._read_obs`` (library observation → dict of tensors keyed like the observation spec)
    and ``self._write_action`` (action tensor → what the library's ``step`` takes), and
    implements two calls into the library (the action, a tensor or a tensordict for
    structured actions, is read under ``"action"``):

    - ``_env_reset(tensordict, seed, **kwargs) -> (observation, info)``;
    - ``_env_step(action) -> (observation, reward, terminated, truncated, info)``.

    The base turns them into ``_reset``/``_step``: it repeats the action ``frame_skip`` times
    (summing the rewards, stopping at the first done; with a batch, when any sub-env is done),
    writes ``reward``, ``done`` (the step contract's rule, ``rlcore.done_from``), ``terminated``
    and ``truncated``, and runs the info dict readers. ``set_seed(seed)`` makes the next reset
    seeded (a reset without a pending seed does not reseed). Where its results have a fixed
    layout it offers a stepper (``rllibs._gym_stepper``), which the rollout and the batched
    envs use instead of a tensordict per step.

    Examples:
        >>> from rllibs import GymEnv
        >>> env = GymEnv("Pendulum-v1", frame_skip=2)
        >>> isinstance(env, GymLikeEnv), env.frame_skip
        (True, 2)
    """

    _read_obs: Callable[[Any], dict]
    _write_action: Callable[[Any], Any]

    def __init__(
        self,
        *,
        device: Any = None,
        batch_size: Any = None,
        frame_skip: int = 1,
        allow_done_after_reset: bool = False,
    ) -> None:
        if not isinstance(frame_skip, int) or isinstance(frame_skip, bool) or frame_skip < 1:
            raise ValueError(BAD_FRAME_SKIP.format(frame_skip=frame_skip))
        super().__init__(
            device=device, batch_size=batch_size, allow_done_after_reset=allow_done_after_reset
        )
        self.frame_skip = frame_skip
        self._flag_shape = (*self.batch_size, 1)  # reward and done leaves: one entry per env
        self._pending_seed: int | None = None
        self._info_dict_readers: list[InfoDictReader] = []
        self._reward_dtype = np.float32

    # ------------------------------------------------------------------ library calls
    def _env_reset(self, tensordict: TensorDictBase | None, seed: int | None, **kwargs: Any):
        raise NotImplementedError(f"{type(self).__name__} must implement _env_reset")

    def _env_step(self, action: Any):
        raise NotImplementedError(f"{type(self).__name__} must implement _env_step")

    def _reset_reads_input(self) -> bool:
        """Whether ``_env_reset`` reads its tensordict (its stepper's resets then get theirs)."""
        return True

    # ------------------------------------------------------------------ EnvBase hooks
    def _set_seed(self, seed: int | None) -> None:
        self._pending_seed = seed

    def _take_seed(self, seed: int | None) -> int | None:
        """``seed``, or else the pending one from ``set_seed`` (used up: later resets don't reseed)."""
        if seed is None:
            seed = self._pending_seed
            vars(self)["_pending_seed"] = None  # per reset: not through nn.Module.__setattr__
        return seed

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        seed = self._take_seed(kwargs.pop("seed", None))
        obs, info = self._env_reset(tensordict, seed, **kwargs)
        out = self._read_obs(obs)
        shape = self._flag_shape
        out["done"] = torch.zeros(shape, dtype=torch.bool)
        out["terminated"] = torch.zeros(shape, dtype=torch.bool)
        out["truncated"] = torch.zeros(shape, dtype=torch.bool)
        return self._finish(out, info)

    def _library_step(self, action: Any) -> tuple:
        """``_env_step`` repeated ``frame_skip`` times: rewards summed, stopping at a done."""
        reward = 0
        for _ in range(self.frame_skip):
            obs, step_reward, terminated, truncated, info = self._env_step(action)
            reward = reward + step_reward
            if np.any(done_from(np.asarray(terminated), np.asarray(truncated))):
                break
        return obs, reward, terminated, truncated, info

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = self._write_action(tensordict.get("action"))
        if self.frame_skip == 1:
            obs, reward, terminated, truncated, info = self._env_step(action)
        else:
            obs, reward, terminated, truncated, info = self._library_step(action)
        shape = self._flag_shape
        out = self._read_obs(obs)
        out["reward"] = torch.from_numpy(
            np.asarray(reward, dtype=self._reward_dtype).reshape(shape)
        )
        terminated = np.asarray(terminated, dtype=bool).reshape(shape)
        truncated = np.asarray(truncated, dtype=bool).reshape(shape)
        out["done"] = torch.from_numpy(done_from(terminated, truncated))
        out["terminated"] = torch.from_numpy(terminated)
        out["truncated"] = torch.from_numpy(truncated)
        return self._finish(out, info)

    def _stepper(self) -> Stepper | None:
        """Where the library's results have a fixed layout, a stepper writing them into rows.

        The rollout and ``rlbatched``'s envs step through it instead of a tensordict per
        step (see ``rllibs._gym_stepper`` for when it is offered, and ``rlcore._stepper``).

        Examples:
            >>> from rllibs import GymEnv
            >>> GymEnv("Pendulum-v1")._stepper() is not None
            True
        """
        return gym_stepper(self)

    def _finish(self, out: dict, info: Mapping[str, Any]) -> TensorDictBase:
        device = self.device
        if device is None or device.type == "cpu":
            # every tensor was made on the CPU just now: skip the constructor's per-leaf checks
            td = td_new(out, self.batch_size, device)
        else:
            td = TensorDict(out, batch_size=self.batch_size, device=device)
        for reader in self._info_dict_readers:
            reader(info, td)
        return td

    # ------------------------------------------------------------------ info dicts
    def set_info_dict_reader(
        self, info_dict_reader: InfoDictReader | None = None, ignore_private: bool = True
    ) -> GymLikeEnv:
        """Add a reader of the info dict; its specs (when it declares them) join the observation spec.

        ``None`` adds a ``default_info_dict_reader`` of every key, whose specs stay unknown (use
        ``auto_register_info_dict`` to discover and declare them). Returns the env.

        Examples:
            >>> import gymnasium as gym
            >>> from rllibs import GymWrapper, default_info_dict_reader
            >>> env = GymWrapper(gym.make("HalfCheetah-v4"))
            >>> env = env.set_info_dict_reader(default_info_dict_reader(["x_position"]))
            >>> "x_position" in env.observation_spec.keys()
            True
        """
        if info_dict_reader is None:
            info_dict_reader = default_info_dict_reader(ignore_private=ignore_private)
        self._info_dict_readers.append(info_dict_reader)
        info_spec = getattr(info_dict_reader, "info_spec", None)
        if info_spec is not None:
            self._register_info_spec(info_spec)
        else:
            self.empty_cache()  # the step's output changes: plans made from it (dense step) go
        return self

    def auto_register_info_dict(
        self,
        ignore_private: bool = True,
        *,
        info_dict_reader: default_info_dict_reader | None = None,
    ) -> GymLikeEnv:
        """Discover the info keys from a reset and one random step, then read and declare them.

        The library env is reset again afterwards. Returns the env, so that it can end a
        factory: ``lambda: GymWrapper(gym.make(...)).auto_register_info_dict()``.

        Examples:
            >>> import gymnasium as gym
            >>> from rllibs import GymWrapper
            >>> env = GymWrapper(gym.make("HalfCheetah-v4")).auto_register_info_dict()
            >>> "x_velocity" in env.observation_spec.keys()
            True
        """
        if info_dict_reader is None:
            info_dict_reader = default_info_dict_reader(ignore_private=ignore_private)
        if info_dict_reader.info_spec is None or info_dict_reader.keys is None:
            info_dict_reader.infer_spec(self._probe_info(), len(self.batch_size))
        return self.set_info_dict_reader(info_dict_reader)

    def _probe_info(self) -> dict[str, Any]:
        _, reset_info = self._env_reset(None, None)
        with torch.random.fork_rng(devices=[]):  # building an env must not move the global RNG
            action = self._write_action(self.full_action_spec["action"].rand())
        step_info = self._env_step(action)[-1]
        self._env_reset(None, None)
        return {**reset_info, **step_info}

    def _register_info_spec(self, info_spec: Composite) -> None:
        observation_spec = self.full_observation_spec.clone()
        batch = tuple(self.batch_size)
        for key, spec in info_spec.items():
            if batch:
                spec = spec.expand(*batch, *spec.shape)
            observation_spec[key] = spec.to(self.device) if self.device is not None else spec
        self.full_observation_spec = observation_spec

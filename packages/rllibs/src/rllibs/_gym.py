"""``GymWrapper`` and ``GymEnv``: Gymnasium (>= 1.0) environments as ``EnvBase`` envs."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rlspecs import Categorical, Composite, TensorSpec, Unbounded

from ._extras import import_optional
from ._gym_like import GymLikeEnv
from ._gym_spaces import is_image_space, make_reader, make_writer, space_to_spec

__all__ = ["GymEnv", "GymWrapper"]

MISSING_ENV = "GymWrapper needs a gymnasium env (got None); to build one by id use GymEnv(env_name)"
SAME_STEP_AUTORESET = (
    "GymWrapper cannot wrap the vector env {env}: its autoreset mode is SAME_STEP; build it with "
    'autoreset_mode="NextStep" (the default) or "Disabled"'
)
VECTOR_PIXELS = (
    "GymWrapper(from_pixels=True) cannot render the vector env {env}; render in each sub-env "
    "(gymnasium.wrappers.AddRenderObservation) before vectorising"
)
NO_RGB_RENDER = (
    "GymWrapper(from_pixels=True) needs an env made with render_mode='rgb_array', got "
    "render_mode={mode!r} for {env}"
)


def _expand(spec: TensorSpec, batch: tuple[int, ...]) -> TensorSpec:
    if not batch:
        return spec
    if isinstance(spec, Composite):
        return spec.expand(*batch)
    return spec.expand(*batch, *spec.shape)


class GymWrapper(GymLikeEnv):
    """Wrap a gymnasium env (or vector env) as an ``EnvBase`` env.

    Spaces become specs (Box → ``Bounded``/``Unbounded``, Discrete → ``OneHot`` or, with
    ``categorical_action_encoding=True``, ``Categorical``, MultiDiscrete, MultiBinary → ``Binary``,
    Dict → ``Composite``, Tuple → stacked); a non-dict observation goes under ``"observation"``,
    or ``"pixels"`` when it is an image. Each step writes ``reward``, ``terminated``,
    ``truncated`` and ``done``. A vector env gives ``batch_size=(num_envs,)``; partial resets
    use its ``reset_mask`` option, so its autoreset mode must be NextStep or Disabled. The env is
    reset once (unseeded) when wrapped, so that ``step`` works before the first ``reset``.

    Args:
        env: the gymnasium env.
        categorical_action_encoding: Discrete spaces as labels instead of one-hot vectors.
        device: device of the specs and outputs.
        frame_skip: times each action is repeated (rewards summed, stopping at a done).
        from_pixels: add the rendered frame under ``"pixels"`` (the env must render
            ``rgb_array``); with ``pixels_only`` the frame replaces the observation.
        pixels_only: see ``from_pixels``.
        allow_done_after_reset: as for ``EnvBase``.

    Examples:
        >>> import gymnasium as gym
        >>> env = GymWrapper(gym.make("Pendulum-v1"))
        >>> _ = env.set_seed(0)
        >>> env.rollout(3)["next", "observation"].shape
        torch.Size([3, 3])
    """

    def __init__(
        self,
        env: Any = None,
        categorical_action_encoding: bool = False,
        device: Any = None,
        frame_skip: int = 1,
        from_pixels: bool = False,
        pixels_only: bool = True,
        allow_done_after_reset: bool = False,
    ) -> None:
        gym = import_optional("gymnasium", "gym", type(self).__name__)
        if env is None:
            raise TypeError(MISSING_ENV)
        batched = isinstance(env, gym.vector.VectorEnv)
        if batched:
            mode = env.metadata.get("autoreset_mode")
            if mode == gym.vector.AutoresetMode.SAME_STEP:
                raise ValueError(SAME_STEP_AUTORESET.format(env=env))
            if from_pixels:
                raise ValueError(VECTOR_PIXELS.format(env=env))
        elif from_pixels:
            if env.render_mode != "rgb_array":
                raise ValueError(NO_RGB_RENDER.format(mode=env.render_mode, env=env))
            env = gym.wrappers.AddRenderObservation(
                env, render_only=pixels_only, render_key="pixels", obs_key="observation"
            )
        super().__init__(
            device=device,
            batch_size=torch.Size([env.num_envs] if batched else []),
            frame_skip=frame_skip,
            allow_done_after_reset=allow_done_after_reset,
        )
        self._env = env
        self.categorical_action_encoding = categorical_action_encoding
        self.from_pixels = from_pixels
        self.pixels_only = pixels_only
        self._batched = batched
        self._make_specs()
        # gymnasium refuses step() before a first reset(); batched containers may step first
        env.reset()

    def _make_specs(self) -> None:
        gym = import_optional("gymnasium", "gym", type(self).__name__)
        env = self._env
        batch = tuple(self.batch_size)
        ndim = len(batch)
        obs_space = env.single_observation_space if self._batched else env.observation_space
        action_space = env.single_action_space if self._batched else env.action_space
        kwargs = {
            "categorical_action_encoding": self.categorical_action_encoding,
            "device": self.device,
        }

        action_spec = space_to_spec(action_space, **kwargs)
        self._write_action = make_writer(action_space, action_spec, ndim)

        obs_spec = space_to_spec(obs_space, **kwargs)
        if isinstance(obs_space, gym.spaces.Dict):
            observation_spec = obs_spec
            self._read_obs = make_reader(obs_space, obs_spec, ndim)
        else:
            key = "pixels" if is_image_space(obs_space) else "observation"
            observation_spec = Composite({key: obs_spec}, shape=(), device=self.device)
            read = make_reader(obs_space, obs_spec, ndim)
            self._read_obs = lambda obs: {key: read(obs)}

        flag = Categorical(2, shape=(1,), device=self.device, dtype=torch.bool)
        reward = Unbounded(shape=(1,), device=self.device, dtype=torch.float32)
        self.full_action_spec = _expand(
            Composite(action=action_spec, shape=(), device=self.device), batch
        )
        self.full_observation_spec = _expand(observation_spec, batch)
        self.full_reward_spec = _expand(
            Composite(reward=reward, shape=(), device=self.device), batch
        )
        self.full_done_spec = _expand(
            Composite(
                done=flag, terminated=flag.clone(), truncated=flag.clone(), device=self.device
            ),
            batch,
        )

    # ------------------------------------------------------------------ library calls
    def _env_reset(self, tensordict: TensorDictBase | None, seed: int | None, **kwargs: Any):
        options = kwargs.pop("options", None)
        if self._batched and tensordict is not None:
            mask = tensordict.get("_reset", None)
            if mask is not None:
                mask = mask.reshape(self.batch_size).cpu().numpy()
                if not mask.all():
                    options = {**(options or {}), "reset_mask": mask}
        return self._env.reset(seed=seed, options=options, **kwargs)

    def _env_step(self, action: Any):
        return self._env.step(action)

    def _set_seed(self, seed: int | None) -> None:
        super()._set_seed(seed)
        if seed is not None:
            self._env.action_space.seed(seed)

    def close(self) -> None:
        """Close the gymnasium env, then this env."""
        self._env.close()
        super().close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self._env}, batch_size={self.batch_size}, "
            f"device={self.device})"
        )


class GymEnv(GymWrapper):
    """Build a gymnasium env by id (``gym.make``, or ``gym.make_vec`` with ``num_envs``) and wrap it.

    ``ALE/...`` ids register ale-py first (``pip install "rllibs[atari]"``); MuJoCo ids need
    ``pip install "rllibs[mujoco]"``. Extra keyword arguments go to ``gym.make``.

    Args:
        env_name: the gymnasium id, e.g. ``"Pendulum-v1"``.
        num_envs: when > 0, a vector env of that many copies (``batch_size=(num_envs,)``).
        categorical_action_encoding: as for ``GymWrapper``.
        device: as for ``GymWrapper``.
        frame_skip: as for ``GymWrapper``.
        from_pixels: as for ``GymWrapper``; the env is made with ``render_mode="rgb_array"``.
        pixels_only: as for ``GymWrapper``.
        **kwargs: passed to ``gym.make`` (or ``gym.make_vec``).

    Examples:
        >>> env = GymEnv("CartPole-v1", categorical_action_encoding=True)
        >>> env.action_spec.n
        2
        >>> GymEnv("Pendulum-v1", num_envs=2).batch_size
        torch.Size([2])
    """

    def __init__(
        self,
        env_name: str,
        *,
        num_envs: int = 0,
        categorical_action_encoding: bool = False,
        device: Any = None,
        frame_skip: int = 1,
        from_pixels: bool = False,
        pixels_only: bool = True,
        **kwargs: Any,
    ) -> None:
        what = f"GymEnv({env_name!r})"
        gym = import_optional("gymnasium", "gym", what)
        if env_name.startswith("ALE/"):
            gym.register_envs(import_optional("ale_py", "atari", what))
        if from_pixels:
            kwargs.setdefault("render_mode", "rgb_array")
        if num_envs:
            env = gym.make_vec(env_name, num_envs=num_envs, **kwargs)
        else:
            env = gym.make(env_name, **kwargs)
        super().__init__(
            env,
            categorical_action_encoding=categorical_action_encoding,
            device=device,
            frame_skip=frame_skip,
            from_pixels=from_pixels,
            pixels_only=pixels_only,
        )
        self.env_name = env_name

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self.env_name}, batch_size={self.batch_size}, "
            f"device={self.device})"
        )

"""``GymWrapper`` and ``GymEnv``: Gymnasium (>= 1.0) environments as ``EnvBase`` envs."""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDictBase

from rlspecs import Categorical, Composite, TensorSpec, Unbounded

from ._extras import import_optional
from ._gym_like import GymLikeEnv
from ._gym_rows import action_rows, obs_rows
from ._gym_spaces import is_image_space, make_reader, make_writer, space_to_spec
from ._gym_vector import VectorCalls
from ._wrapper_api import classproperty, get_library_name, gym_available_envs

__all__ = ["GymEnv", "GymWrapper", "set_specs_from_spaces"]

MISSING_ENV = "GymWrapper needs a gymnasium env (got None); to build one by id use GymEnv(env_name)"
BAD_VECTORIZATION = (
    'GymEnv(vectorization_mode={mode!r}): expected "sync" (SyncVectorEnv) or "async" '
    "(AsyncVectorEnv)"
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
    ``truncated`` and ``done``. The env is reset once (unseeded) when wrapped, so that ``step``
    works before the first ``reset``.

    A vector env (gymnasium ``VectorEnv``) gives ``batch_size=(num_envs,)`` and specs from its
    single-env spaces. In every autoreset mode (NextStep, SameStep, Disabled) a step returns the
    true next observation of each sub-env (the final one when its episode ends) and a reset
    with a ``"_reset"`` mask starts new episodes in the masked sub-envs only (through
    ``reset_mask``; with SameStep, from the reset gymnasium already did). A finished sub-env must
    be reset before the next step (``rollout`` and ``step_and_maybe_reset`` do it); ``set_seed(s)``
    seeds sub-env ``i`` with ``s + i``.

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

    # torchrl 0.4's library attributes (the rest of its API: rllibs._wrapper_api)
    git_url = "https://github.com/Farama-Foundation/Gymnasium"
    libname = "gym"
    available_envs = classproperty(lambda cls: gym_available_envs())
    get_library_name = staticmethod(get_library_name)

    @property
    def lib(self) -> Any:
        """The gym library: gymnasium."""
        return import_optional("gymnasium", "gym", type(self).__name__)

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
        built = _wrap_gym_env(gym, env, from_pixels, pixels_only)
        super().__init__(
            device=device,
            batch_size=_batch_size_of(gym, built),
            frame_skip=frame_skip,
            allow_done_after_reset=allow_done_after_reset,
        )
        self.categorical_action_encoding = categorical_action_encoding
        # what the library env was built from (torchrl 0.4's name): rebuild_with_kwargs
        self._constructor_kwargs = {
            "env": env,
            "from_pixels": from_pixels,
            "pixels_only": pixels_only,
        }
        self._use_env(built, self._constructor_kwargs)

    # rebuild_with_kwargs (rllibs._wrapper_api) takes _build_env's arguments
    _rebuild_keys = ("env", "from_pixels", "pixels_only")

    def _build_env(self, env: Any = None, from_pixels: bool = False, pixels_only: bool = True):
        gym = import_optional("gymnasium", "gym", type(self).__name__)
        return _wrap_gym_env(gym, env, from_pixels, pixels_only)

    def _use_env(self, built: Any, kwargs: dict[str, Any]) -> None:
        gym = import_optional("gymnasium", "gym", type(self).__name__)
        self._set_batch_size(_batch_size_of(gym, built))
        batched = isinstance(built, gym.vector.VectorEnv)
        self._env = built
        self.from_pixels = kwargs["from_pixels"]
        self.pixels_only = kwargs["pixels_only"]
        self._batched = batched
        self._vector = VectorCalls(built, type(self).__name__) if batched else None
        self._make_specs()
        self._declare_info_specs()
        # gymnasium refuses step() before a first reset(); batched containers may step first
        self._env_reset(None, None)

    def _make_specs(self) -> None:
        env = self._env
        set_specs_from_spaces(
            self,
            env.single_observation_space if self._batched else env.observation_space,
            env.single_action_space if self._batched else env.action_space,
            categorical_action_encoding=self.categorical_action_encoding,
        )

    # ------------------------------------------------------------------ library calls
    def _env_reset(self, tensordict: TensorDictBase | None, seed: int | None, **kwargs: Any):
        options = kwargs.pop("options", None)
        vector = self._vector
        if vector is None:
            return self._env.reset(seed=seed, options=options, **kwargs)
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is not None:
            mask = mask.reshape(self.batch_size).cpu().numpy()
        return vector.reset(mask, seed, options, **kwargs)

    def _reset_reads_input(self) -> bool:
        # an unbatched gymnasium env's reset reads no tensordict (a subclass's may)
        return bool(self.batch_size) or type(self)._env_reset is not GymWrapper._env_reset

    def _env_step(self, action: Any):
        vector = self._vector
        return self._env.step(action) if vector is None else vector.step(action)

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
        num_envs: when > 0, a vector env of that many copies (``batch_size=(num_envs,)``),
            built by ``gym.make_vec``.
        vectorization_mode: with ``num_envs``: ``"sync"`` (``SyncVectorEnv``, one process,
            the default) or ``"async"`` (``AsyncVectorEnv``, one process per sub-env; torchrl's
            only choice). Other ``make_vec`` modes are refused: an env's own vector entry point
            (e.g. ``CartPoleVectorEnv``) may not reset sub-envs one by one.
        vector_kwargs: with ``num_envs``: keyword arguments of the vector env, e.g.
            ``{"autoreset_mode": "SameStep"}`` or ``{"context": "spawn"}`` for async.
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
        >>> env = GymEnv("Pendulum-v1", num_envs=2)
        >>> env.batch_size
        torch.Size([2])
        >>> env.rollout(3)["next", "reward"].shape
        torch.Size([2, 3, 1])
    """

    # rebuild_with_kwargs: any name (gym.make's arguments beside GymEnv's own); the env is ours
    _rebuild_keys = None
    _owns_env = True

    def __init__(
        self,
        env_name: str,
        *,
        num_envs: int = 0,
        vectorization_mode: str = "sync",
        vector_kwargs: dict[str, Any] | None = None,
        categorical_action_encoding: bool = False,
        device: Any = None,
        frame_skip: int = 1,
        from_pixels: bool = False,
        pixels_only: bool = True,
        **kwargs: Any,
    ) -> None:
        constructor_kwargs = {
            "env_name": env_name,
            "num_envs": num_envs,
            "vectorization_mode": vectorization_mode,
            "vector_kwargs": vector_kwargs,
            "from_pixels": from_pixels,
            "pixels_only": pixels_only,
            **kwargs,
        }
        env = _make_gym_env(**constructor_kwargs)
        try:
            super().__init__(
                env,
                categorical_action_encoding=categorical_action_encoding,
                device=device,
                frame_skip=frame_skip,
                from_pixels=from_pixels,
                pixels_only=pixels_only,
            )
        except BaseException:
            env.close()
            raise
        self._constructor_kwargs = constructor_kwargs

    @property
    def env_name(self) -> str:
        """The gymnasium id the env was made from."""
        return self._constructor_kwargs["env_name"]

    def _build_env(
        self,
        env_name: str,
        from_pixels: bool = False,
        pixels_only: bool = True,
        **kwargs: Any,
    ) -> Any:
        env = _make_gym_env(env_name, from_pixels=from_pixels, **kwargs)
        try:
            return super()._build_env(env, from_pixels=from_pixels, pixels_only=pixels_only)
        except BaseException:
            env.close()
            raise

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self.env_name}, batch_size={self.batch_size}, "
            f"device={self.device})"
        )


def _make_gym_env(
    env_name: str,
    *,
    num_envs: int = 0,
    vectorization_mode: str = "sync",
    vector_kwargs: dict[str, Any] | None = None,
    from_pixels: bool = False,
    pixels_only: bool = True,
    **kwargs: Any,
) -> Any:
    """``gym.make`` (or ``gym.make_vec`` with ``num_envs``) as ``GymEnv`` makes its env."""
    what = f"GymEnv({env_name!r})"
    gym = import_optional("gymnasium", "gym", what)
    if env_name.startswith("ALE/"):
        gym.register_envs(import_optional("ale_py", "atari", what))
    if from_pixels:
        kwargs.setdefault("render_mode", "rgb_array")
    if num_envs:
        if vectorization_mode not in ("sync", "async"):
            raise ValueError(BAD_VECTORIZATION.format(mode=vectorization_mode))
        return gym.make_vec(
            env_name,
            num_envs=num_envs,
            vectorization_mode=vectorization_mode,
            vector_kwargs=vector_kwargs,
            **kwargs,
        )
    return gym.make(env_name, **kwargs)


def _wrap_gym_env(gym: Any, env: Any, from_pixels: bool, pixels_only: bool) -> Any:
    """``env`` checked, and wrapped to render ``"pixels"`` with ``from_pixels``."""
    if env is None:
        raise TypeError(MISSING_ENV)
    if isinstance(env, gym.vector.VectorEnv):
        if from_pixels:
            raise ValueError(VECTOR_PIXELS.format(env=env))
        return env
    if not from_pixels:
        return env
    if env.render_mode != "rgb_array":
        raise ValueError(NO_RGB_RENDER.format(mode=env.render_mode, env=env))
    return gym.wrappers.AddRenderObservation(
        env, render_only=pixels_only, render_key="pixels", obs_key="observation"
    )


def _batch_size_of(gym: Any, env: Any) -> torch.Size:
    return torch.Size([env.num_envs] if isinstance(env, gym.vector.VectorEnv) else [])


def set_specs_from_spaces(
    env: GymLikeEnv,
    obs_space: Any,
    action_space: Any,
    *,
    categorical_action_encoding: bool,
    observation_key: str | None = None,
) -> None:
    """Set ``env``'s specs and converters from the spaces of one (unbatched) sub-env.

    The specs are expanded to ``env.batch_size``. A non-Dict observation goes under
    ``observation_key``, by default ``"pixels"`` for images and ``"observation"`` otherwise.
    Sets ``env._read_obs`` and ``env._write_action`` (see ``GymLikeEnv``), and
    ``env._obs_rows`` and ``env._action_rows`` (the same conversions for its stepper, or
    None).

    Examples:
        >>> import gymnasium as gym
        >>> env = GymWrapper(gym.make("CartPole-v1"))
        >>> set_specs_from_spaces(
        ...     env, env._env.observation_space, env._env.action_space,
        ...     categorical_action_encoding=True, observation_key="state",
        ... )
        >>> list(env.observation_spec.keys()), env.action_spec.n
        (['state'], 2)
    """
    from gymnasium.spaces import Dict

    device = env.device
    batch = tuple(env.batch_size)
    ndim = len(batch)
    kwargs = {"categorical_action_encoding": categorical_action_encoding, "device": device}

    action_spec = space_to_spec(action_space, **kwargs)
    env._write_action = make_writer(action_space, action_spec, ndim)

    obs_spec = space_to_spec(obs_space, **kwargs)
    key = None
    if isinstance(obs_space, Dict):
        observation_spec = obs_spec
        env._read_obs = make_reader(obs_space, obs_spec, ndim)
    else:
        key = observation_key or ("pixels" if is_image_space(obs_space) else "observation")
        observation_spec = Composite({key: obs_spec}, shape=(), device=device)
        read = make_reader(obs_space, obs_spec, ndim)
        env._read_obs = lambda obs: {key: read(obs)}
    # the same conversions on rows of NumPy buffers (GymLikeEnv's stepper)
    env._obs_rows = obs_rows(obs_space, obs_spec, key, env._read_obs, batch)
    env._action_rows = action_rows(action_space, env._write_action, batched=bool(ndim))

    flag = Categorical(2, shape=(1,), device=device, dtype=torch.bool)
    reward = Unbounded(shape=(1,), device=device, dtype=torch.float32)
    env.full_action_spec = _expand(Composite(action=action_spec, shape=(), device=device), batch)
    env.full_observation_spec = _expand(observation_spec, batch)
    env.full_reward_spec = _expand(Composite(reward=reward, shape=(), device=device), batch)
    env.full_done_spec = _expand(
        Composite(done=flag, terminated=flag.clone(), truncated=flag.clone(), device=device),
        batch,
    )

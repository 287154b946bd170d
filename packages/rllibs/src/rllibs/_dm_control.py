"""``DMControlWrapper`` and ``DMControlEnv``: DeepMind Control Suite tasks as ``EnvBase`` envs."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rlspecs import Bounded, Categorical, Composite, TensorSpec, Unbounded

from ._extras import import_optional
from ._gym_like import GymLikeEnv
from ._gym_spaces import to_numpy
from ._wrapper_api import classproperty, dm_control_available_envs

__all__ = ["DMControlEnv", "DMControlWrapper"]

UNKNOWN_TASK = (
    "{env_name} with task {task_name} is unknown in dm_control; available_envs lists the "
    "(domain, [tasks]) pairs of its suite: {available}"
)
NO_TASK_RANDOM = (
    "cannot seed {env}: its task has no random state (task._random); DMControlWrapper seeds "
    "dm_control suite tasks through it"
)


def _torch_dtype(np_dtype: Any) -> torch.dtype:
    return torch.from_numpy(np.empty((), dtype=np_dtype)).dtype


def _array_spec_to_spec(array_spec: Any, device: Any) -> TensorSpec:
    """dm_env ``Array``/``BoundedArray`` → ``Unbounded``/``Bounded`` (scalars get shape ``(1,)``)."""
    shape = array_spec.shape or (1,)
    dtype = _torch_dtype(array_spec.dtype)
    if hasattr(array_spec, "minimum") and hasattr(array_spec, "maximum"):
        # dm_env bounds are read-only arrays: copy them (torch warns on sharing them)
        low = torch.as_tensor(np.array(array_spec.minimum)).expand(shape)
        high = torch.as_tensor(np.array(array_spec.maximum)).expand(shape)
        return Bounded(low=low, high=high, shape=shape, device=device, dtype=dtype)
    return Unbounded(shape=shape, device=device, dtype=dtype)


def _obs_reader(obs_spec: dict[str, Any]):
    # dm_control may hand out views of its physics buffers: copy each entry once
    layout = [(key, spec.dtype, spec.shape or (1,)) for key, spec in obs_spec.items()]

    def read(obs: dict[str, Any]) -> dict[str, torch.Tensor]:
        return {
            key: torch.from_numpy(np.array(obs[key], dtype=dtype).reshape(shape))
            for key, dtype, shape in layout
        }

    return read


class DMControlWrapper(GymLikeEnv):
    """Wrap a dm_control environment (``suite.load(...)``) as an ``EnvBase`` env.

    The observation dict gives one spec per entry (float64 as dm_control gives, scalars with
    shape ``(1,)``), the ``BoundedArray`` action spec a ``Bounded`` spec, and the reward a
    ``(1,)`` spec of dm_control's reward dtype. The last step of an episode is ``terminated``
    when its discount is 0 and ``truncated`` otherwise (the time limit). ``set_seed(seed)``
    gives the task a fresh ``RandomState(seed)`` at the next reset, so episodes replay exactly.

    Args:
        env: a dm_control ``control.Environment`` (possibly wrapped, e.g. by ``pixels.Wrapper``).
        from_pixels: render frames under ``"pixels"`` (dm_control's pixels wrapper).
        pixels_only: with ``from_pixels``, drop the state entries.
        frame_skip: times each action is repeated (rewards summed, stopping at the last step).
        device: device of the specs and outputs.
        render_kwargs: passed to the pixels wrapper (e.g. ``{"height": 84, "width": 84}``).
        camera_id: the camera the pixels wrapper renders (unless ``render_kwargs`` names one).

    Examples:
        >>> from dm_control import suite
        >>> env = DMControlWrapper(suite.load("cartpole", "balance"))
        >>> _ = env.set_seed(0)
        >>> env.rollout(3)["next", "position"].dtype
        torch.float64
    """

    # torchrl 0.4's library attributes
    git_url = "https://github.com/deepmind/dm_control"
    libname = "dm_control"
    available_envs = classproperty(lambda cls: dm_control_available_envs())

    @property
    def lib(self) -> Any:
        """The dm_control module."""
        return import_optional("dm_control", "dmc", type(self).__name__)

    def __init__(
        self,
        env: Any,
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        device: Any = None,
        render_kwargs: dict[str, Any] | None = None,
        camera_id: int | str = 0,
    ) -> None:
        import_optional("dm_control", "dmc", type(self).__name__)
        constructor_kwargs = {
            "env": env,
            "from_pixels": from_pixels,
            "pixels_only": pixels_only,
            "render_kwargs": render_kwargs,
            "camera_id": camera_id,
        }
        built = DMControlWrapper._build_env(self, **constructor_kwargs)
        super().__init__(device=device, batch_size=torch.Size([]), frame_skip=frame_skip)
        # what the library env was built from (torchrl 0.4's name): rebuild_with_kwargs
        self._constructor_kwargs = constructor_kwargs
        self._use_env(built, constructor_kwargs)

    # rebuild_with_kwargs (rllibs._wrapper_api) takes _build_env's arguments
    _rebuild_keys = ("env", "from_pixels", "pixels_only", "render_kwargs", "camera_id")

    def _build_env(
        self,
        env: Any,
        from_pixels: bool = False,
        pixels_only: bool = True,
        render_kwargs: dict[str, Any] | None = None,
        camera_id: int | str = 0,
    ) -> tuple[Any, Any]:
        """``(task env, env to step)``: the second renders pixels with ``from_pixels``."""
        if from_pixels:
            from dm_control.suite.wrappers import pixels

            return env, pixels.Wrapper(
                env,
                pixels_only=pixels_only,
                render_kwargs={"camera_id": camera_id, **(render_kwargs or {})},
            )
        return env, env

    def _use_env(self, built: tuple[Any, Any], kwargs: dict[str, Any]) -> None:
        self._task_env, self._env = built
        self.from_pixels = kwargs["from_pixels"]
        self.pixels_only = kwargs["pixels_only"]
        self._make_specs()
        self._declare_info_specs()

    def _make_specs(self) -> None:
        env, device = self._env, self.device
        obs_spec = env.observation_spec()
        self._read_obs = _obs_reader(obs_spec)
        self.full_observation_spec = Composite(
            {key: _array_spec_to_spec(spec, device) for key, spec in obs_spec.items()},
            shape=(),
            device=device,
        )
        action = _array_spec_to_spec(env.action_spec(), device)
        self._write_action = to_numpy
        self.full_action_spec = Composite(action=action, shape=(), device=device)
        reward_spec = env.reward_spec()
        self._reward_dtype = reward_spec.dtype
        self.full_reward_spec = Composite(
            reward=Unbounded(shape=(1,), device=device, dtype=_torch_dtype(reward_spec.dtype)),
            shape=(),
            device=device,
        )
        flag = Categorical(2, shape=(1,), device=device, dtype=torch.bool)
        self.full_done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=(), device=device
        )

    # ------------------------------------------------------------------ library calls
    def _env_reset(self, tensordict: TensorDictBase | None, seed: int | None, **kwargs: Any):
        if seed is not None:
            task = self._task_env.task
            if not hasattr(task, "_random"):
                raise RuntimeError(NO_TASK_RANDOM.format(env=self._task_env))
            task._random = np.random.RandomState(seed)
        return self._env.reset().observation, {}

    def _env_step(self, action: Any):
        timestep = self._env.step(action)
        last = timestep.last()
        terminated = last and timestep.discount == 0
        reward = 0.0 if timestep.reward is None else timestep.reward
        return timestep.observation, reward, terminated, last and not terminated, {}

    def close(self) -> None:
        """Close the dm_control env, then this env."""
        self._env.close()
        super().close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}(env={self._task_env}, device={self.device})"


class DMControlEnv(DMControlWrapper):
    """Load a DeepMind Control Suite task by domain and task name and wrap it.

    Args:
        env_name: the domain, e.g. ``"humanoid"`` (one of ``available_envs``).
        task_name: the task, e.g. ``"stand"``.
        from_pixels: as for ``DMControlWrapper``.
        pixels_only: as for ``DMControlWrapper``.
        frame_skip: as for ``DMControlWrapper``.
        device: as for ``DMControlWrapper``.
        render_kwargs: as for ``DMControlWrapper``.
        camera_id: as for ``DMControlWrapper``.
        task_kwargs: passed to ``dm_control.suite.load``.
        environment_kwargs: passed to ``dm_control.suite.load``.
        **kwargs: more task keyword arguments (as torchrl 0.4 takes them), e.g. ``time_limit``.

    Examples:
        >>> env = DMControlEnv("humanoid", "stand")
        >>> env.observation_spec["head_height"].shape
        torch.Size([1])
        >>> env.action_spec.shape
        torch.Size([21])
    """

    def __init__(
        self,
        env_name: str,
        task_name: str,
        *,
        from_pixels: bool = False,
        pixels_only: bool = True,
        frame_skip: int = 1,
        device: Any = None,
        render_kwargs: dict[str, Any] | None = None,
        camera_id: int | str = 0,
        task_kwargs: dict[str, Any] | None = None,
        environment_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        constructor_kwargs = {
            "env_name": env_name,
            "task_name": task_name,
            "from_pixels": from_pixels,
            "pixels_only": pixels_only,
            "render_kwargs": render_kwargs,
            "camera_id": camera_id,
            "task_kwargs": task_kwargs,
            "environment_kwargs": environment_kwargs,
            **kwargs,
        }
        env = _load_task(env_name, task_name, task_kwargs, environment_kwargs, kwargs)
        try:
            super().__init__(
                env,
                from_pixels=from_pixels,
                pixels_only=pixels_only,
                frame_skip=frame_skip,
                device=device,
                render_kwargs=render_kwargs,
                camera_id=camera_id,
            )
        except BaseException:
            env.close()
            raise
        self._constructor_kwargs = constructor_kwargs

    # rebuild_with_kwargs: any name (task keyword arguments beside DMControlEnv's own); the
    # env is ours
    _rebuild_keys = None
    _owns_env = True

    @property
    def env_name(self) -> str:
        """The dm_control domain, e.g. ``"humanoid"``."""
        return self._constructor_kwargs["env_name"]

    @property
    def task_name(self) -> str:
        """The dm_control task, e.g. ``"stand"``."""
        return self._constructor_kwargs["task_name"]

    def _build_env(
        self,
        env_name: str,
        task_name: str,
        from_pixels: bool = False,
        pixels_only: bool = True,
        render_kwargs: dict[str, Any] | None = None,
        camera_id: int | str = 0,
        task_kwargs: dict[str, Any] | None = None,
        environment_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> tuple[Any, Any]:
        env = _load_task(env_name, task_name, task_kwargs, environment_kwargs, kwargs)
        return super()._build_env(
            env,
            from_pixels=from_pixels,
            pixels_only=pixels_only,
            render_kwargs=render_kwargs,
            camera_id=camera_id,
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(env={self.env_name}, task={self.task_name}, "
            f"device={self.device})"
        )


def _load_task(
    env_name: str,
    task_name: str,
    task_kwargs: dict[str, Any] | None,
    environment_kwargs: dict[str, Any] | None,
    kwargs: dict[str, Any],
) -> Any:
    """``suite.load`` as ``DMControlEnv`` calls it, after checking the domain and task."""
    import_optional("dm_control", "dmc", f"DMControlEnv({env_name!r}, {task_name!r})")
    from dm_control import suite

    available = dict(dm_control_available_envs())
    if task_name not in available.get(env_name, ()):
        raise ValueError(
            UNKNOWN_TASK.format(
                env_name=env_name, task_name=task_name, available=sorted(available.items())
            )
        )
    return suite.load(
        env_name,
        task_name,
        task_kwargs={**(task_kwargs or {}), **kwargs},
        environment_kwargs=environment_kwargs,
    )

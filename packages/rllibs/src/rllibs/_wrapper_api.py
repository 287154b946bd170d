"""torchrl 0.4's wrapper API on our library wrappers.

``LibraryWrapperAPI`` (a base of ``GymLikeEnv``) adds the converters torchrl's wrappers expose
(``read_action``, ``read_obs``, ``read_reward``, ``read_done``), the ``info_dict_reader``
list, attribute look-up through to the wrapped library env (``env.spec`` of a gymnasium
env) and ``rebuild_with_kwargs`` (a new library env from changed constructor arguments).
``classproperty`` and the library queries back ``available_envs``, ``lib`` and
``get_library_name``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

import numpy as np
import torch

from rlcore import done_from
from rlspecs import Composite

from ._extras import HAS_DMC, HAS_GYM

__all__ = [
    "LibraryWrapperAPI",
    "_is_from_pixels",
    "classproperty",
    "dm_control_available_envs",
    "get_library_name",
    "gym_available_envs",
]

UNKNOWN_LIBRARY = (
    "Could not find the library of env {env}: rllibs wraps gymnasium envs (an action_space "
    "that is a gymnasium.spaces.Space); build it with gymnasium, or install it with: "
    'pip install "rllibs[gym]"'
)
NO_DONE = "read_done needs terminated or done, got terminated=None and done=None"
NOT_REBUILDABLE = (
    "{cls} cannot rebuild its library env from keyword arguments (rebuild_with_kwargs is "
    "offered by GymWrapper, GymEnv, DMControlWrapper and DMControlEnv); build a new env instead"
)
REBUILD_UNKNOWN = (
    "{cls}.rebuild_with_kwargs got unknown keyword argument(s) {unknown}; it takes {known}"
)
REBUILD_WRAPPER_ARG = (
    "{cls}.rebuild_with_kwargs rebuilds the library env only; {keys} belong to the wrapper "
    "(build a new {cls} to change them)"
)
# the wrapper's own arguments: rebuild_with_kwargs never passes them to the library
WRAPPER_ARGUMENTS = (
    "allow_done_after_reset",
    "categorical_action_encoding",
    "device",
    "frame_skip",
)

T = TypeVar("T")


class classproperty(Generic[T]):  # noqa: N801 (a decorator, named like property)
    """A read-only property of the class (``GymEnv.available_envs``), also read on instances.

    Examples:
        >>> class Lib:
        ...     @classproperty
        ...     def names(cls):
        ...         return [cls.__name__]
        >>> Lib.names, Lib().names
        (['Lib'], ['Lib'])
    """

    def __init__(self, getter: Callable[[type], T]) -> None:
        self.getter = getter
        self.__doc__ = getter.__doc__

    def __get__(self, instance: Any, owner: type) -> T:
        return self.getter(owner)


def gym_available_envs() -> list[str]:
    """The ids gymnasium can make (its registry), sorted; empty without gymnasium.

    Examples:
        >>> "CartPole-v1" in gym_available_envs()
        True
    """
    if not HAS_GYM:
        return []
    import gymnasium

    return sorted(gymnasium.envs.registry)


def dm_control_available_envs() -> list[tuple[str, list[str]]]:
    """The dm_control suite's ``(domain, [tasks])`` pairs (benchmarking and extra tasks).

    Examples:
        >>> ("cheetah", ["run"]) in dm_control_available_envs()
        True
    """
    if not HAS_DMC:
        return []
    from dm_control import suite

    tasks: dict[str, list[str]] = {}
    for domain, task in (*suite.BENCHMARKING, *suite.EXTRA):
        tasks.setdefault(domain, []).append(task)
    return list(tasks.items())


def get_library_name(env: Any) -> str:
    """Return ``"gymnasium"`` for a gymnasium env or vector env (the one library we wrap).

    Raises an ``ImportError`` naming the env otherwise (a legacy ``gym`` env, say).

    Examples:
        >>> import gymnasium
        >>> get_library_name(gymnasium.make("CartPole-v1"))
        'gymnasium'
    """
    if HAS_GYM:
        import gymnasium

        if isinstance(getattr(env, "action_space", None), gymnasium.spaces.Space):
            return "gymnasium"
    raise ImportError(UNKNOWN_LIBRARY.format(env=env))


def _is_from_pixels(env: Any) -> bool:
    """Whether a gymnasium env observes pixels (torchrl 0.4's test, for gymnasium >= 1.0).

    True when its observation space is a Dict with a ``"pixels"`` entry, an RGB image Box
    (``H x W x 3`` in ``[0, 255]``), or when it is wrapped in ``AddRenderObservation``.

    Examples:
        >>> import gymnasium
        >>> _is_from_pixels(gymnasium.make("CartPole-v1"))
        False
        >>> class Camera(gymnasium.Env):
        ...     observation_space = gymnasium.spaces.Box(0, 255, (8, 8, 3), "uint8")
        >>> _is_from_pixels(Camera())
        True
    """
    import gymnasium

    space = env.observation_space
    if isinstance(space, gymnasium.spaces.Dict) and "pixels" in space.spaces:
        return True
    if isinstance(space, gymnasium.spaces.Box) and space.low.ndim == 3:
        image = (space.low == 0).all() and (space.high == 255).all()
        if image and space.low.shape[-1] == 3:
            return True
    while env is not None:
        if isinstance(env, gymnasium.wrappers.AddRenderObservation):
            return True
        env = getattr(env, "env", None)
    return False


class LibraryWrapperAPI:
    """torchrl 0.4's converters and look-ups on a wrapper of a library env (``self._env``).

    The converters are the ones the wrapper uses on each step (decided when its specs were
    built), exposed for code written against torchrl's ``GymLikeEnv``.
    """

    _env: Any
    # rebuild_with_kwargs: the names it takes (None: any, the rest going to the library's
    # constructor) and whether the wrapper made its library env (closed when replaced)
    _rebuild_keys: tuple[str, ...] | None = ()
    _owns_env = False

    def rebuild_with_kwargs(self, **new_kwargs: Any) -> None:
        """Rebuild the library env from the constructor's keyword arguments updated by ``new_kwargs``.

        As torchrl 0.4's: the keyword arguments the library env was built from (kept in
        ``_constructor_kwargs``: ``env``, ``from_pixels``, ``pixels_only`` for ``GymWrapper``;
        the id, ``num_envs`` and ``gym.make``'s arguments for ``GymEnv``, ...) are updated with
        ``new_kwargs`` for good, the library env is rebuilt from them and the specs are made
        again from it (the batch size follows, e.g. a new ``num_envs``). The wrapper's own
        arguments (``device``, ``frame_skip``, ...) stay; info dict readers stay and declare
        their specs again. The new env is left as a new wrapper leaves it (a gymnasium env is
        reset once, unseeded); a library env the wrapper made (``GymEnv``, ``DMControlEnv``) is
        closed when replaced, one it was given is not. Where building the new env fails, the
        wrapper is left as it was.

        Raises ``TypeError`` for a name the wrapper does not take (``GymWrapper``,
        ``DMControlWrapper``) or one of the wrapper's own arguments, and
        ``NotImplementedError`` on wrappers that cannot be rebuilt (``MultiThreadedEnvWrapper``).

        Examples:
            >>> from rllibs import GymEnv
            >>> env = GymEnv("Pendulum-v1")
            >>> env.rebuild_with_kwargs(num_envs=2)
            >>> env.batch_size, env._constructor_kwargs["num_envs"]
            (torch.Size([2]), 2)
            >>> env.rollout(3)["next", "observation"].shape
            torch.Size([2, 3, 3])
        """
        cls = type(self).__name__
        kwargs = self.__dict__.get("_constructor_kwargs")
        if kwargs is None:
            raise NotImplementedError(NOT_REBUILDABLE.format(cls=cls))
        wrapper_keys = sorted(set(new_kwargs) & set(WRAPPER_ARGUMENTS))
        if wrapper_keys:
            raise TypeError(REBUILD_WRAPPER_ARG.format(cls=cls, keys=wrapper_keys))
        known = self._rebuild_keys
        if known is not None:
            unknown = sorted(set(new_kwargs) - set(known))
            if unknown:
                raise TypeError(REBUILD_UNKNOWN.format(cls=cls, unknown=unknown, known=list(known)))
        kwargs = {**kwargs, **new_kwargs}
        built = self._build_env(**kwargs)
        old = self._env
        self._constructor_kwargs = kwargs
        self._use_env(built, kwargs)
        if self._owns_env and self._env is not old:
            old.close()

    def _build_env(self, **kwargs: Any) -> Any:
        """The library env (as ``_use_env`` takes it) from the constructor's keyword arguments."""
        raise NotImplementedError(NOT_REBUILDABLE.format(cls=type(self).__name__))

    def _use_env(self, built: Any, kwargs: dict[str, Any]) -> None:
        """Wrap ``built`` (from ``_build_env(**kwargs)``): specs, batch size, readiness."""
        raise NotImplementedError(NOT_REBUILDABLE.format(cls=type(self).__name__))

    def _set_batch_size(self, batch_size: torch.Size) -> None:
        """Change the batch size before new specs are set (the old ones are dropped first)."""
        if batch_size == self.batch_size:
            return
        old = self.batch_size
        device = self.device

        def empty() -> Composite:
            return Composite(shape=old, device=device)

        self.output_spec = Composite(
            full_observation_spec=empty(),
            full_reward_spec=empty(),
            full_done_spec=empty(),
            shape=old,
            device=device,
        )
        self.input_spec = Composite(
            full_action_spec=empty(), full_state_spec=empty(), shape=old, device=device
        )
        self.batch_size = batch_size
        self._flag_shape = (*batch_size, 1)

    def _declare_info_specs(self) -> None:
        """Declare again the specs of the info dict readers (after new specs were made)."""
        for reader in self._info_dict_readers:
            info_spec = getattr(reader, "info_spec", None)
            if info_spec is not None:
                self._register_info_spec(info_spec)

    def read_action(self, action: Any) -> Any:
        """Convert an action tensor (or tensordict) into what the library env's ``step`` takes.

        Examples:
            >>> from rllibs import GymEnv
            >>> GymEnv("CartPole-v1").read_action(torch.tensor([0, 1]))
            1
        """
        return self._write_action(action)

    def read_obs(self, observations: Any) -> dict[str, Any]:
        """Convert an observation of the library env into the entries of the observation spec.

        Examples:
            >>> from rllibs import GymEnv
            >>> sorted(GymEnv("Pendulum-v1").read_obs(np.zeros(3, np.float32)))
            ['observation']
        """
        return self._read_obs(observations)

    def read_reward(self, reward: Any) -> torch.Tensor:
        """Convert a reward of the library env into a tensor of the reward spec (NaN for None).

        Examples:
            >>> from rllibs import GymEnv
            >>> GymEnv("Pendulum-v1").read_reward(-1.5)
            tensor([-1.5000])
        """
        spec = self.full_reward_spec[self.reward_key]
        if reward is None:
            return torch.full(spec.shape, float("nan"), dtype=spec.dtype, device=spec.device)
        if isinstance(reward, torch.Tensor):
            return reward.to(spec.dtype).reshape(spec.shape)
        value = torch.from_numpy(np.asarray(reward, dtype=self._reward_dtype).reshape(spec.shape))
        return value.to(spec.dtype)

    def read_done(
        self,
        terminated: Any = None,
        truncated: Any = None,
        done: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, bool]:
        """Return ``(terminated, truncated, done, stop)`` tensors from the library's flags.

        ``done`` defaults to ``terminated | truncated`` (``terminated`` alone without
        ``truncated``); ``truncated`` defaults to False; a bare ``done`` is read as
        ``terminated``. ``stop`` tells whether any entry is done (a frame-skip loop ends there).

        Examples:
            >>> from rllibs import GymEnv
            >>> GymEnv("Pendulum-v1").read_done(terminated=False, truncated=True)
            (tensor([False]), tensor([True]), tensor([True]), True)
        """
        if terminated is None:
            if done is None:
                raise ValueError(NO_DONE)
            terminated = done
        terminated = torch.as_tensor(np.asarray(terminated, dtype=bool))
        truncated = torch.as_tensor(
            np.asarray(False if truncated is None else truncated, dtype=bool)
        ).expand_as(terminated)
        if done is None:
            done = done_from(terminated, truncated)  # the step contract's rule
        else:
            done = torch.as_tensor(np.asarray(done, dtype=bool))
        shape = self._flag_shape
        return (
            terminated.reshape(shape),
            truncated.reshape(shape).clone(),
            done.reshape(shape),
            bool(done.any()),
        )

    @property
    def info_dict_reader(self) -> list[Callable[[Mapping[str, Any], Any], Any]]:
        """The info dict readers, in the order they run (see ``set_info_dict_reader``)."""
        return self._info_dict_readers

    def __getattr__(self, name: str) -> Any:
        # torchrl's wrappers read unknown public attributes from the library env (env.spec)
        try:
            return super().__getattr__(name)  # nn.Module: parameters, buffers, submodules
        except AttributeError:
            env = self.__dict__.get("_env")
            if env is None or name.startswith("_"):
                raise
            return getattr(env, name)

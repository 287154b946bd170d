"""``register_gym``: register an env class (or factory) under a gymnasium id.

``rlcore.EnvBase.register_gym`` reaches this function through the ``rlcore.register_gym`` entry
point that ``rllibs`` declares, so ``rlcore`` never imports gymnasium or ``rllibs``.
``gymnasium.make(id)`` then builds an ``ExportedGymEnv`` and ``gymnasium.make_vec(id)`` an
``ExportedGymVectorEnv`` (a batched env) or a ``SyncVectorEnv`` of ``ExportedGymEnv`` (an
unbatched one).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from rlcore import EnvBase
from rlspecs import NestedKey

from ._backend import set_gym_backend
from ._extras import import_optional

__all__ = ["register_gym"]

GYM_UNRECOGNIZED_KWARG = "The keyword argument {} is not compatible with gym version {}"
ABSTRACT_ENTRY = (
    "{cls}.register_gym({id!r}) needs an entry_point: {cls} is abstract; pass the env class or "
    "a factory, e.g. EnvBase.register_gym(id, entry_point=MyEnv)"
)
NUM_ENVS_MISMATCH = (
    "gymnasium.make_vec({id!r}, num_envs={num_envs}): the env built has batch_size={batch}; "
    "leave num_envs at 1 or pass {size}"
)


def _build(factory: Callable[..., EnvBase], transform: Any, kwargs: dict[str, Any]) -> EnvBase:
    env = factory(**kwargs)
    if transform is not None:
        # one transform instance can belong to one env: each env made gets its own copy
        env = env.append_transform(transform.clone())
    return env


@contextlib.contextmanager
def _closed_on_error(env: EnvBase) -> Iterator[None]:
    # a refused env may hold worker processes (ParallelEnv): release them before raising
    try:
        yield
    except BaseException:
        env.close()
        raise


def _make_env(
    *,
    factory: Callable[..., EnvBase],
    id: str,  # noqa: A002 (gymnasium's name)
    transform: Any = None,
    info_keys: Sequence[NestedKey] | None = None,
    to_numpy: bool = False,
    **kwargs: Any,
) -> Any:
    from ._gym_export import ExportedGymEnv

    env = _build(factory, transform, kwargs)
    with _closed_on_error(env):
        return ExportedGymEnv(env, to_numpy=to_numpy, info_keys=info_keys, id=id)


def _make_vector_env(
    num_envs: int = 1,
    *,
    factory: Callable[..., EnvBase],
    id: str,  # noqa: A002 (gymnasium's name)
    transform: Any = None,
    info_keys: Sequence[NestedKey] | None = None,
    to_numpy: bool = False,
    max_episode_steps: int | None = None,
    autoreset_mode: Any = None,
    **kwargs: Any,
) -> Any:
    import gymnasium as gym

    from ._gym_export import ExportedGymEnv, ExportedGymVectorEnv

    env = _build(factory, transform, kwargs)
    mode = {} if autoreset_mode is None else {"autoreset_mode": autoreset_mode}
    if env.batch_size:
        with _closed_on_error(env):
            size = env.batch_size[0] if len(env.batch_size) == 1 else None
            if num_envs not in (1, size):
                raise ValueError(
                    NUM_ENVS_MISMATCH.format(
                        id=id, num_envs=num_envs, batch=tuple(env.batch_size), size=size
                    )
                )
            return ExportedGymVectorEnv(
                env,
                to_numpy=to_numpy,
                info_keys=info_keys,
                max_episode_steps=max_episode_steps,
                **mode,
            )

    # an unbatched env: gymnasium batches num_envs copies (the first one is the env built)
    built = [env]

    def make_one() -> Any:
        one = built.pop() if built else _build(factory, transform, kwargs)
        single = ExportedGymEnv(one, to_numpy=to_numpy, info_keys=info_keys, id=id)
        if max_episode_steps is not None:
            single = gym.wrappers.TimeLimit(single, max_episode_steps)
        return single

    return gym.vector.SyncVectorEnv([make_one] * num_envs, **mode)


def register_gym(
    env_cls: type[EnvBase],
    id: str,  # noqa: A002 (gymnasium's name)
    *,
    entry_point: Callable[..., EnvBase] | None = None,
    transform: Any = None,
    info_keys: Sequence[NestedKey] | None = None,
    backend: Any = None,
    to_numpy: bool = False,
    reward_threshold: float | None = None,
    nondeterministic: bool = False,
    max_episode_steps: int | None = None,
    order_enforce: bool = True,
    autoreset: bool = False,
    disable_env_checker: bool = False,
    apply_api_compatibility: bool = False,
    **kwargs: Any,
) -> None:
    """Register ``env_cls`` (or ``entry_point``) under the gymnasium id ``id``.

    ``gymnasium.make(id, **make_kwargs)`` builds ``entry_point(**kwargs, **make_kwargs)``
    (``env_cls`` by default), wraps it in ``TransformedEnv(env, transform.clone())`` when a
    transform is given, and returns it as a ``gymnasium.Env`` whose spaces come from its specs
    (``spec_to_space``). ``transform``, ``info_keys`` and ``to_numpy`` may also be passed to
    ``gymnasium.make``. A batched env is made with ``gymnasium.make_vec(id)`` (a gymnasium
    ``VectorEnv`` of ``num_envs`` = its batch size; ``autoreset_mode`` may be passed);
    ``make_vec`` of an unbatched env gives ``num_envs`` copies in a ``SyncVectorEnv``.
    ``reward_threshold``, ``nondeterministic``, ``max_episode_steps``, ``order_enforce`` and
    ``disable_env_checker`` go to ``gymnasium.register``; ``autoreset=True`` adds gymnasium's
    ``Autoreset`` wrapper; ``apply_api_compatibility`` does not exist in gymnasium >= 1.0 and
    ``True`` raises a ``TypeError``; ``backend`` must be gymnasium (see ``set_gym_backend``).

    Examples:
        >>> import gymnasium
        >>> from rlmocks import ContinuousActionVecMockEnv
        >>> register_gym(ContinuousActionVecMockEnv, "Mock-v0", to_numpy=True)
        >>> env = gymnasium.make("Mock-v0")
        >>> obs, info = env.reset(seed=0)
        >>> obs["observation"].shape
        (7,)
    """
    gym = import_optional("gymnasium", "gym", f"{env_cls.__name__}.register_gym")
    if backend is not None:
        set_gym_backend(backend).set()
    if apply_api_compatibility:
        raise TypeError(GYM_UNRECOGNIZED_KWARG.format("apply_api_compatibility", gym.__version__))
    factory = entry_point if entry_point is not None else env_cls
    if factory is EnvBase:
        raise TypeError(ABSTRACT_ENTRY.format(cls=env_cls.__name__, id=id))
    options = {
        "factory": factory,
        "id": id,
        "transform": transform,
        "info_keys": info_keys,
        "to_numpy": to_numpy,
        **kwargs,
    }
    gym.register(
        id=id,
        entry_point=functools.partial(_make_env, **options),
        vector_entry_point=functools.partial(_make_vector_env, **options),
        reward_threshold=reward_threshold,
        nondeterministic=nondeterministic,
        max_episode_steps=max_episode_steps,
        order_enforce=order_enforce,
        disable_env_checker=disable_env_checker,
        additional_wrappers=(gym.wrappers.Autoreset.wrapper_spec(),) if autoreset else (),
    )

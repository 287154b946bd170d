"""``EnvCreator``: a picklable env factory that knows the specs of the envs it builds."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import cloudpickle
import torch
from tensordict import TensorDictBase

from rlcore._env_base import EnvBase
from rlcore._env_specs import EnvSpecsMixin
from rlcore._shared_memory import keep_shared
from rlspecs import Composite

__all__ = ["EnvCreator"]

NOT_AN_ENV = "EnvCreator: the factory returned a {type}, an EnvBase was expected"


def _shared_state(state: Mapping[str, Any], share: bool = True) -> OrderedDict:
    """The entries of a state dict holding tensordicts (e.g. VecNorm's statistics), shared.

    Plain tensors (buffers) are dropped: each env keeps its own. With ``share=False`` the
    tensordicts stay where they are (each env built then loads a copy).
    """
    out = OrderedDict()
    for key, value in state.items():
        if isinstance(value, TensorDictBase):
            if share and not (value.is_shared() or value.is_memmap()):
                value.share_memory_()
            out[key] = value
        elif isinstance(value, Mapping) and _shared_state(value, share):
            out[key] = value
    return out


def _copy_state(dst: Mapping[str, Any], src: Mapping[str, Any], path: tuple[str, ...]) -> None:
    """Copies the tensordicts of ``src`` into those of ``dst`` in place, entry by entry."""
    for key, value in src.items():
        if key not in dst:
            where = ".".join((*path, key))
            raise KeyError(
                f"EnvCreator.load_state_dict: {where!r} is no state the envs built share "
                f"(at this level they have {sorted(dst)})"
            )
        if isinstance(dst[key], TensorDictBase):
            dst[key].copy_(value)
        elif isinstance(dst[key], Mapping):
            _copy_state(dst[key], value, (*path, key))


class _SpecView(EnvSpecsMixin):
    """Specs and key lists of an env, without the env."""

    def __init__(self, env: EnvBase) -> None:
        self.batch_size = env.batch_size
        self.device = env.device
        self.batch_locked = env.batch_locked
        self._action_required = env._action_required  # whether a step needs the action
        self.__dict__["_cache"] = {}
        self._spec_store("_output_spec", env.output_spec.clone())
        self._spec_store("_input_spec", env.input_spec.clone())


class EnvCreator:
    """Wraps an env factory so it can be sent to spawned processes (pickled with cloudpickle).

    At construction the factory is called once to read the specs, batch size and device of the
    envs it builds; that env is closed and dropped. Spec properties (``observation_spec``,
    ``full_action_spec``, ``done_keys``, ...) are served from the copy kept. The tensordicts of
    that env's state dict (``VecNorm``'s statistics) are put in shared memory and loaded into
    every env built, in this process or a worker (fork, spawn, forkserver): they share them.

    Args:
        create_env_fn: a callable returning an ``EnvBase``.
        create_env_kwargs: keyword arguments passed to it.
        share_memory: if False, those tensordicts are not put in shared memory: every env
            built starts from a copy of them and keeps its own (torchrl 0.4's flag).

    Examples:
        >>> creator = EnvCreator(lambda: MyEnv())
        >>> "observation" in creator.observation_spec.keys()
        True
        >>> env = creator()
    """

    def __init__(
        self,
        create_env_fn: Callable[..., EnvBase],
        create_env_kwargs: dict[str, Any] | None = None,
        share_memory: bool = True,
    ) -> None:
        self.create_env_fn = create_env_fn
        self.create_env_kwargs = dict(create_env_kwargs or {})
        env = self._make()
        self._meta = _SpecView(env)
        self.env_type = type(env)
        self._shared_state = _shared_state(env.state_dict(), share_memory)
        env.close()
        del env

    def state_dict(self) -> OrderedDict:
        """The tensordicts every env built loads (shared unless ``share_memory=False``).

        Examples:
            >>> from tensordict import TensorDict
            >>> class Counted(MyEnv):  # state in a tensordict, as VecNorm keeps its statistics
            ...     def __init__(self):
            ...         super().__init__()
            ...         self.stats = TensorDict({"count": torch.zeros(1)}, [])
            ...     def get_extra_state(self):
            ...         return {"td": self.stats}
            ...     def set_extra_state(self, state):
            ...         self.stats = state["td"]
            >>> EnvCreator(Counted).state_dict()["_extra_state"]["td"].is_shared()
            True
        """
        return self._shared_state

    def load_state_dict(self, state_dict: Mapping[str, Any]) -> None:
        """Copies ``state_dict``'s entries into the state shared with the envs built (in place).

        Raises ``KeyError`` naming an entry this creator's envs have no shared state for.
        """
        _copy_state(self._shared_state, state_dict, ())

    def _make(self, **kwargs: Any) -> EnvBase:
        env = self.create_env_fn(**{**self.create_env_kwargs, **kwargs})
        if not isinstance(env, EnvBase):
            raise TypeError(NOT_AN_ENV.format(type=type(env).__name__))
        return env

    def __call__(self, **kwargs: Any) -> EnvBase:
        """Builds a new env (``kwargs`` update ``create_env_kwargs``)."""
        env = self._make(**kwargs)
        if self._shared_state:
            env.load_state_dict(self._shared_state, strict=False)
        return env

    @property
    def batch_size(self) -> torch.Size:
        """Batch size of the envs built."""
        return self._meta.batch_size

    @property
    def device(self) -> torch.device | None:
        """Device of the envs built."""
        return self._meta.device

    @property
    def batch_locked(self) -> bool:
        """Whether the envs built are batch-locked."""
        return self._meta.batch_locked

    @property
    def _action_required(self) -> bool:
        # whether the envs built need their action to step (rlcore's step contract)
        return self._meta._action_required

    @property
    def specs(self) -> Composite:
        """A Composite with ``output_spec`` and ``input_spec``."""
        return Composite(
            output_spec=self._meta.output_spec,
            input_spec=self._meta.input_spec,
            shape=self._meta.batch_size,
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_meta":
            raise AttributeError(name)
        descriptor = getattr(EnvSpecsMixin, name, None)
        if isinstance(descriptor, property):
            return getattr(self._meta, name)
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["create_env_fn"] = cloudpickle.dumps(self.create_env_fn)
        # handles to the shared memory, not copies, for a worker being started
        state["_shared_state"] = keep_shared(self._shared_state)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        state["create_env_fn"] = cloudpickle.loads(state["create_env_fn"])
        self.__dict__.update(state)

    def __repr__(self) -> str:
        return f"EnvCreator({self.create_env_fn!r}, create_env_kwargs={self.create_env_kwargs})"

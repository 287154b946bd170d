"""Our envs as gymnasium envs: the ``gymnasium.Env`` and ``VectorEnv`` behind ``register_gym``.

This module imports gymnasium at the top: ``rllibs`` imports it only when an env is made.
What gymnasium sees is decided once per env (``_Plan``): the spaces (``spec_to_space`` of the
unbatched specs), the observation and info leaves, and a converter per leaf; a step then sets
the action, steps the env, reads those leaves and moves to the next root (``StepMDP``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rlcore import EnvBase, StepMDP
from rlspecs import NestedKey, unravel_key

from ._extras import missing_extra
from ._gym_spaces import make_reader, make_writer, spec_to_space

try:  # the classes below subclass gymnasium's: this module needs it at import
    import gymnasium as gym
    from gymnasium.vector import AutoresetMode
    from gymnasium.vector.utils import batch_space
except ImportError as err:
    raise ImportError(missing_extra("register_gym", "gymnasium", "gym")) from err

__all__ = ["ExportedGymEnv", "ExportedGymVectorEnv"]

BATCHED_SINGLE = (
    "{env} has batch_size={batch}: a batched env is a gymnasium vector env; build it with "
    "gymnasium.make_vec({id!r}) instead of gymnasium.make"
)
NOT_ONE_BATCH_DIM = (
    "{env} has batch_size={batch}: a gymnasium vector env needs exactly one batch dim "
    "(num_envs); reshape the batch or flatten it before registering"
)
UNKNOWN_INFO_KEY = (
    "info key {key!r} is not an entry of {env}'s observation, reward or done specs; "
    "choose among {available}"
)
SEVERAL_REWARDS = (
    "{env} has several reward keys {keys}: a gymnasium env returns one reward; keep one (e.g. "
    "with a transform) before registering"
)
NO_TERMINATION = (
    "{env} has no done keys ending in 'terminated' or 'done' (done keys: {keys}); gymnasium "
    "needs a termination signal"
)
RESET_FIRST = "call reset() before step(): the env has no current state"
PER_ENV_SEEDS = (
    "reset(seed={seed!r}): one seed per sub-env is not supported by a batched env; pass one int "
    "(the batched env derives the sub-env seeds from it)"
)
NEXT_STEP_UNSUPPORTED = (
    "autoreset_mode={mode!r} is not supported for a batched env: it steps every sub-env at "
    "once, so a sub-env cannot skip a step to reset; use AutoresetMode.SAME_STEP (the default) "
    "or AutoresetMode.DISABLED"
)
RESET_MASK_SHAPE = "reset(options={{'reset_mask': ...}}) needs {n} booleans, got shape {shape}"


def _path(key: NestedKey) -> tuple[str, ...]:
    key = unravel_key(key)
    return (key,) if isinstance(key, str) else tuple(key)


def _key(path: tuple[str, ...]) -> NestedKey:
    # a root entry by its str name: tensordict's get is quickest so
    return path[0] if len(path) == 1 else path


def _under(path: tuple[str, ...], roots: Sequence[tuple[str, ...]]) -> bool:
    return any(path[: len(root)] == root for root in roots)


def _nest(items: Sequence[tuple[tuple[str, ...], Any]]) -> dict:
    out: dict = {}
    for path, value in items:
        node = out
        for name in path[:-1]:
            node = node.setdefault(name, {})
        node[path[-1]] = value
    return out


def _dict_space(items: Sequence[tuple[tuple[str, ...], Any]]) -> Any:
    def to_space(tree: Any) -> Any:
        if isinstance(tree, dict):
            return gym.spaces.Dict({key: to_space(sub) for key, sub in tree.items()})
        return tree

    return to_space(_nest(items))


def _leaf(tree: Any, path: tuple[str, ...]) -> Any:
    for name in path:
        tree = tree[name]
    return tree


def _numpy_copy(value: Any) -> Any:
    # a writer may return a view of the env's tensor: the caller keeps what we return
    if isinstance(value, np.ndarray) and not value.flags.owndata:
        return value.copy()
    return value


def _tensor_out(tensor: torch.Tensor, to_numpy: bool) -> Any:
    if to_numpy:
        return tensor.detach().cpu().numpy().copy()
    return tensor.clone()


class _Plan:
    """What gymnasium sees of ``env``, decided once: spaces, leaves and their converters."""

    def __init__(self, env: EnvBase, info_keys: Sequence[NestedKey] | None, to_numpy: bool):
        ndim = len(env.batch_size)
        self.ndim = ndim
        self.to_numpy = to_numpy
        index = (0,) * ndim
        obs_spec = env.full_observation_spec
        obs_spec = obs_spec[index] if ndim else obs_spec
        self.info_paths = [_path(key) for key in (info_keys or ())]
        self._check_info_keys(env)

        # observations: every leaf not under an info key
        obs_leaves = [
            (_path(key), obs_spec[key])
            for key in obs_spec.keys(True, True)
            if not _under(_path(key), self.info_paths)
        ]
        leaf_spaces = [(path, spec_to_space(spec)) for path, spec in obs_leaves]
        self.observation_space = _dict_space(leaf_spaces)
        self.obs_leaves = [
            (path, _key(path), make_writer(space, spec, ndim))
            for (path, spec), (_, space) in zip(obs_leaves, leaf_spaces)
        ]

        # info: the leaves under each info key, from the observation, reward or done entries
        self.info_leaves = [
            (_path(key), key)
            for spec in (env.full_observation_spec, env.full_reward_spec, env.full_done_spec)
            for key in spec.keys(True, True)
            if _under(_path(key), self.info_paths)
        ]

        # actions: one leaf gives its own space, several a Dict keyed like the action spec
        action_spec = env.full_action_spec
        action_spec = action_spec[index] if ndim else action_spec
        action_keys = [_path(key) for key in env.action_keys]
        action_leaves = [(path, action_spec[path]) for path in action_keys]
        action_spaces = [(path, spec_to_space(spec)) for path, spec in action_leaves]
        if len(action_leaves) == 1:
            self.action_space = action_spaces[0][1]
            self.single_action = True
        else:
            self.action_space = _dict_space(action_spaces)
            self.single_action = False
        self.action_leaves = [
            (path, _key(path), env.full_action_spec[path].shape, spec.dtype)
            + (make_reader(space, spec, ndim),)
            for (path, spec), (_, space) in zip(action_leaves, action_spaces)
        ]

        reward_keys = env.reward_keys
        if len(reward_keys) != 1:
            raise ValueError(SEVERAL_REWARDS.format(env=type(env).__name__, keys=reward_keys))
        self.reward_key = reward_keys[0]
        done_keys = [_path(key) for key in env.done_keys]
        terminated = [_key(key) for key in done_keys if key[-1] == "terminated"]
        self.terminated_keys = terminated or [_key(key) for key in done_keys if key[-1] == "done"]
        if not self.terminated_keys:
            raise ValueError(NO_TERMINATION.format(env=type(env).__name__, keys=env.done_keys))
        self.truncated_keys = [_key(key) for key in done_keys if key[-1] == "truncated"]

    def _check_info_keys(self, env: EnvBase) -> None:
        available = set()
        for spec in (env.full_observation_spec, env.full_reward_spec, env.full_done_spec):
            available.update(_path(key) for key in spec.keys(True))
        for path in self.info_paths:
            if path not in available:
                raise KeyError(
                    UNKNOWN_INFO_KEY.format(
                        key=path if len(path) > 1 else path[0],
                        env=type(env).__name__,
                        available=sorted(available),
                    )
                )

    # ------------------------------------------------------------------ conversions
    def write_action(self, tensordict: TensorDictBase, action: Any) -> None:
        for path, key, shape, dtype, read in self.action_leaves:
            value = action if self.single_action else _leaf(action, path)
            if not isinstance(value, torch.Tensor):
                value = read(value)
            elif value.shape != shape:  # e.g. labels for a one-hot action: as gymnasium's
                value = read(value.detach().cpu().numpy())
            tensordict.set(key, value.to(dtype))

    def observation(self, tensordict: TensorDictBase) -> dict:
        if self.to_numpy:
            return _nest(
                [
                    (path, _numpy_copy(write(tensordict.get(key))))
                    for path, key, write in self.obs_leaves
                ]
            )
        return _nest([(path, tensordict.get(key).clone()) for path, key, _ in self.obs_leaves])

    def info(self, *sources: TensorDictBase) -> dict:
        items = []
        for path, key in self.info_leaves:
            for source in sources:
                value = source.get(key, None)
                if value is not None:
                    items.append((path, _tensor_out(value, self.to_numpy)))
                    break
        return _nest(items)

    def flag(self, next_td: TensorDictBase, keys: list) -> bool:
        """Whether any entry of ``keys`` is set (an unbatched env)."""
        return any(bool(next_td.get(key).any()) for key in keys)

    def flags(self, next_td: TensorDictBase, keys: list) -> torch.Tensor:
        """Whether any of ``keys`` is set, per env (a batched env), on the CPU."""
        shape = next_td.batch_size
        out = torch.zeros(shape, dtype=torch.bool)
        for key in keys:
            out |= next_td.get(key).reshape(*shape, -1).any(-1).cpu()
        return out


class ExportedGymEnv(gym.Env):
    """A ``gymnasium.Env`` backed by an unbatched ``EnvBase`` (what ``register_gym`` registers).

    Observations are a dict (nested keys as nested dicts) of the observation leaves not listed in
    ``info_keys``; ``info`` holds the entries under ``info_keys``. With ``to_numpy`` the values
    are what a gymnasium env with these spaces returns (NumPy arrays, ``int`` for ``Discrete``),
    otherwise they are the env's tensors (one-hot actions stay one-hot). The reward is a
    ``float`` (a tensor or array when it has several entries), ``terminated``/``truncated`` are
    ``bool`` from the done entries. ``reset(seed=s)`` seeds the env (``env.set_seed(s)``), so
    seeded resets replay; ``options`` are passed to ``env.reset`` as keyword arguments.
    Returned data never shares memory with the env's.

    Examples:
        >>> from rlmocks import ContinuousActionVecMockEnv
        >>> env = ExportedGymEnv(ContinuousActionVecMockEnv(), to_numpy=True)
        >>> obs, info = env.reset(seed=0)
        >>> sorted(obs), obs["observation"].shape
        (['observation', 'observation_orig'], (7,))
    """

    metadata = {"render_modes": []}  # noqa: RUF012 (gymnasium's class attribute)

    def __init__(
        self,
        env: EnvBase,
        *,
        to_numpy: bool = False,
        info_keys: Sequence[NestedKey] | None = None,
        id: str | None = None,  # noqa: A002 (gymnasium's name)
    ) -> None:
        if env.batch_size:
            raise ValueError(
                BATCHED_SINGLE.format(env=type(env).__name__, batch=tuple(env.batch_size), id=id)
            )
        self.torchrl_env = env
        self.to_numpy = to_numpy
        self._plan = _Plan(env, info_keys, to_numpy)
        self.observation_space = self._plan.observation_space
        self.action_space = self._plan.action_space
        self._step_mdp = StepMDP(env)
        self._root: TensorDictBase | None = None
        self._closed = False

    @property
    def info_keys(self) -> list[tuple[str, ...]]:
        """The keys read into ``info`` (and left out of the observations)."""
        return list(self._plan.info_paths)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict, dict]:
        """Reset the env (seeded when ``seed`` is given); returns ``(observation, info)``."""
        super().reset(seed=seed)
        if seed is not None:
            self.torchrl_env.set_seed(seed)
        tensordict = self.torchrl_env.reset(**(options or {}))
        self._root = tensordict
        return self._plan.observation(tensordict), self._plan.info(tensordict)

    def step(self, action: Any) -> tuple[dict, Any, bool, bool, dict]:
        """Take ``action``; returns ``(observation, reward, terminated, truncated, info)``."""
        plan = self._plan
        tensordict = self._root
        if tensordict is None:
            raise gym.error.ResetNeeded(RESET_FIRST)
        plan.write_action(tensordict, action)
        tensordict = self.torchrl_env.step(tensordict)
        next_td = tensordict.get("next")
        self._root = self._step_mdp(tensordict)
        reward = next_td.get(plan.reward_key)
        reward = float(reward) if reward.numel() == 1 else _tensor_out(reward, self.to_numpy)
        return (
            plan.observation(next_td),
            reward,
            plan.flag(next_td, plan.terminated_keys),
            plan.flag(next_td, plan.truncated_keys),
            plan.info(next_td),
        )

    def close(self) -> None:
        """Close the env (again: a no-op)."""
        if not self._closed:
            self._closed = True
            self.torchrl_env.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.torchrl_env!r})"


class ExportedGymVectorEnv(gym.vector.VectorEnv):
    """A gymnasium ``VectorEnv`` backed by an ``EnvBase`` of batch size ``(num_envs,)``.

    Values are batched (leading dim ``num_envs``) and converted as in ``ExportedGymEnv``;
    ``rewards``, ``terminations`` and ``truncations`` have shape ``(num_envs,)``. Its autoreset
    mode is ``SAME_STEP`` (a finished sub-env is reset inside the step that ends it, its last
    observation in ``info["final_obs"]`` and its info in ``info["final_info"]``, masked by
    ``info["_final_obs"]``) or ``DISABLED`` (reset sub-envs with
    ``reset(options={"reset_mask": mask})``). ``max_episode_steps`` truncates each sub-env's
    episodes. ``info`` entries come with gymnasium's ``"_<key>"`` masks.

    Examples:
        >>> from rlmocks import CountingBatchedEnv
        >>> import torch
        >>> env = ExportedGymVectorEnv(CountingBatchedEnv(batch_size=(2,), max_steps=torch.tensor([2, 3])), to_numpy=True)
        >>> obs, _ = env.reset(seed=0)
        >>> obs["observation"].shape
        (2, 1)
    """

    def __init__(
        self,
        env: EnvBase,
        *,
        to_numpy: bool = False,
        info_keys: Sequence[NestedKey] | None = None,
        autoreset_mode: AutoresetMode | str = AutoresetMode.SAME_STEP,
        max_episode_steps: int | None = None,
    ) -> None:
        if len(env.batch_size) != 1:
            raise ValueError(
                NOT_ONE_BATCH_DIM.format(env=type(env).__name__, batch=tuple(env.batch_size))
            )
        mode = AutoresetMode(autoreset_mode)
        if mode == AutoresetMode.NEXT_STEP:
            raise ValueError(NEXT_STEP_UNSUPPORTED.format(mode=mode))
        self.torchrl_env = env
        self.to_numpy = to_numpy
        self.num_envs = env.batch_size[0]
        self._plan = plan = _Plan(env, info_keys, to_numpy)
        self.single_observation_space = plan.observation_space
        self.single_action_space = plan.action_space
        self.observation_space = batch_space(plan.observation_space, self.num_envs)
        self.action_space = batch_space(plan.action_space, self.num_envs)
        self.metadata = {"autoreset_mode": mode, "render_modes": []}
        self.max_episode_steps = max_episode_steps
        self._elapsed = torch.zeros(self.num_envs, dtype=torch.int64)
        self._step_mdp = StepMDP(env)
        self._reset_shapes = [
            (reset_key, env.full_done_spec[group[0]].shape)
            for reset_key, group in zip(env.reset_keys, env.done_keys_groups)
        ]
        self._root: TensorDictBase | None = None

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict, dict]:
        """Reset every sub-env, or those of ``options["reset_mask"]``; returns ``(obs, info)``."""
        if seed is not None and not isinstance(seed, int):
            raise ValueError(PER_ENV_SEEDS.format(seed=seed))
        super().reset(seed=seed)
        if seed is not None:
            self.torchrl_env.set_seed(seed)
        options = dict(options or {})
        mask = options.pop("reset_mask", None)
        if mask is not None and self._root is not None:
            mask = torch.as_tensor(np.asarray(mask), dtype=torch.bool)
            if mask.shape != (self.num_envs,):
                raise ValueError(RESET_MASK_SHAPE.format(n=self.num_envs, shape=tuple(mask.shape)))
            tensordict = self._partial_reset(self._root, mask, **options)
        else:
            tensordict = self.torchrl_env.reset(**options)
            self._elapsed.zero_()
        self._root = tensordict
        return self._plan.observation(tensordict), self._masked(self._plan.info(tensordict))

    def _partial_reset(
        self, tensordict: TensorDictBase, mask: torch.Tensor, **kwargs: Any
    ) -> TensorDictBase:
        for reset_key, shape in self._reset_shapes:
            view = mask.reshape(-1, *([1] * (len(shape) - 1))).expand(shape)
            tensordict.set(reset_key, view.to(tensordict.device))
        self._elapsed[mask] = 0
        return self.torchrl_env.reset(tensordict, **kwargs)

    def step(self, actions: Any) -> tuple[dict, Any, Any, Any, dict]:
        """Step every sub-env; returns ``(obs, rewards, terminations, truncations, info)``."""
        plan = self._plan
        tensordict = self._root
        if tensordict is None:
            raise gym.error.ResetNeeded(RESET_FIRST)
        plan.write_action(tensordict, actions)
        tensordict = self.torchrl_env.step(tensordict)
        next_td = tensordict.get("next")
        root = self._step_mdp(tensordict)
        terminated = plan.flags(next_td, plan.terminated_keys)
        truncated = plan.flags(next_td, plan.truncated_keys)
        if self.max_episode_steps is not None:
            self._elapsed += 1
            truncated |= self._elapsed >= self.max_episode_steps
        reward = next_td.get(plan.reward_key)
        reward = reward.reshape(self.num_envs) if reward.numel() == self.num_envs else reward
        done = terminated | truncated
        info = plan.info(next_td)
        if self.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP and bool(done.any()):
            info = self._masked(info)
            final_obs = np.full(self.num_envs, None, dtype=object)
            whole = plan.observation(next_td)
            for i in done.nonzero().flatten().tolist():
                final_obs[i] = _index(whole, i)
            info["final_info"], info["_final_info"] = info.copy(), done.numpy()
            info["final_obs"], info["_final_obs"] = final_obs, done.numpy()
            root = self._partial_reset(root, done)
            info.update(self._masked(plan.info(root)))
        else:
            info = self._masked(info)
        self._root = root
        out = (
            plan.observation(root),
            _tensor_out(reward, self.to_numpy),
            terminated.numpy() if self.to_numpy else terminated,
            truncated.numpy() if self.to_numpy else truncated,
            info,
        )
        return out

    def _masked(self, info: dict) -> dict:
        """Gymnasium's vector info layout: each entry beside a ``"_<key>"`` mask."""
        out = {}
        for key, value in info.items():
            out[key] = self._masked(value) if isinstance(value, dict) else value
            out[f"_{key}"] = np.ones(self.num_envs, dtype=bool)
        return out

    def close_extras(self, **kwargs: Any) -> None:
        """Close the env."""
        self.torchrl_env.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.torchrl_env!r}, num_envs={self.num_envs})"


def _index(tree: Any, i: int) -> Any:
    if isinstance(tree, dict):
        return {key: _index(value, i) for key, value in tree.items()}
    return tree[i]

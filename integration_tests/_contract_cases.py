"""The env kinds and paths of the step-contract matrix, its references and its comparison.

Shared by ``test_contract_paths.py`` (rollouts of every path compared exactly) and
``test_contract_inputs.py`` (the input checks of every path).

- **Kinds** (``KINDS``): every env kind shipped (gymnasium classic control, MuJoCo, Atari,
  DeepMind Control, the rlmocks envs, an auto-resetting env) and ``DriftEnv``, a custom
  ``EnvBase`` defined here (with and without a stepper). Each kind gives the keyword arguments
  of its sub-env ``i`` (``rows``: episodes of different lengths, so batched envs reset some rows
  only); ``build`` makes one, and ``factories`` gives picklable factories (``spawn`` workers
  import this module).
- **References**: ``hand_rollout`` steps one env by hand (``step`` + ``step_mdp``, or
  ``step_and_maybe_reset``); ``lockstep_rollout`` steps the sub-envs of a batched env by hand,
  one single env each, and stacks them (the reference of ``SerialEnv``, ``ParallelEnv`` and
  library-batched envs). Actions are replayed (``replay_actions``), everything is seeded.
- **Comparison**: ``assert_same_rollout`` (type, batch size, dim names, keys in order, each
  leaf's dtype, shape and values, NaN equal to NaN).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tensordict import TensorDict, TensorDictBase

from rlbatched import ParallelEnv, SerialEnv
from rlcore import EnvBase, StepLeaf, Stepper, step_mdp
from rlmocks import (
    AutoResettingCountingEnv,
    ContinuousActionVecMockEnv,
    CountingEnv,
    MockSerialEnv,
    NestedCountingEnv,
)
from rlspecs import Categorical, Composite, Unbounded

NUM_ENVS = 2  # sub-envs of every batched env (rows 0 and 1 of each kind's ``rows``)
SEED = 7
ACTION_SEED = 11
MODES = {"no-break": False, "break": True}  # mode -> break_when_any_done

HAS_ALE = importlib.util.find_spec("ale_py") is not None
HAS_MUJOCO = importlib.util.find_spec("mujoco") is not None
HAS_DMC = importlib.util.find_spec("dm_control") is not None
HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None


# ---------------------------------------------------------------------- a custom env
class DriftEnv(EnvBase):
    """A custom env: a point drifted by an integer action; ends past 0.8, truncated at k steps.

    Observations ``position`` (float32, (2,)) and ``steps`` (int64, (1,)); action ``Categorical(3)``
    (int64, (1,)): the point moves by ``(action - 1) * (0.3, -0.2)``; reward ``-|position|_1``.
    ``_step`` returns its entries in an order of its own and no ``done`` (the contract orders
    them and computes ``done``). Resets draw the start from the env's own NumPy generator
    (``set_seed``). With ``stepper=True`` it offers a ``Stepper`` with the same dynamics.
    """

    MOVE = np.array([0.3, -0.2], np.float32)

    def __init__(self, truncate_at: int = 5, stepper: bool = False) -> None:
        super().__init__()
        self.observation_spec = Composite(
            position=Unbounded((2,)), steps=Unbounded((1,), dtype=torch.int64)
        )
        self.action_spec = Categorical(3, shape=(1,))
        self.reward_spec = Unbounded((1,))
        flag = Categorical(2, shape=(1,), dtype=torch.bool)
        self.done_spec = Composite(done=flag, terminated=flag.clone(), truncated=flag.clone())
        self.truncate_at = truncate_at
        self.offers_stepper = stepper
        self.rng = np.random.default_rng(0)
        self.position = np.zeros(2, np.float32)
        self.count = 0

    # the simulator, shared by _step/_reset and the stepper
    def sim_reset(self) -> tuple[np.ndarray, np.ndarray]:
        self.position = self.rng.uniform(-0.4, 0.4, 2).astype(np.float32)
        self.count = 0
        return self.position.copy(), np.array([0], np.int64)

    def sim_step(self, action: np.ndarray) -> tuple:
        move = (np.asarray(action, np.int64).reshape(()) - 1).astype(np.float32)
        self.position = (self.position + move * self.MOVE).astype(np.float32)
        self.count += 1
        reward = np.float32(-np.abs(self.position).sum())
        terminated = bool(np.abs(self.position).max() > 0.8)
        truncated = self.count >= self.truncate_at
        return self.position.copy(), np.array([self.count], np.int64), reward, terminated, truncated

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        position, steps = self.sim_reset()
        return TensorDict(
            {"steps": torch.from_numpy(steps), "position": torch.from_numpy(position)}, []
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        position, steps, reward, terminated, truncated = self.sim_step(
            tensordict.get("action").numpy()
        )
        return TensorDict(
            {
                "truncated": torch.tensor([truncated]),
                "reward": torch.tensor([reward]),
                "terminated": torch.tensor([terminated]),
                "steps": torch.from_numpy(steps),
                "position": torch.from_numpy(position),
            },
            [],
        )

    def _set_seed(self, seed: int | None) -> None:
        self.rng = np.random.default_rng(seed)

    def _stepper(self) -> Stepper | None:
        return DriftStepper(self) if self.offers_stepper else None


class DriftStepper(Stepper):
    """``DriftEnv``'s stepper: the same simulator, written into rows of NumPy buffers."""

    action_key, numpy_action = "action", True
    obs_leaves = (
        StepLeaf("position", torch.Size([2]), torch.float32),
        StepLeaf("steps", torch.Size([1]), torch.int64),
    )
    scalar_leaves = (
        StepLeaf("reward", torch.Size([1]), torch.float32),
        StepLeaf("terminated", torch.Size([1]), torch.bool),
        StepLeaf("truncated", torch.Size([1]), torch.bool),
    )

    def __init__(self, env: DriftEnv) -> None:
        self.env = env

    def step(self, action: Any, out: list, row: int) -> tuple:
        position, steps, reward, terminated, truncated = self.env.sim_step(action)
        out[0][row], out[1][row] = position, steps
        return reward, terminated, truncated

    def reset(self, tensordict: TensorDictBase | None, out: list, row: int) -> None:
        out[0][row], out[1][row] = self.env.sim_reset()


# ---------------------------------------------------------------------- env kinds
def make_gym(env_name: str, **kwargs: Any) -> EnvBase:
    """``GymEnv(env_name, **kwargs)``, registering ALE's games first for an ``ALE/`` id."""
    from rllibs import GymEnv

    if env_name.startswith("ALE/"):
        import ale_py
        import gymnasium

        gymnasium.register_envs(ale_py)
    return GymEnv(env_name, **kwargs)


def make_dmc(**kwargs: Any) -> EnvBase:
    from rllibs import DMControlEnv

    return DMControlEnv("cartpole", "balance", **kwargs)


def make_auto_reset(**kwargs: Any) -> EnvBase:
    """An env that resets itself when done, built with ``auto_reset=True`` (an AutoResetEnv)."""
    return AutoResettingCountingEnv(auto_reset=True, **kwargs)


@dataclass(frozen=True)
class Kind:
    """One env kind: how to build sub-env ``i`` and what its rollouts are expected to show."""

    name: str
    make: Callable[..., EnvBase]
    rows: tuple[dict, ...]  # keyword arguments of sub-env i (row 0: the single env)
    steps: int
    stepper: bool = False  # the single env offers a stepper (rlcore.stepper_of)
    ends: bool = True  # episodes end within ``steps`` (asserted: the resets are exercised)
    torch_rng: bool = False  # resets draw from torch's global generator
    vector: dict | None = None  # kwargs of GymEnv(..., num_envs=N), each row built with them
    requires: bool = True  # the libraries are importable


KINDS: dict[str, Kind] = {
    kind.name: kind
    for kind in (
        Kind(
            "pendulum",
            functools.partial(make_gym, "Pendulum-v1"),
            tuple({"max_episode_steps": k} for k in (5, 6, 7)),
            steps=16,
            stepper=True,
            vector={"max_episode_steps": 6},
        ),
        Kind(
            "cartpole", functools.partial(make_gym, "CartPole-v1"), ({},) * 3, 30, True, vector={}
        ),
        Kind(
            "halfcheetah",
            functools.partial(make_gym, "HalfCheetah-v5"),
            tuple({"max_episode_steps": k} for k in (4, 5, 6)),
            steps=12,
            stepper=True,
            vector={"max_episode_steps": 5},
            requires=HAS_MUJOCO,
        ),
        Kind(
            "pong",
            functools.partial(make_gym, "ALE/Pong-v5"),
            tuple({"max_episode_steps": k} for k in (3, 4, 5)),
            steps=8,
            stepper=True,
            vector={"max_episode_steps": 4},
            requires=HAS_ALE,
        ),
        Kind(
            "dm-control",
            make_dmc,
            tuple({"time_limit": k / 100} for k in (4, 5, 6)),
            steps=14,
            stepper=True,
            requires=HAS_DMC,
        ),
        Kind("counting", CountingEnv, tuple({"max_steps": k} for k in (2, 3, 4)), 12),
        Kind(
            "nested-counting",
            NestedCountingEnv,
            tuple({"max_steps": k, "nested_dim": 2} for k in (2, 3, 4)),
            12,
        ),
        Kind(
            "continuous-vec", ContinuousActionVecMockEnv, ({},) * 3, 8, ends=False, torch_rng=True
        ),
        Kind("mock-serial", MockSerialEnv, ({},) * 3, 8, ends=False),
        Kind("drift", DriftEnv, tuple({"truncate_at": k} for k in (4, 5, 6)), 16),
        Kind(
            "drift-stepper",
            DriftEnv,
            tuple({"truncate_at": k, "stepper": True} for k in (4, 5, 6)),
            16,
            stepper=True,
        ),
        Kind("auto-reset", make_auto_reset, tuple({"max_steps": k} for k in (2, 3, 4)), 12),
    )
}


# the kinds whose ParallelEnv is also started with "spawn" (each start imports torch afresh, a few
# seconds): a gymnasium env (stepper rows), the custom env's own stepper, the mock whose resets
# draw from torch's generator (each worker's own) and an auto-resetting env (rltransforms found
# by name in a fresh interpreter)
SPAWN_KINDS = ("pendulum", "drift-stepper", "continuous-vec", "auto-reset")


def kind_params(names: Sequence[str] | None = None) -> list:
    """``pytest.param(kind, id=name)`` of the kinds ``names`` (all by default), a kind whose
    libraries are missing skipped with the reason."""
    import pytest

    out = []
    for name in names or KINDS:
        kind = KINDS[name]
        marks = () if kind.requires else (pytest.mark.skip(reason=f"{name}: library missing"),)
        out.append(pytest.param(kind, id=name, marks=marks))
    return out


def build(kind: Kind, row: int = 0, stepper: bool = True) -> EnvBase:
    """Sub-env ``row`` of ``kind`` (offering no stepper when ``stepper`` is False)."""
    env = kind.make(**kind.rows[row])
    return env if stepper else disable_stepper(env)


def factories(kind: Kind, stepper: bool = True) -> list[Callable[[], EnvBase]]:
    """Picklable factories of the ``NUM_ENVS`` sub-envs of ``kind``."""
    return [functools.partial(build, kind, row, stepper) for row in range(NUM_ENVS)]


def disable_stepper(env: EnvBase) -> EnvBase:
    """``env`` on the general path: it offers no stepper (as ``rllibs``' tests disable it)."""
    env._stepper = lambda: None
    env.empty_cache()
    return env


# ---------------------------------------------------------------------- actions and seeds
def replay_actions(env: EnvBase, steps: int, seed: int = ACTION_SEED) -> TensorDictBase:
    """``steps`` actions drawn from ``env``'s action spec (``[steps, *batch]``), reproducibly."""
    spec = env.full_action_spec
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return spec.expand(steps, *spec.shape).rand()


class Replay:
    """A policy writing ``actions[t]`` (a copy: the actions are cached) at its ``t``-th call."""

    def __init__(self, actions: TensorDictBase) -> None:
        self.actions = actions
        self.calls = 0

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        td.update(self.actions[self.calls].clone())
        self.calls += 1
        return td


class Generators:
    """Each sub-env's own state of torch's global generator (``isolated``), as in ParallelEnv's
    workers, or one state shared by all (as in SerialEnv)."""

    def __init__(self, count: int, isolated: bool) -> None:
        self.states: list | None = [None] * count if isolated else None

    @contextlib.contextmanager
    def of(self, index: int) -> Iterator[None]:
        if self.states is None:
            yield
            return
        outer = torch.get_rng_state()
        if self.states[index] is not None:
            torch.set_rng_state(self.states[index])
        try:
            yield
        finally:
            self.states[index] = torch.get_rng_state()
            torch.set_rng_state(outer)


# ---------------------------------------------------------------------- references
def _any_done(env: EnvBase, transition: TensorDictBase) -> bool:
    return any(bool(transition.get(("next", *_path(key))).any()) for key in env.done_keys)


def _path(key: Any) -> tuple:
    return (key,) if isinstance(key, str) else tuple(key)


def _shift(env: EnvBase, transition: TensorDictBase) -> TensorDictBase:
    """The next root, by the public ``step_mdp``."""
    return step_mdp(
        transition,
        exclude_action=False,
        reward_keys=env.reward_keys,
        done_keys=env.done_keys,
        action_keys=env.action_keys,
    )


def _timed(steps: list[TensorDictBase], dim: int) -> TensorDictBase:
    out = torch.stack(steps, dim)
    out.refine_names(..., "time")
    return out


def hand_rollout(
    env: EnvBase, steps: int, policy: Callable, break_when_any_done: bool
) -> TensorDictBase:
    """``env`` stepped by hand: ``step`` and ``step_mdp`` up to the first done when
    ``break_when_any_done``, else ``step_and_maybe_reset``; the transitions stacked."""
    td = env.reset()
    recorded = []
    for t in range(steps):
        td = policy(td)
        if break_when_any_done or t == steps - 1:
            transition = env.step(td)
            recorded.append(transition)
            if break_when_any_done and _any_done(env, transition):
                break
            td = _shift(env, transition)
        else:
            transition, td = env.step_and_maybe_reset(td)
            recorded.append(transition)
    return _timed(recorded, len(env.batch_size))


def lockstep_rollout(
    envs: Sequence[EnvBase],
    steps: int,
    actions: TensorDictBase,
    break_when_any_done: bool,
    generators: Generators,
) -> TensorDictBase:
    """The single ``envs`` stepped by hand side by side (``step``, ``step_mdp``, then
    ``maybe_reset`` of each), each with its row of ``actions[t]``; stacked ``[N, T]``."""
    roots = []
    for index, env in enumerate(envs):
        with generators.of(index):
            roots.append(env.reset())
    recorded = []
    for t in range(steps):
        transitions = []
        for index, env in enumerate(envs):
            with generators.of(index):
                transitions.append(env.step(roots[index].update(actions[t][index])))
        batch = torch.stack(transitions, 0)
        recorded.append(batch)
        if break_when_any_done and any(_any_done(env, tr) for env, tr in zip(envs, transitions)):
            break
        for index, env in enumerate(envs):
            with generators.of(index):
                roots[index] = env.maybe_reset(_shift(env, transitions[index]))
    return _timed(recorded, 1)


_REFERENCES: dict[tuple, TensorDictBase] = {}


def batched_reference(
    kind: Kind, break_when_any_done: bool, *, isolated: bool = False, vector: bool = False
) -> TensorDictBase:
    """The sub-envs of ``kind`` stepped by hand (cached; never modify the result).

    ``isolated``: each sub-env draws from its own torch generator (ParallelEnv's workers).
    ``vector``: the rows of ``GymEnv(..., num_envs=N)``, sub-env i seeded ``SEED + i``
    (gymnasium's vector seeding) instead of the batched envs' seed chain.
    """
    isolated = isolated and kind.torch_rng  # the same otherwise
    key = (kind.name, break_when_any_done, isolated, vector)
    if key not in _REFERENCES:
        actions = batched_actions(kind)  # first: building an env may seed torch
        generators = Generators(NUM_ENVS, isolated)
        envs = []
        for row in range(NUM_ENVS):
            with generators.of(row):
                envs.append(kind.make(**(kind.vector if vector else kind.rows[row])))
        if vector:
            for row, env in enumerate(envs):
                env.set_seed(SEED + row, static_seed=True)
        else:
            seed = SEED
            for row, env in enumerate(envs):
                with generators.of(row):
                    seed = env.set_seed(seed)
        _REFERENCES[key] = lockstep_rollout(
            envs, kind.steps, actions, break_when_any_done, generators
        )
        for env in envs:
            env.close()
    return _REFERENCES[key]


_ACTIONS: dict[str, TensorDictBase] = {}


def batched_actions(kind: Kind) -> TensorDictBase:
    """The replayed actions of ``kind``'s batched envs, ``[T, N, ...]`` (cached: do not modify)."""
    if kind.name not in _ACTIONS:
        single = kind.make(**kind.rows[0])
        spec = single.full_action_spec
        single.close()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(ACTION_SEED)
            _ACTIONS[kind.name] = spec.expand(kind.steps, NUM_ENVS, *spec.shape).rand()
    return _ACTIONS[kind.name]


def single_reference(kind: Kind, break_when_any_done: bool) -> TensorDictBase:
    """Sub-env 0 of ``kind`` stepped by hand, seeded, replaying ``single_actions`` (cached;
    never modify the result)."""
    key = (kind.name, break_when_any_done, "single")
    if key not in _REFERENCES:
        actions = single_actions(kind)  # first: building an env may seed torch
        env = build(kind)
        env.set_seed(SEED)
        _REFERENCES[key] = hand_rollout(env, kind.steps, Replay(actions), break_when_any_done)
        env.close()
    return _REFERENCES[key]


def single_actions(kind: Kind) -> TensorDictBase:
    """The replayed actions of ``kind``'s single env, ``[T, ...]`` (cached: do not modify)."""
    key = f"{kind.name}-single"
    if key not in _ACTIONS:
        env = build(kind)
        _ACTIONS[key] = replay_actions(env, kind.steps)
        env.close()
    return _ACTIONS[key]


def single_rollout(env: EnvBase, kind: Kind, break_when_any_done: bool) -> TensorDictBase:
    """``env.rollout`` of a single env of ``kind``, seeded, replaying ``single_actions``."""
    policy = Replay(single_actions(kind))  # first: building an env may seed torch
    env.set_seed(SEED)
    return env.rollout(kind.steps, policy, break_when_any_done=break_when_any_done)


def batched_rollout(env: EnvBase, kind: Kind, break_when_any_done: bool) -> TensorDictBase:
    """``env.rollout`` of a batched env of ``kind``, seeded and replaying ``batched_actions``."""
    policy = Replay(batched_actions(kind))  # first: building an env may seed torch
    env.set_seed(SEED)
    return env.rollout(kind.steps, policy, break_when_any_done=break_when_any_done)


# ---------------------------------------------------------------------- batched envs
def serial_env(kind: Kind, stepper: bool = True) -> SerialEnv:
    """A ``SerialEnv`` of ``kind``'s sub-envs (its stepper path allowed, or not)."""
    env = SerialEnv(NUM_ENVS, factories(kind))
    env._steppers_allowed = stepper  # SerialEnv's switch between its two paths
    return env


_KEPT: dict[tuple, EnvBase] = {}


def kept(config: Any, key: tuple, make: Callable[[], EnvBase]) -> EnvBase:
    """The env ``make()`` built for ``key`` once per session (pytest's ``config`` closes every
    kept env when it ends), seeded: started ``ParallelEnv``s and slow-to-build envs are shared
    by the tests that ask for the same one. A test comparing values seeds it again; the input
    checks are refused before anything runs."""
    env = _KEPT.get(key)
    if env is None or getattr(env, "is_closed", False):
        if not _KEPT:
            config.add_cleanup(_close_kept)
        env = _KEPT[key] = make()
        env.set_seed(SEED)  # some envs must be seeded before they run (MockSerialEnv)
    return env


def parallel_env(config: Any, kind: Kind, method: str, stepper: bool = True) -> ParallelEnv:
    """A started ``ParallelEnv`` of ``kind``'s sub-envs in one worker process (kept: ``kept``).

    ``stepper=False``: its sub-envs offer no stepper (the workers' general path).
    """

    def make() -> ParallelEnv:
        env = ParallelEnv(
            NUM_ENVS, factories(kind, stepper), mp_start_method=method, num_processes=1
        )
        env.start()
        return env

    return kept(config, ("parallel", kind.name, method, stepper), make)


def _close_kept() -> None:
    while _KEPT:
        _, env = _KEPT.popitem()
        env.close()


# ---------------------------------------------------------------------- comparison
def assert_same_rollout(got: TensorDictBase, expected: TensorDictBase) -> None:
    """``got`` is ``expected``: type, batch size, names, keys in order (root and ``"next"``),
    and each leaf's dtype, shape and values (NaN where NaN)."""
    assert type(got) is type(expected), (type(got), type(expected))
    assert got.batch_size == expected.batch_size, (got.batch_size, expected.batch_size)
    assert got.names == expected.names, (got.names, expected.names)
    got_keys, expected_keys = list(got.keys(True, True)), list(expected.keys(True, True))
    assert got_keys == expected_keys, f"key order: {got_keys} != {expected_keys}"
    for key in expected_keys:
        a, b = got.get(key), expected.get(key)
        assert (a.dtype, a.shape) == (b.dtype, b.shape), (key, a.dtype, a.shape, b.dtype, b.shape)
        same = a == b
        if a.is_floating_point():
            same |= a.isnan() & b.isnan()
        assert bool(same.all()), f"values of {key!r} differ at {same.logical_not().nonzero()[:5]}"


def assert_same_layout(got: TensorDictBase, expected: TensorDictBase) -> None:
    """The keys in order, dtypes and shapes of ``got`` and ``expected`` (not their values)."""
    got_keys, expected_keys = list(got.keys(True, True)), list(expected.keys(True, True))
    assert got_keys == expected_keys, f"key order: {got_keys} != {expected_keys}"
    for key in expected_keys:
        a, b = got.get(key), expected.get(key)
        assert (a.dtype, a.shape) == (b.dtype, b.shape), (key, a.dtype, a.shape, b.dtype, b.shape)

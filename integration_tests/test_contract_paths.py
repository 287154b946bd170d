"""Every env path executes one step contract: rollouts compared exactly across paths.

Each env kind (``_contract_cases.KINDS``: gymnasium classic control, MuJoCo, Atari, DeepMind
Control, rlmocks envs, an auto-resetting env, a custom ``EnvBase``) is rolled out through every
path that applies to it, and each rollout is compared with a reference stepped by hand:

- a single env: ``env.rollout`` (the stepper path where the env offers one), ``env.rollout``
  with the stepper disabled (the general path) and a ``TransformedEnv`` around it, against the
  env stepped by hand (``step`` + ``step_mdp``, or ``step_and_maybe_reset``);
- a batched env: ``SerialEnv`` (its stepper path and its general path), ``ParallelEnv`` under
  ``fork`` (its workers' stepper rows and their general path) and ``spawn`` (the kinds of
  ``SPAWN_KINDS``: each spawned start imports torch afresh, seconds on this machine),
  ``GymEnv(name, num_envs=N)`` and ``MultiThreadedEnv`` (EnvPool), against the single sub-envs
  stepped by hand side by side;
- auto-reset: ``EnvType(..., auto_reset=True)`` alone, in ``SerialEnv``/``ParallelEnv``, and an
  ``AutoResetEnv`` around a batched env.

Compared: type, batch size, dim names, the keys in order (root and ``"next"``), each leaf's
dtype, shape and values, without early stop (episodes end, rows reset while others go on) and
with it (``break_when_any_done=True``). Paths that disagree fail: the comparison is never
weakened to let one through.
"""

from __future__ import annotations

import pytest
from _contract_cases import (
    HAS_ENVPOOL,
    KINDS,
    MODES,
    NUM_ENVS,
    SEED,
    SPAWN_KINDS,
    Kind,
    Replay,
    assert_same_layout,
    assert_same_rollout,
    batched_actions,
    batched_reference,
    batched_rollout,
    build,
    disable_stepper,
    hand_rollout,
    kept,
    kind_params,
    parallel_env,
    replay_actions,
    serial_env,
    single_reference,
    single_rollout,
)
from tensordict import TensorDict

from rlcore import stepper_of
from rlmocks import AutoResettingCountingEnv, CountingEnv
from rltransforms import AutoResetEnv, AutoResetTransform, TransformedEnv

METHODS = ["fork", "spawn"]


def _params(kinds: list, *extra: tuple) -> list:
    """``(kind, *extra)`` params for ``kinds``, each with every ``extra`` value."""
    out = []
    for param in kinds:
        (kind,) = param.values
        marks = list(param.marks)
        for values in extra or ((),):
            ids = "-".join([param.id, *map(str, values)])
            out.append(pytest.param(kind, *values, id=ids, marks=marks))
    return out


ALL = kind_params()
WITH_STEPPER = kind_params([name for name, kind in KINDS.items() if kind.stepper])
WITH_VECTOR = kind_params([name for name, kind in KINDS.items() if kind.vector is not None])
ENDING = kind_params([name for name, kind in KINDS.items() if kind.ends])


@pytest.fixture(params=list(MODES))
def mode(request) -> bool:
    """``break_when_any_done``: False (episodes end and reset), True (stop at the first)."""
    return MODES[request.param]


def _kept_single(config, kind: Kind, path: str):
    """Sub-env 0 of ``kind`` as ``path`` runs it (kept for the session: seeded at each use)."""
    prepare = {
        "rollout": lambda env: env,
        "general": disable_stepper,
        "transformed": TransformedEnv,
    }
    return kept(config, ("single", kind.name, path), lambda: prepare[path](build(kind)))


# ---------------------------------------------------------------------- single envs
@pytest.mark.parametrize("kind", ALL)
def test_rollout_equals_the_env_stepped_by_hand(request, kind, mode):
    env = _kept_single(request.config, kind, "rollout")
    if kind.stepper:  # the rollout takes the stepper path
        assert stepper_of(env) is not None
    assert_same_rollout(single_rollout(env, kind, mode), single_reference(kind, mode))


@pytest.mark.parametrize("kind", WITH_STEPPER)
def test_general_rollout_equals_the_env_stepped_by_hand(request, kind, mode):
    env = _kept_single(request.config, kind, "general")
    assert stepper_of(env) is None
    assert_same_rollout(single_rollout(env, kind, mode), single_reference(kind, mode))


@pytest.mark.parametrize("kind", ALL)
def test_transformed_env_rollout_equals_the_env_stepped_by_hand(request, kind, mode):
    env = _kept_single(request.config, kind, "transformed")
    assert_same_rollout(single_rollout(env, kind, mode), single_reference(kind, mode))


def test_auto_reset_rollout_is_the_plain_rollout_with_ended_observations_filled(mode):
    """``auto_reset=True``: the step that ends an episode shows -1 (int observations) in place
    of the new episode's first observation, which the next root holds; nothing else changes."""
    auto = AutoResettingCountingEnv(max_steps=2, auto_reset=True)
    plain = CountingEnv(max_steps=2)
    actions = replay_actions(plain, 12)
    expected = hand_rollout(plain, 12, Replay(actions), mode)
    ended = expected["next", "done"]
    assert bool(ended.any())
    expected["next", "observation"] = expected["next", "observation"].masked_fill(ended, -1)
    got = auto.rollout(12, Replay(actions), break_when_any_done=mode)
    assert_same_rollout(got, expected)


# ---------------------------------------------------------------------- the references
@pytest.mark.parametrize("kind", ENDING)
def test_references_end_episodes_and_reset_some_rows_only(kind):
    """The matrix exercises resets: episodes end, and some rows end while others go on."""
    reference = batched_reference(kind, False)
    done = reference.get(("next", *_done_path(kind)))
    done = done.reshape(NUM_ENVS, kind.steps, -1).any(-1)
    assert reference.shape == (NUM_ENVS, kind.steps)
    assert bool(done.any())
    assert bool((done.any(0) & ~done.all(0)).any()), done


def _done_path(kind: Kind) -> tuple:
    env = build(kind)
    key = env.done_keys[0]
    env.close()
    return (key,) if isinstance(key, str) else tuple(key)


# ---------------------------------------------------------------------- SerialEnv
def _serial_params() -> list:
    out = []
    for param in _params(ALL):
        kind = param.values[0]
        for path in ("stepper", "general") if kind.stepper else ("general",):
            out.append(pytest.param(kind, path, id=f"{param.id}-{path}", marks=param.marks))
    return out


@pytest.mark.parametrize(("kind", "path"), _serial_params())
def test_serial_env_equals_its_sub_envs_stepped_by_hand(request, kind, path, mode):
    env = kept(
        request.config, ("serial", kind.name, path), lambda: serial_env(kind, path == "stepper")
    )
    got = batched_rollout(env, kind, mode)
    assert (env._stepped is not None) is (path == "stepper")  # the path compared is taken
    assert_same_rollout(got, batched_reference(kind, mode))


# ---------------------------------------------------------------------- ParallelEnv
def _parallel_params() -> list:
    out = []
    for param in _params(ALL):
        kind = param.values[0]
        for method in METHODS if kind.name in SPAWN_KINDS else ["fork"]:
            workers = ("stepper", "general") if kind.stepper and method == "fork" else ("",)
            for path in workers:
                ids = "-".join(filter(None, (param.id, method, path)))
                out.append(pytest.param(kind, method, path or "stepper", id=ids, marks=param.marks))
    return out


@pytest.mark.parametrize(("kind", "method", "workers"), _parallel_params())
def test_parallel_env_equals_its_sub_envs_stepped_by_hand(request, kind, method, workers, mode):
    """Each sub-env draws from its own generators in its worker: the reference's sub-envs too."""
    env = parallel_env(request.config, kind, method, stepper=workers == "stepper")
    got = batched_rollout(env, kind, mode)
    assert_same_rollout(got, batched_reference(kind, mode, isolated=True))


# ---------------------------------------------------------------------- library-batched envs
@pytest.mark.parametrize(("kind", "path"), _params(WITH_VECTOR, ("stepper",), ("general",)))
def test_gym_vector_env_equals_its_sub_envs_stepped_by_hand(request, kind, path, mode):
    """``GymEnv(name, num_envs=N)``: one library call steps every row, the library resets the
    rows that ended (partial resets through its reset mask); sub-env i is seeded SEED + i."""

    def make():
        env = kind.make(num_envs=NUM_ENVS, **kind.vector)
        return env if path == "stepper" else disable_stepper(env)

    env = kept(request.config, ("vector", kind.name, path), make)
    assert (stepper_of(env) is not None) is (path == "stepper")
    got = batched_rollout(env, kind, mode)
    assert_same_rollout(got, batched_reference(kind, mode, vector=True))


def _envpool(path: str):
    from rllibs import MultiThreadedEnv

    env = MultiThreadedEnv(NUM_ENVS, "CartPole-v1")
    return env if path == "stepper" else disable_stepper(env)


@pytest.mark.skipif(not HAS_ENVPOOL, reason="envpool is not importable")
@pytest.mark.parametrize("path", ["stepper", "general"])
def test_envpool_rollout_equals_the_pool_stepped_by_hand(request, path, mode):
    """EnvPool's simulator is its own (its values are not gymnasium's): the reference is the
    pool stepped by hand, ``step_and_maybe_reset`` resetting the rows that ended."""
    kind = KINDS["cartpole"]
    env = kept(request.config, ("envpool", path), lambda: _envpool(path))
    assert (stepper_of(env) is not None) is (path == "stepper")
    by_hand = kept(request.config, ("envpool", "by-hand"), lambda: _envpool("general"))
    actions = _label_actions(kind)
    by_hand.set_seed(SEED)
    reference = hand_rollout(by_hand, kind.steps, Replay(actions), mode)
    env.set_seed(SEED)
    got = env.rollout(kind.steps, Replay(actions), break_when_any_done=mode)
    assert_same_rollout(got, reference)
    if not mode:
        done = reference["next", "done"].squeeze(-1)
        assert bool((done.any(0) & ~done.all(0)).any())  # some rows reset, others went on


def _label_actions(kind: Kind):
    """CartPole's actions as labels (EnvPool's encoding), ``[T, N]``."""
    one_hot = batched_actions(kind)["action"]
    return TensorDict({"action": one_hot.argmax(-1)}, one_hot.shape[:2])


@pytest.mark.skipif(not HAS_ENVPOOL, reason="envpool is not importable")
def test_envpool_rollout_has_the_layout_of_the_gym_vector_env(request):
    """Keys in order, dtypes and shapes of EnvPool's CartPole are gymnasium's (labels)."""
    kind = KINDS["cartpole"]
    pool = kept(request.config, ("envpool", "stepper"), lambda: _envpool("stepper"))
    vector = kind.make(num_envs=NUM_ENVS, categorical_action_encoding=True)
    actions = _label_actions(kind)
    rollouts = []
    for env in (pool, vector):
        env.set_seed(SEED)
        rollouts.append(env.rollout(kind.steps, Replay(actions), break_when_any_done=False))
    vector.close()
    assert_same_layout(*rollouts)


# ---------------------------------------------------------------------- auto-reset, batched
AUTO_RESETTING = Kind(
    "auto-resetting-base",
    AutoResettingCountingEnv,
    KINDS["auto-reset"].rows,
    KINDS["auto-reset"].steps,
)


@pytest.mark.parametrize("base", ["serial", "fork"])
def test_auto_reset_env_around_a_batched_env_equals_auto_reset_sub_envs(request, base, mode):
    """``AutoResetEnv(SerialEnv/ParallelEnv of self-resetting envs)`` gives what the batched
    env of ``auto_reset=True`` sub-envs gives: the sub-envs stepped by hand."""
    kind = KINDS["auto-reset"]
    if base == "serial":
        batched = serial_env(AUTO_RESETTING)
    else:
        batched = parallel_env(request.config, AUTO_RESETTING, base)
    env = AutoResetEnv(batched, AutoResetTransform())
    got = batched_rollout(env, kind, mode)
    assert_same_rollout(got, batched_reference(kind, mode))
    assert bool((got["next", "observation"] == -1).any())  # ended episodes were filled

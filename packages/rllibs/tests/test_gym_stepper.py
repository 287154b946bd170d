"""A SerialEnv of GymEnvs steps them through their steppers, with the general path's results.

Every case builds the same seeded ``SerialEnv`` twice, one on the fast path (each GymEnv's
``rllibs._gym_stepper.GymStepper`` writing into the batched buffers) and one forced onto the
general path (``_steppers_allowed = False``: one tensordict per sub-env, stacked), runs both alike
and compares type, batch size, names, keys in order, and each leaf's dtype, shape, strides,
device and values. Sub-envs that do not qualify fall back to the general path.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from tensordict import TensorDictBase

from rlbatched import SerialEnv
from rlcore import stepper_of
from rltransforms import Compose, DoubleToFloat, RewardSum, StepCounter, TransformedEnv

gym = pytest.importorskip("gymnasium")

from rllibs import GymEnv, GymLikeEnv, GymWrapper, default_info_dict_reader  # noqa: E402
from rllibs._gym_rows import BAD_OBSERVATION  # noqa: E402
from rllibs._gym_stepper import GymStepper  # noqa: E402

HAS_MUJOCO = importlib.util.find_spec("mujoco") is not None
NUM = 3


def _dict_space():
    return gym.spaces.Dict(
        position=gym.spaces.Box(-1, 1, (2,), np.float32),
        mode=gym.spaces.Discrete(3),
        flags=gym.spaces.MultiBinary(4),
        cells=gym.spaces.MultiDiscrete([3, 3]),
    )


# sub-env i of each case (episodes of different lengths where the env allows it)
CASES = {
    "pendulum": lambda c, i: GymEnv("Pendulum-v1", max_episode_steps=5 + 3 * i),
    "cartpole": lambda c, i: GymEnv("CartPole-v1"),
    "cartpole-labels": lambda c, i: GymEnv("CartPole-v1", categorical_action_encoding=True),
    "pendulum-frame-skip": lambda c, i: GymEnv("Pendulum-v1", frame_skip=3),
    "frozenlake-discrete-obs": lambda c, i: GymEnv("FrozenLake-v1"),
    "frozenlake-labels": lambda c, i: GymEnv("FrozenLake-v1", categorical_action_encoding=True),
    "counting": lambda c, i: GymWrapper(c["counting"](max_steps=2 + i)),
    "dict-observations": lambda c, i: GymWrapper(
        c["space"](_dict_space(), gym.spaces.Box(-1, 1, (1,), np.float32))
    ),
    "pixels-and-state": lambda c, i: GymWrapper(
        c["counting"](max_steps=3 + i, render_mode="rgb_array"),
        from_pixels=True,
        pixels_only=False,
    ),
}
if HAS_MUJOCO:
    CASES["halfcheetah"] = lambda c, i: GymEnv("HalfCheetah-v4", max_episode_steps=6 + i)


@pytest.fixture
def classes(counting_env_cls, space_env_cls):
    return {"counting": counting_env_cls, "space": space_env_cls}


def _pair(make_sub, **kwargs) -> tuple[SerialEnv, SerialEnv]:
    fns = [lambda i=i: make_sub(i) for i in range(NUM)]
    fast, general = SerialEnv(NUM, fns, **kwargs), SerialEnv(NUM, fns, **kwargs)
    general._steppers_allowed = False
    for env in (fast, general):
        env.set_seed(0)
    return fast, general


def _both(envs, call) -> list:
    out = []
    for env in envs:
        torch.manual_seed(0)
        out.append(call(env))
    return out


def _assert_same(a: TensorDictBase, b: TensorDictBase) -> None:
    assert type(a) is type(b)
    assert a.batch_size == b.batch_size and a.device == b.device and a.names == b.names
    keys = list(a.keys(True, True))
    assert keys == list(b.keys(True, True))
    for key in keys:
        x, y = a.get(key), b.get(key)
        assert (x.dtype, x.shape, x.stride(), x.device) == (y.dtype, y.shape, y.stride(), y.device)
        assert torch.equal(x, y), key


@pytest.mark.parametrize("case", sorted(CASES))
def test_rollouts_identical(case, classes):
    """Auto-resetting rollouts, then rollouts that stop at the first done, are identical."""
    fast, general = _pair(lambda i: CASES[case](classes, i))
    one, two = _both((fast, general), lambda env: env.rollout(25, break_when_any_done=False))
    assert isinstance(fast._stepped.steppers[0], GymStepper) and general._stepped is None
    _assert_same(one, two)
    one, two = _both((fast, general), lambda env: env.rollout(25))
    _assert_same(one, two)


@pytest.mark.parametrize("case", ["cartpole", "counting", "dict-observations"])
def test_hand_loops_identical(case, classes):
    """``step_and_maybe_reset`` and ``step`` loops give the same data at every step."""
    fast, general = _pair(lambda i: CASES[case](classes, i))
    roots = [env.reset() for env in (fast, general)]
    for step in range(20):
        torch.manual_seed(step)
        action = fast.rand_action(roots[0].clone())["action"]
        pairs = [
            env.step_and_maybe_reset(root.set("action", action.clone()))
            for env, root in zip((fast, general), roots)
        ]
        _assert_same(pairs[0][0], pairs[1][0])
        roots = [root for _, root in pairs]
        _assert_same(*roots)


def test_seeds_reach_the_sub_envs_alike():
    """``set_seed`` seeds the next reset of each sub-env on both paths, once."""
    fast, general = _pair(lambda i: GymEnv("CartPole-v1"))
    first = [env.reset() for env in (fast, general)]
    _assert_same(*first)
    again = [env.reset() for env in (fast, general)]
    _assert_same(*again)
    assert not torch.equal(first[0]["observation"], again[0]["observation"])
    assert fast._stepped is not None


@pytest.mark.parametrize(
    "transform",
    [lambda: Compose(StepCounter(max_steps=7), RewardSum()), lambda: StepCounter(max_steps=4)],
)
def test_transforms_around_the_serial_env(transform):
    """Transforms over a SerialEnv of GymEnvs give identical rollouts on both paths."""
    fast, general = _pair(lambda i: GymEnv("CartPole-v1"))
    envs = [TransformedEnv(env, transform()) for env in (fast, general)]
    one, two = _both(envs, lambda env: env.rollout(30, break_when_any_done=False))
    _assert_same(one, two)
    assert fast._stepped is not None


@pytest.mark.skipif(not HAS_MUJOCO, reason="mujoco is not installed")
def test_mujoco_under_a_cast():
    """HalfCheetah (float64 observations) under DoubleToFloat: identical, through steppers."""
    fast, general = _pair(lambda i: GymEnv("HalfCheetah-v4"))
    envs = [TransformedEnv(env, DoubleToFloat()) for env in (fast, general)]
    one, two = _both(envs, lambda env: env.rollout(12, break_when_any_done=False))
    _assert_same(one, two)
    assert one["next", "observation"].dtype == torch.float32 and fast._stepped is not None


def test_the_fast_path_does_not_call_step(monkeypatch):
    """On the fast path no GymLikeEnv._step runs (so no tensordict per sub-env is built)."""

    def refuse(self, tensordict):
        raise AssertionError("GymLikeEnv._step ran")

    monkeypatch.setattr(GymLikeEnv, "_step", refuse)
    fast, general = _pair(lambda i: GymEnv("Pendulum-v1"))
    fast.rollout(10, break_when_any_done=False)
    with pytest.raises(AssertionError, match="_step ran"):
        general.rollout(3)


class StepCountingWrapper(GymWrapper):
    """Overrides ``_step``: its output is no longer fixed in advance."""

    def _step(self, tensordict):
        return super()._step(tensordict)


FALLBACKS = {
    "info-reader": lambda c: GymWrapper(c["counting"]()).auto_register_info_dict(),
    "vector-sub-envs": lambda c: GymEnv("CartPole-v1", num_envs=2),
    "subclass-step": lambda c: StepCountingWrapper(c["counting"]()),
    "run-type-checks": lambda c: _with_type_checks(GymEnv("Pendulum-v1")),
}


def _with_type_checks(env):
    env.run_type_checks = True
    return env


# sub-envs with a stepper that SerialEnv's stepper path does not take (batched sub-envs)
OFFERING = {"vector-sub-envs"}


@pytest.mark.parametrize("case", sorted(FALLBACKS))
def test_sub_envs_that_do_not_qualify_take_the_general_path(case, classes):
    """No stepper (or one the batch cannot use): the general path, with the same results."""
    assert (stepper_of(FALLBACKS[case](classes)) is None) is (case not in OFFERING)
    fast, general = _pair(lambda i: FALLBACKS[case](classes))
    one, two = _both((fast, general), lambda env: env.rollout(8, break_when_any_done=False))
    _assert_same(one, two)
    assert fast._stepped is None


def test_tuple_observations_go_through_the_reader(classes):
    """A Tuple space (stacked observations) has no row writer: the env's reader fills the rows."""

    def make(i):
        space = gym.spaces.Tuple([gym.spaces.Box(-1, 1, (2,))] * 2)
        return GymWrapper(classes["space"](space, gym.spaces.Discrete(2)))

    fast, general = _pair(make)
    one, two = _both((fast, general), lambda env: env.rollout(8, break_when_any_done=False))
    _assert_same(one, two)
    assert fast._stepped is not None and one["next", "observation"].shape == (3, 8, 2, 2)


def test_an_info_reader_added_after_start_is_read(classes):
    """A reader added through the SerialEnv (forwarded) ends the fast path at the next step."""
    fast, general = _pair(lambda i: GymWrapper(classes["counting"]()))
    for env in (fast, general):
        env.rollout(2)
        env.set_info_dict_reader(default_info_dict_reader(["count"]))
    one, two = _both((fast, general), lambda env: env.rollout(6, break_when_any_done=False))
    _assert_same(one, two)
    assert fast._stepped is None and ("next", "count") in one.keys(True)


class BadShapeEnv(gym.Env):
    """Declares (2,) observations and returns (3,) ones from step."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(3, np.float32), 0.0, False, False, {}


def test_observations_of_another_shape_raise():
    """The buffers never broadcast: a mis-shaped observation raises, naming key and shapes."""
    env = SerialEnv(2, lambda: GymWrapper(BadShapeEnv()))
    expected = BAD_OBSERVATION.format(
        where="GymLikeEnv stepper", key="observation", got=(3,), expected=(2,)
    )
    with pytest.raises(ValueError, match=expected.replace("(", r"\(").replace(")", r"\)")) as info:
        env.rollout(2)
    assert info.value.__notes__ == ["raised by sub-env 0 of SerialEnv during step"]

"""The vector/image mocks: seeding of the counter, reset values, step arithmetic, conversions."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlcore import check_env_specs
from rlmocks import (
    ContinuousActionConvMockEnv,
    ContinuousActionConvMockEnvNumpy,
    ContinuousActionVecMockEnv,
    DiscreteActionConvMockEnv,
    DiscreteActionConvMockEnvNumpy,
    DiscreteActionVecMockEnv,
)
from rlmocks._vec_conv import ONE_HOT_SUM_ERROR

ALL = [
    ContinuousActionConvMockEnv,
    ContinuousActionConvMockEnvNumpy,
    ContinuousActionVecMockEnv,
    DiscreteActionConvMockEnv,
    DiscreteActionConvMockEnvNumpy,
    DiscreteActionVecMockEnv,
]
DISCRETE = [DiscreteActionVecMockEnv, DiscreteActionConvMockEnv, DiscreteActionConvMockEnvNumpy]


@pytest.mark.parametrize("cls", ALL)
def test_construction_seeds_the_counter_and_the_global_rng(cls):
    torch.manual_seed(0)
    env = cls()
    after_build = torch.rand(1)
    torch.manual_seed(100)
    assert torch.rand(1) == after_build
    assert env.seed == 100 and env.counter == 15
    env.set_seed(101)
    assert env.counter == 16


@pytest.mark.parametrize("cls", ALL)
def test_custom_members(cls):
    env = cls()
    assert env.custom_fun() == 0
    assert env.custom_attr == 1
    assert env.custom_prop == 2
    assert env.maxstep == 100
    assert (env.custom_td["a"] == 0).all() and env.custom_td.batch_size == ()
    assert env.is_closed is False
    assert env.batch_locked


@pytest.mark.parametrize("cls", ALL)
def test_counter_seed_from_kwarg(cls):
    assert cls(seed=20).counter == 3


@pytest.mark.parametrize(
    "cls,shape",
    [
        (DiscreteActionVecMockEnv, (7,)),
        (DiscreteActionConvMockEnv, (1, 7, 7)),
        (DiscreteActionConvMockEnvNumpy, (7, 7, 3)),
    ],
)
def test_discrete_reset_writes_the_counter_on_the_state(cls, shape):
    env = cls()
    td = env.reset()
    key = env.out_key
    assert td[key].shape == shape
    vector = env._obs_in(td[key])
    assert (vector == 16).all()
    assert (td[env._out_key] == td[key]).all()
    assert env.reset()[key].max() == 17  # each reset bumps the counter


@pytest.mark.parametrize("cls", DISCRETE)
def test_discrete_step_adds_a_hundredth_of_the_action(cls):
    env = cls()
    td = env.reset()
    action = torch.zeros(7, dtype=torch.bool)
    action[2] = True
    td = env.step(td.set("action", action))
    vector = env._obs_in(td["next", env.out_key])
    expected = torch.full((7,), 16.0)
    expected[2] += 0.01
    torch.testing.assert_close(vector, expected)
    assert td["next", "reward"].tolist() == [0.0]
    assert not td["next", "done"].any()


def test_discrete_reward_when_the_state_reaches_counter_plus_one():
    env = DiscreteActionVecMockEnv()
    td = env.reset()
    action = torch.zeros(7, dtype=torch.bool)
    action[0] = True
    for _ in range(100):
        td = env.step(td.set("action", action))["next"]
    assert td["reward"].tolist() == [1.0]


def test_discrete_categorical_action_encoding():
    env = DiscreteActionVecMockEnv(categorical_action_encoding=True)
    assert env.action_spec.dtype == torch.int64 and env.action_spec.shape == ()
    td = env.reset()
    td = env.step(td.set("action", torch.tensor(3)))
    torch.testing.assert_close(td["next", "observation"], torch.full((7,), 16.03))


def test_discrete_numpy_categorical_action_has_seven_entries():
    env = DiscreteActionConvMockEnvNumpy(categorical_action_encoding=True)
    assert env.action_spec.shape == (7,)


def test_discrete_step_rejects_an_invalid_one_hot():
    env = DiscreteActionVecMockEnv()
    td = env.reset().set("action", torch.zeros(7, dtype=torch.bool))
    message = ONE_HOT_SUM_ERROR.format(cls="DiscreteActionVecMockEnv", sums=0)
    with pytest.raises(ValueError, match=re.escape(message)):
        env._step(td)


@pytest.mark.parametrize(
    "cls,shape,action",
    [
        (ContinuousActionVecMockEnv, (7,), 7),
        (ContinuousActionConvMockEnv, (1, 7, 7), 7),
        (ContinuousActionConvMockEnvNumpy, (7, 7, 3), 7),
    ],
)
def test_continuous_specs_and_random_reset(cls, shape, action):
    env = cls()
    assert env.observation_spec[env.out_key].shape == shape
    assert env.action_spec.shape == (action,)
    assert env.action_spec.dtype == torch.float32
    assert set(env.done_keys) == {"done", "terminated"}
    td = env.reset()
    assert env.step_count == 0
    assert not (td[env.out_key] == td[env._out_key]).all()


@pytest.mark.parametrize(
    "cls",
    [ContinuousActionVecMockEnv, ContinuousActionConvMockEnv, ContinuousActionConvMockEnvNumpy],
)
def test_continuous_step_adds_a_hundredth_of_the_action(cls):
    env = cls()
    td = env.reset()
    before = env._obs_in(td[env._out_key])
    td = env.step(td.set("action", torch.ones(7)))
    after = env._obs_in(td["next", env.out_key])
    torch.testing.assert_close(after, before + 0.01)
    assert env.step_count == 1
    assert td["next", "reward"].shape == (1,)
    assert td["next", "reward"].dtype == torch.get_default_dtype()
    assert td["next", "done"].shape == (1,)


def test_continuous_step_is_done_when_the_state_hits_counter_plus_one():
    env = ContinuousActionVecMockEnv()
    td = env.reset()
    td["observation_orig"] = torch.full((7,), float(env.counter + 1))
    td = env.step(td.set("action", torch.zeros(7)))
    assert td["next", "done"].tolist() == [True]
    assert td["next", "reward"].tolist() == [1.0]


def test_conv_pixel_shape_sets_the_image_and_action_shapes():
    env = ContinuousActionConvMockEnv(pixel_shape=[1, 5, 5])
    assert env.observation_spec["pixels"].shape == (1, 5, 5)
    assert env.action_spec.shape == (5,)


def test_conv_state_lives_on_the_diagonal():
    env = DiscreteActionConvMockEnv()
    pixels = env.reset()["pixels"]
    assert (pixels[0].diagonal() == 16).all()
    assert pixels[0].sum() == 16 * 7
    numpy_pixels = DiscreteActionConvMockEnvNumpy().reset()["pixels"]
    assert (numpy_pixels[..., 0] == numpy_pixels[..., 2]).all()


def test_spec_overrides_are_used():
    from rlspecs import Unbounded

    env = ContinuousActionVecMockEnv(action_spec=Unbounded(shape=(7,)))
    assert isinstance(env.action_spec, Unbounded)


def test_dtype_casts_the_float_specs():
    env = ContinuousActionVecMockEnv(dtype=torch.float64)
    assert env.observation_spec["observation"].dtype == torch.float64
    assert env.action_spec.dtype == torch.float64
    assert env.full_done_spec["done"].dtype == torch.bool


@pytest.mark.parametrize("cls", ALL)
def test_batch_size_shapes_specs_and_outputs(cls):
    env = cls(batch_size=(2, 3))
    assert env.batch_size == (2, 3)
    check_env_specs(env, return_contiguous=False)
    td = env.reset()
    before = env._obs_in(td[env._out_key])
    td = env.rand_step(td)
    after = env._obs_in(td["next", env.out_key])
    action = td["action"].to(after.dtype).reshape(after.shape)
    torch.testing.assert_close(after, before + action / 100)
    assert td["next", "reward"].shape == (2, 3, 1)
    assert td["next", "done"].shape == (2, 3, 1)


def test_step_rejects_a_tensordict_of_the_wrong_batch():
    env = ContinuousActionVecMockEnv()
    td = TensorDict({"action": torch.zeros(2, 7), "observation_orig": torch.zeros(2, 7)}, [2])
    with pytest.raises(
        RuntimeError, match=re.escape("Expected a tensordict with shape==env.batch_size")
    ):
        env.step(td)


def test_type_checks_catch_outputs_that_leave_the_spec():
    env = ContinuousActionVecMockEnv()
    env._run_type_checks = True
    check_env_specs(env)
    env.output_spec.unlock_()
    env.output_spec["full_reward_spec", "reward"].dtype = torch.int
    with pytest.raises(TypeError, match="expected"):
        check_env_specs(env)


CONTINUOUS = [ContinuousActionVecMockEnv, ContinuousActionConvMockEnv]


@pytest.mark.parametrize("cls", CONTINUOUS)
@pytest.mark.parametrize("batch_size", [(), (2,)])
def test_reassigned_observation_spec_still_passes_check_env_specs(cls, batch_size):
    # the state (`_out_key`) is no longer an observation: reset draws it from the state spec
    from rlspecs import Composite

    env = cls(batch_size=batch_size)
    env.observation_spec = Composite(
        {env.out_key: env.observation_spec[env.out_key].clone()}, shape=batch_size
    )
    assert env.state_keys == [env._out_key] and env.observation_keys == [env.out_key]
    td = env.reset()
    assert td[env._out_key].shape == env.state_spec[env._out_key].shape
    check_env_specs(env)


@pytest.mark.parametrize("cls", CONTINUOUS)
def test_reassigned_observation_spec_keeps_the_default_draws(cls):
    # observation and state both still observations: reset draws exactly as before
    expected = cls().reset()  # construction seeds the global RNG with 100
    env = cls()
    env.observation_spec = env.observation_spec.clone()
    env.set_seed(100)
    assert (env.reset() == expected).all()


@pytest.mark.parametrize("cls", ALL)
def test_a_step_without_its_state_names_the_missing_key(cls):
    env = cls()
    td = env.rand_action(env.reset()).exclude(env._out_key)
    with pytest.raises(KeyError, match=re.escape(repr(env._out_key))):
        env.step(td)


@pytest.mark.parametrize(
    "cls",
    [ContinuousActionVecMockEnv, ContinuousActionConvMockEnv, ContinuousActionConvMockEnvNumpy],
)
def test_continuous_reward_keeps_the_default_float_dtype_by_default(cls):
    env = cls(dtype=torch.float64)
    assert env.reward_spec.dtype == torch.float64
    assert env.rand_step(env.reset())["next", "reward"].dtype == torch.get_default_dtype()


@pytest.mark.parametrize(
    "cls",
    [ContinuousActionVecMockEnv, ContinuousActionConvMockEnv, ContinuousActionConvMockEnvNumpy],
)
def test_continuous_reward_adapts_to_the_reward_spec_with_adapt_dtype(cls):
    env = cls(dtype=torch.float64, adapt_dtype=True)
    assert env.rand_step(env.reset())["next", "reward"].dtype == torch.float64
    check_env_specs(env, seed=0)


def test_adapt_dtype_class_attribute_selects_current_torchrl_reward():
    class Adapting(ContinuousActionVecMockEnv):
        adapt_dtype = True

    env = Adapting(dtype=torch.float64)
    assert env.rand_step(env.reset())["next", "reward"].dtype == torch.float64

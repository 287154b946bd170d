"""Info dict readers: default_info_dict_reader, set_info_dict_reader, auto_register_info_dict."""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pytest
import torch
from tensordict import TensorDict, assert_allclose_td

from rlcore import check_env_specs
from rlspecs import Composite, Unbounded

gym = pytest.importorskip("gymnasium")

from rllibs import GymWrapper, default_info_dict_reader  # noqa: E402
from rllibs._info_reader import INFO_SHAPE, SPEC_COUNT, SPEC_TYPE  # noqa: E402

needs_mujoco = pytest.mark.skipif(
    importlib.util.find_spec("mujoco") is None, reason="mujoco not installed"
)


# ---------------------------------------------------------------------- the reader alone
def test_reader_casts_to_spec_dtype_and_fills_missing_keys_with_zeros():
    reader = default_info_dict_reader(["x"])
    td = reader({"x": 1.5}, TensorDict({}, []))
    assert td["x"].dtype == torch.float32 and td["x"].item() == 1.5
    assert reader({}, TensorDict({}, []))["x"].item() == 0.0


@pytest.mark.parametrize(
    "spec",
    [
        {"x": Unbounded(10)},
        Composite(x=Unbounded(10), shape=[]),
        [Unbounded(10)],
    ],
    ids=["dict", "composite", "list"],
)
def test_reader_shapes_values_like_the_given_spec(spec):
    reader = default_info_dict_reader(["x"], spec=spec)
    assert reader.info_spec["x"].shape == torch.Size([10])
    td = reader({"x": 2.0}, TensorDict({}, []))
    assert td["x"].shape == torch.Size([10])
    assert reader.info_spec["x"].is_in(td["x"])


def test_reader_keeps_batch_dims_first():
    reader = default_info_dict_reader(["x"], spec={"x": Unbounded(2)})
    td = reader({"x": torch.arange(6.0).reshape(3, 2)}, TensorDict({}, [3]))
    assert td["x"].shape == torch.Size([3, 2])


def test_reader_without_keys_reads_every_numeric_public_key():
    reader = default_info_dict_reader()
    assert reader.info_spec is None
    td = reader({"x": 1.0, "_x": True, "name": "a"}, TensorDict({}, []))
    assert set(td.keys()) == {"x"}


def test_infer_spec_fixes_keys_and_dtypes():
    reader = default_info_dict_reader()
    spec = reader.infer_spec({"x": np.float64(1.0), "flag": True, "_mask": True, "label": "a"})
    assert set(spec.keys()) == {"x", "flag"}
    assert spec["x"].dtype == torch.float64
    assert spec["flag"].dtype == torch.bool


def test_list_spec_of_wrong_length_is_refused():
    with pytest.raises(
        ValueError, match=re.escape(SPEC_COUNT.format(n_specs=2, n_keys=1, keys=["x"]))
    ):
        default_info_dict_reader(["x"], spec=[Unbounded(1), Unbounded(1)])


def test_spec_of_unknown_type_is_refused():
    with pytest.raises(TypeError, match=re.escape(SPEC_TYPE.format(type="int"))):
        default_info_dict_reader(["x"], spec=3)


def test_value_not_fitting_the_spec_is_refused():
    reader = default_info_dict_reader(["x"], spec={"x": Unbounded(3)})
    with pytest.raises(
        ValueError, match=re.escape(INFO_SHAPE.format(key="x", got=(2,), expected=(3,)))
    ):
        reader({"x": [1.0, 2.0]}, TensorDict({}, []))


# ---------------------------------------------------------------------- in an env
def test_set_info_dict_reader_registers_specs_and_reads_steps(counting_env_cls):
    env = GymWrapper(counting_env_cls())
    env.set_info_dict_reader(default_info_dict_reader(["count"], spec={"count": Unbounded(())}))
    assert isinstance(env.observation_spec["count"], Unbounded)
    td = env.rand_step(env.reset())
    assert td["count"].item() == 0
    assert td["next", "count"].item() == 1
    check_env_specs(env)


def test_reader_of_all_keys_leaves_specs_unmatched(counting_env_cls):
    env = GymWrapper(counting_env_cls())
    env.set_info_dict_reader()
    with pytest.raises(AssertionError, match="The keys of the specs and data do not match"):
        check_env_specs(env)


def test_auto_register_discovers_and_declares_info_keys(counting_env_cls):
    env = GymWrapper(counting_env_cls()).auto_register_info_dict()
    assert env.observation_spec["count"].dtype == torch.int64
    check_env_specs(env)


@needs_mujoco
def test_halfcheetah_x_position_reader():
    env = GymWrapper(gym.make("HalfCheetah-v4"))
    env.set_info_dict_reader(default_info_dict_reader(["x_position"]))
    assert isinstance(env.observation_spec["x_position"], Unbounded)
    td = env.rand_step(env.reset())
    assert env.observation_spec["x_position"].is_in(td["next", "x_position"])


@needs_mujoco
def test_halfcheetah_auto_register_passes_checks_and_runs_in_parallel():
    env = GymWrapper(gym.make("HalfCheetah-v4")).auto_register_info_dict()
    assert {"x_position", "x_velocity", "reward_run", "reward_ctrl"} <= set(
        env.observation_spec.keys()
    )
    check_env_specs(env)
    rlbatched = pytest.importorskip("rlbatched")

    def make():
        return GymWrapper(gym.make("HalfCheetah-v4")).auto_register_info_dict()

    serial, parallel = rlbatched.SerialEnv(2, make), rlbatched.ParallelEnv(2, make)
    try:
        rollouts = []
        for batched in (serial, parallel):
            batched.set_seed(0)
            torch.manual_seed(0)
            rollouts.append(batched.rollout(5))
        assert_allclose_td(*rollouts)
    finally:
        serial.close()
        parallel.close()


def test_auto_register_leaves_the_global_rng_alone(counting_env_cls):
    torch.manual_seed(0)
    expected = torch.rand(3)
    torch.manual_seed(0)
    GymWrapper(counting_env_cls()).auto_register_info_dict()
    torch.testing.assert_close(torch.rand(3), expected)


def test_vector_env_info_is_read_per_env(counting_env_cls):
    vec = gym.vector.SyncVectorEnv([counting_env_cls, counting_env_cls])
    env = GymWrapper(vec).auto_register_info_dict()
    assert env.observation_spec["count"].shape == torch.Size([2])
    check_env_specs(env)

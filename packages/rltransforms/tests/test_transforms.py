"""Each transform: specs agree with data (check_env_specs), reset/step/rollout behaviour, errors."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv, DoubleEnv, NestedDoneEnv, PixelEnv
from tensordict import TensorDict

from rlcore import check_env_specs
from rlspecs import Bounded, Unbounded
from rltransforms import (
    CatTensors,
    Compose,
    DoubleToFloat,
    ExcludeTransform,
    InitTracker,
    ObservationNorm,
    RenameTransform,
    RewardClipping,
    RewardSum,
    SelectTransform,
    StepCounter,
    ToTensorImage,
    TransformedEnv,
)
from rltransforms._counters import MAX_STEPS_ERROR, NO_STEP_COUNT_ERROR
from rltransforms._normalization import NORM_UNINITIALIZED_ERROR
from rltransforms._observation import CAT_MISSING_SPEC_ERROR
from rltransforms._reward import KEY_COUNT_ERROR

pytestmark = pytest.mark.filterwarnings("error")


def _make(name):
    """One env per transform, for the shared check_env_specs test."""
    return {
        "StepCounter": lambda: TransformedEnv(CountEnv((2,)), StepCounter(3)),
        "StepCounter-done": lambda: TransformedEnv(
            CountEnv(), StepCounter(3, truncated_key="done")
        ),
        "InitTracker": lambda: TransformedEnv(CountEnv((2,)), InitTracker()),
        "RewardSum": lambda: TransformedEnv(CountEnv((2,)), RewardSum()),
        "CatTensors": lambda: TransformedEnv(DoubleEnv(), CatTensors(["obs_a", "obs_b"], "obs")),
        "DoubleToFloat": lambda: TransformedEnv(DoubleEnv((2,)), DoubleToFloat()),
        "ObservationNorm": lambda: TransformedEnv(
            DoubleEnv(), ObservationNorm(0.5, 2.0, in_keys=["obs_a", "obs_b"])
        ),
        "RewardClipping": lambda: TransformedEnv(PixelEnv(), RewardClipping(0, 0.1)),
        "ToTensorImage": lambda: TransformedEnv(PixelEnv(), ToTensorImage(in_keys=["pixels"])),
        "RenameTransform": lambda: TransformedEnv(
            CountEnv(), RenameTransform(["observation"], ["obs"], ["action"], ["act"])
        ),
        "ExcludeTransform": lambda: TransformedEnv(DoubleEnv(), ExcludeTransform("obs_b")),
        "SelectTransform": lambda: TransformedEnv(DoubleEnv(), SelectTransform("obs_a")),
        "Compose": lambda: TransformedEnv(
            DoubleEnv(),
            Compose(
                CatTensors(["obs_a", "obs_b"], "obs_cat", del_keys=False),
                CatTensors(["obs_a", "obs_b"], "observation"),
                DoubleToFloat(in_keys=["obs_cat", "observation"], in_keys_inv=["action"]),
                StepCounter(4),
                RewardSum(),
                InitTracker(),
            ),
        ),
    }[name]()


@pytest.mark.parametrize(
    "name",
    [
        "StepCounter",
        "StepCounter-done",
        "InitTracker",
        "RewardSum",
        "CatTensors",
        "DoubleToFloat",
        "ObservationNorm",
        "RewardClipping",
        "ToTensorImage",
        "RenameTransform",
        "ExcludeTransform",
        "SelectTransform",
        "Compose",
    ],
)
def test_transform_specs_agree_with_data(name):
    env = _make(name)
    check_env_specs(env)
    rollout = env.rollout(6, break_when_any_done=False)
    assert rollout.shape[-1] == 6
    assert env.observation_spec.is_in(rollout[..., -1]["next"].select(*env.observation_keys))


# ---------------------------------------------------------------- StepCounter
def test_step_counter_counts_and_truncates():
    env = TransformedEnv(CountEnv(), StepCounter(max_steps=3))
    rollout = env.rollout(10)
    assert rollout.shape == (3,)
    assert rollout["step_count"].squeeze(-1).tolist() == [0, 1, 2]
    assert rollout["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3]
    assert rollout["next", "truncated"].squeeze(-1).tolist() == [False, False, True]
    assert rollout["next", "done"].squeeze(-1).tolist() == [False, False, True]
    assert rollout["next", "terminated"].squeeze(-1).tolist() == [False, False, False]


@pytest.mark.parametrize("truncated_key", ["truncated", "done"])
def test_step_counter_keeps_going_with_auto_reset(truncated_key):
    env = TransformedEnv(CountEnv(), StepCounter(4, truncated_key=truncated_key))
    rollout = env.rollout(10, break_when_any_done=False)
    assert rollout["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3, 4, 1, 2, 3, 4, 1, 2]
    assert rollout["next", truncated_key].sum().item() == 2


def test_step_counter_partial_reset_keeps_other_counts():
    env = TransformedEnv(CountEnv((3,)), StepCounter())
    td = env.reset()
    for _ in range(2):
        td["action"] = torch.zeros(3, 1)
        td = env.step(td)["next"].exclude("reward")
    assert td["step_count"].squeeze(-1).tolist() == [2, 2, 2]
    td["_reset"] = torch.tensor([[False], [True], [False]])
    td = env.reset(td)
    assert td["step_count"].squeeze(-1).tolist() == [2, 0, 2]


def test_step_counter_truncation_with_different_horizons_under_a_batched_rollout():
    env = TransformedEnv(CountEnv((2,), max_count=3), StepCounter(5))
    rollout = env.rollout(8, break_when_any_done=False)
    # terminated at count 3, so the truncation at 5 never fires; the counter restarts each time
    assert rollout["next", "step_count"][0].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1, 2]
    assert not rollout["next", "truncated"].any()


def test_step_counter_validates_its_arguments():
    with pytest.raises(ValueError, match=re.escape(MAX_STEPS_ERROR.format(value=0))):
        StepCounter(0)
    with pytest.raises(ValueError, match="truncated_key must be a string"):
        StepCounter(truncated_key=("a", "b"))


def test_step_counter_step_without_reset_names_the_missing_key():
    env = TransformedEnv(CountEnv(), StepCounter())
    td = TensorDict(action=torch.zeros(1))
    with pytest.raises(KeyError, match=re.escape(NO_STEP_COUNT_ERROR.format(key="step_count"))):
        env.step(td)


# ----------------------------------------------------- InitTracker, RewardSum
def test_init_tracker_flags_reset_outputs_only():
    env = TransformedEnv(CountEnv((2,)), InitTracker())
    td = env.reset()
    assert td["is_init"].all()
    td["action"] = torch.zeros(2, 1)
    assert not env.step(td)["next", "is_init"].any()
    td = env.step(td)["next"].exclude("reward")
    td["_reset"] = torch.tensor([[True], [False]])
    assert env.reset(td)["is_init"].squeeze(-1).tolist() == [True, False]


def test_reward_sum_accumulates_and_restarts_on_partial_reset():
    env = TransformedEnv(CountEnv((2,)), RewardSum())
    rollout = env.rollout(3)
    assert rollout["next", "episode_reward"][0].squeeze(-1).tolist() == [1.0, 2.0, 3.0]
    td = rollout[..., -1]["next"].exclude("reward")
    td["_reset"] = torch.tensor([[True], [False]])
    assert env.reset(td)["episode_reward"].squeeze(-1).tolist() == [0.0, 3.0]


def test_reward_sum_rejects_mismatched_keys_and_unknown_rewards():
    with pytest.raises(ValueError, match=re.escape(KEY_COUNT_ERROR.format(n_in=1, n_out=2))):
        RewardSum(in_keys=["reward"], out_keys=["a", "b"])
    with pytest.raises(KeyError, match="'nope' is not in the reward spec"):
        TransformedEnv(CountEnv(), RewardSum(in_keys=["nope"]))


def test_reward_sum_forward_on_stored_data_uses_the_time_dim():
    td = TensorDict(reward=torch.ones(2, 3, 1), batch_size=[2, 3], names=[None, "time"])
    assert RewardSum(in_keys=["reward"])(td)["episode_reward"][0].squeeze(-1).tolist() == [1, 2, 3]


# ------------------------------------------------------------- observations
def test_cat_tensors_concatenates_sorted_keys_and_deletes_them():
    env = TransformedEnv(DoubleEnv(), CatTensors(["obs_b", "obs_a"], "obs"))
    assert env.observation_spec["obs"].shape == (5,)
    assert set(env.observation_spec.keys()) == {"obs"}
    td = env.reset()
    assert td["obs"].shape == (5,) and "obs_a" not in td.keys()


def test_cat_tensors_can_keep_its_inputs():
    env = TransformedEnv(DoubleEnv(), CatTensors(["obs_a", "obs_b"], "obs", del_keys=False))
    assert set(env.reset().keys()) >= {"obs", "obs_a", "obs_b"}


def test_cat_tensors_missing_keys_are_named():
    with pytest.raises(
        ValueError, match=re.escape(CAT_MISSING_SPEC_ERROR.split(" are")[0].format(keys=["zz"]))
    ):
        TransformedEnv(DoubleEnv(), CatTensors(["obs_a", "zz"], "obs"))
    with pytest.raises(KeyError, match=re.escape("in_key 'obs_b' not found")):
        CatTensors(["obs_a", "obs_b"], "obs")(TensorDict(obs_a=torch.zeros(2)))


def test_double_to_float_without_keys_casts_every_double():
    env = TransformedEnv(DoubleEnv(), DoubleToFloat())
    assert env.observation_spec["obs_a"].dtype == torch.float32
    assert env.observation_spec["obs_b"].dtype == torch.float32
    assert env.action_spec.dtype == torch.float32
    rollout = env.rollout(2)
    assert rollout["next", "obs_a"].dtype == torch.float32
    assert env.base_env.last_action_dtype == torch.float64


def test_observation_norm_affine_and_standard_normal():
    env = TransformedEnv(CountEnv(), ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"]))
    assert (env.reset()["observation"] == 1.0).all()
    env = TransformedEnv(
        CountEnv(),
        ObservationNorm(loc=1.0, scale=2.0, in_keys=["observation"], standard_normal=True),
    )
    assert (env.reset()["observation"] == -0.5).all()


def test_observation_norm_maps_bounded_specs():
    env = TransformedEnv(
        DoubleEnv(), ObservationNorm(loc=1.0, scale=torch.tensor(-2.0), in_keys=["obs_b"])
    )
    spec = env.observation_spec["obs_b"]
    assert isinstance(spec, Bounded)
    assert (spec.low == -1.0).all() and (spec.high == 3.0).all()


def test_observation_norm_init_stats_standardises_observations():
    env = TransformedEnv(CountEnv(), ObservationNorm(in_keys=["observation"], standard_normal=True))
    with pytest.raises(RuntimeError, match=re.escape(NORM_UNINITIALIZED_ERROR)):
        env.reset()
    env.transform.init_stats(num_iter=10)
    data = env.rollout(10)["observation"]
    assert data.mean().abs() < 1e-5
    assert (data.std(0) - 1).abs().max() < 1e-4


def test_to_tensor_image_moves_channels_first_and_scales():
    env = TransformedEnv(PixelEnv(), ToTensorImage())
    spec = env.observation_spec["pixels"]
    assert spec.shape == (3, 4, 5) and spec.dtype == torch.float32
    pixels = env.reset()["pixels"]
    assert pixels.shape == (3, 4, 5) and (pixels == 1).all()


# ----------------------------------------------------------------- rewards
def test_reward_clipping_clamps_and_bounds_the_spec():
    env = TransformedEnv(PixelEnv(), RewardClipping(0, 0.1))
    spec = env.reward_spec
    assert isinstance(spec, Bounded)
    assert spec.low.item() == 0 and spec.high.item() == pytest.approx(0.1)
    assert env.rand_step()["next", "reward"].item() == pytest.approx(0.1)
    assert isinstance(TransformedEnv(PixelEnv()).reward_spec, Unbounded)


# -------------------------------------------------------------------- keys
def test_rename_transform_renames_outputs_and_inverse_renames_inputs():
    env = TransformedEnv(CountEnv(), RenameTransform(["observation"], ["obs"], ["action"], ["act"]))
    assert "obs" in env.observation_spec.keys() and "observation" not in env.observation_spec.keys()
    assert "act" in env.full_action_spec.keys()
    td = env.reset()
    td["act"] = torch.zeros(1)
    out = env.step(td)
    assert "obs" in out["next"].keys() and "act" in out.keys()


def test_rename_transform_with_copy_keeps_both():
    env = TransformedEnv(CountEnv(), RenameTransform(["observation"], ["obs"], create_copy=True))
    assert {"obs", "observation"} <= set(env.reset().keys())


def test_exclude_and_select_transforms_drop_entries():
    env = TransformedEnv(DoubleEnv(), ExcludeTransform("obs_b"))
    assert "obs_b" not in env.reset().keys() and "obs_b" not in env.observation_spec.keys()
    env = TransformedEnv(DoubleEnv(), SelectTransform("obs_b"))
    td = env.reset()
    assert "obs_a" not in td.keys() and "obs_b" in td.keys()
    assert set(env.observation_spec.keys()) == {"obs_b"}


def test_trackers_follow_nested_done_groups():
    env = TransformedEnv(NestedDoneEnv(), Compose(StepCounter(2), RewardSum(), InitTracker()))
    assert env.observation_spec["data", "step_count"].shape == (2, 1)
    assert ("data", "truncated") in env.full_done_spec.keys(True)
    assert ("data", "is_init") in env.observation_spec.keys(True)
    check_env_specs(env)
    rollout = env.rollout(5, break_when_any_done=False)
    assert rollout["next", "data", "step_count"][:, 0, 0].tolist() == [1, 2, 1, 2, 1]
    assert rollout["next", "data", "episode_reward"][:, 0, 0].tolist() == [1, 2, 1, 2, 1]
    assert rollout["data", "is_init"][:, 0, 0].tolist() == [True, False, True, False, True]


def test_observation_norm_inverse_maps_inputs_back():
    env = TransformedEnv(
        DoubleEnv(),
        ObservationNorm(loc=1.0, scale=2.0, in_keys=[], in_keys_inv=["action"]),
    )
    td = env.reset()
    td["action"] = torch.full((1,), 3.0, dtype=torch.float64)
    out = env.step(td)
    assert out["next", "obs_a"][0].item() == 1.0  # the base env saw (3 - 1) / 2


def test_reward_clipping_with_one_bound():
    env = TransformedEnv(PixelEnv(), RewardClipping(clamp_max=1.5))
    assert env.rand_step()["next", "reward"].item() == 1.5
    assert env.reward_spec.high.item() == 1.5
    check_env_specs(env)


def test_init_tracker_and_step_counter_reject_nested_key_names():
    with pytest.raises(ValueError, match="init_key can only be of type str"):
        InitTracker(init_key=("a", "b"))
    with pytest.raises(ValueError, match="step_count_key must be a string"):
        StepCounter(step_count_key=("a", "b"))

"""rltransforms transforms with batched envs: each transform inside the workers of a SerialEnv and a
ParallelEnv, and around them, under `check_env_specs` (the torchrl 0.4-era layouts).

The ParallelEnv cases use the `maybe_fork_ParallelEnv` fixture: spawn by default, fork with
`--mp_fork_if_no_cuda`.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from rlbatched import SerialEnv
from rlcore import EnvBase, check_env_specs
from rlmocks import (
    ContinuousActionVecMockEnv,
    CountingBatchedEnv,
    DiscreteActionConvMockEnv,
    DiscreteActionConvMockEnvNumpy,
    DiscreteActionVecMockEnv,
    MultiKeyCountingEnv,
    MultiKeyCountingEnvPolicy,
    NestedCountingEnv,
)
from rlspecs import Binary, Categorical, Composite, Unbounded
from rltransforms import (
    ActionMask,
    BinarizeReward,
    CatTensors,
    ClipTransform,
    Compose,
    DeviceCastTransform,
    DiscreteActionProjection,
    DoubleToFloat,
    DTypeCastTransform,
    ExcludeTransform,
    FlattenObservation,
    InitTracker,
    ObservationNorm,
    PermuteTransform,
    RemoveEmptySpecs,
    RenameTransform,
    RewardClipping,
    RewardScaling,
    RewardSum,
    SelectTransform,
    SignTransform,
    SqueezeTransform,
    StepCounter,
    TransformedEnv,
    UnsqueezeTransform,
)


class MaskedEnv(EnvBase):
    """Four actions, each allowed once per episode; the mask is an observation and a state."""

    def __init__(self) -> None:
        super().__init__()
        self.action_spec = Categorical(4)
        self.state_spec = Composite(action_mask=Binary(4, dtype=torch.bool))
        self.observation_spec = Composite(obs=Unbounded(3), action_mask=Binary(4, dtype=torch.bool))
        self.reward_spec = Unbounded(1)

    def _reset(self, tensordict):
        return TensorDict(obs=torch.zeros(3), action_mask=torch.ones(4, dtype=torch.bool))

    def _step(self, tensordict):
        mask = tensordict["action_mask"].scatter(-1, tensordict["action"].unsqueeze(-1), False)
        return TensorDict(
            obs=torch.zeros(3), action_mask=mask, reward=torch.zeros(1), done=~mask.any().view(1)
        )

    def _set_seed(self, seed):
        return seed


# name -> (base env class, transform factory); every factory returns a fresh transform
CASES = {
    "RewardScaling": (ContinuousActionVecMockEnv, lambda: RewardScaling(0.5, 1.5)),
    "BinarizeReward": (ContinuousActionVecMockEnv, BinarizeReward),
    "RewardClipping": (ContinuousActionVecMockEnv, lambda: RewardClipping(-0.1, 0.1)),
    "RewardSum": (
        ContinuousActionVecMockEnv,
        lambda: Compose(RewardScaling(loc=1.0, scale=1.0), RewardSum()),
    ),
    "StepCounter": (ContinuousActionVecMockEnv, lambda: StepCounter(3)),
    "InitTracker": (ContinuousActionVecMockEnv, InitTracker),
    "SignTransform": (
        ContinuousActionVecMockEnv,
        lambda: SignTransform(in_keys=["observation", "reward"], in_keys_inv=["observation_orig"]),
    ),
    "ClipTransform": (
        ContinuousActionVecMockEnv,
        lambda: ClipTransform(in_keys=["observation", "reward"], low=-0.1, high=0.1),
    ),
    "UnsqueezeTransform": (
        ContinuousActionVecMockEnv,
        lambda: UnsqueezeTransform(-1, in_keys=["observation"]),
    ),
    "UnsqueezeTransform-inv": (
        ContinuousActionVecMockEnv,
        lambda: UnsqueezeTransform(-1, in_keys_inv=["action"]),
    ),
    "SqueezeTransform": (
        DiscreteActionConvMockEnv,
        lambda: SqueezeTransform(-3, in_keys=["pixels"]),
    ),
    "FlattenObservation": (
        DiscreteActionConvMockEnv,
        lambda: FlattenObservation(-2, -1, in_keys=["pixels"]),
    ),
    "PermuteTransform": (
        DiscreteActionConvMockEnvNumpy,
        lambda: PermuteTransform((-1, -3, -2), in_keys=["pixels"]),
    ),
    "CatTensors": (
        ContinuousActionVecMockEnv,
        lambda: CatTensors(in_keys=["observation"], out_key="observation_copy"),
    ),
    "CatTensors-lazy": (
        ContinuousActionVecMockEnv,
        lambda: CatTensors(out_key="observation_out", del_keys=False),
    ),
    "DTypeCastTransform": (
        ContinuousActionVecMockEnv,
        lambda: DTypeCastTransform(
            torch.float32, torch.float64, in_keys=["observation"], in_keys_inv=["action"]
        ),
    ),
    "DoubleToFloat": (
        ContinuousActionVecMockEnv,
        lambda: Compose(
            DTypeCastTransform(
                torch.float32, torch.float64, in_keys=["observation"], in_keys_inv=[]
            ),
            DoubleToFloat(in_keys=["observation"], in_keys_inv=[]),
        ),
    ),
    "DeviceCastTransform": (ContinuousActionVecMockEnv, lambda: DeviceCastTransform("cpu:1")),
    "DiscreteActionProjection": (
        DiscreteActionVecMockEnv,
        lambda: DiscreteActionProjection(7, 10),
    ),
    "ExcludeTransform": (ContinuousActionVecMockEnv, lambda: ExcludeTransform("reward")),
    "SelectTransform": (ContinuousActionVecMockEnv, lambda: SelectTransform("observation")),
    "RenameTransform": (
        ContinuousActionVecMockEnv,
        lambda: RenameTransform(["observation_orig"], ["stuff"], ["observation_orig"], ["stuff"]),
    ),
    "RemoveEmptySpecs": (ContinuousActionVecMockEnv, RemoveEmptySpecs),
    "ObservationNorm": (
        ContinuousActionVecMockEnv,
        lambda: ObservationNorm(loc=0.5, scale=1.1, in_keys=["observation"]),
    ),
    "ActionMask": (MaskedEnv, ActionMask),
}
NAMES = sorted(CASES)


def _make(name):
    env_cls, make_transform = CASES[name]
    return TransformedEnv(env_cls(), make_transform())


@pytest.mark.parametrize("name", NAMES)
def test_single_trans_env_check(name):
    check_env_specs(_make(name))


@pytest.mark.parametrize("name", NAMES)
def test_serial_trans_env_check(name):
    env = SerialEnv(2, lambda: _make(name))
    try:
        check_env_specs(env)
    finally:
        env.close()


@pytest.mark.parametrize("name", NAMES)
def test_parallel_trans_env_check(name, maybe_fork_ParallelEnv):
    env = maybe_fork_ParallelEnv(2, lambda: _make(name))
    try:
        check_env_specs(env)
    finally:
        env.close()


@pytest.mark.parametrize("name", NAMES)
def test_trans_serial_env_check(name):
    env_cls, make_transform = CASES[name]
    env = TransformedEnv(SerialEnv(2, env_cls), make_transform())
    try:
        check_env_specs(env)
    finally:
        env.close()


@pytest.mark.parametrize("name", NAMES)
def test_trans_parallel_env_check(name, maybe_fork_ParallelEnv):
    env_cls, make_transform = CASES[name]
    env = TransformedEnv(maybe_fork_ParallelEnv(2, env_cls), make_transform())
    try:
        check_env_specs(env)
    finally:
        env.close()


# ------------------------------------------------------------------ behaviours across workers
@pytest.mark.parametrize("has_in_keys", [True, False])
def test_reward_sum_sums_every_reward_of_a_multi_key_serial_env(has_in_keys):
    base_env = SerialEnv(2, lambda: MultiKeyCountingEnv(batch_size=(3, 2)))
    if has_in_keys:
        transform = RewardSum(in_keys=base_env.reward_keys, reset_keys=base_env.reset_keys)
    else:
        transform = RewardSum()
    env = TransformedEnv(base_env, Compose(transform))
    policy = MultiKeyCountingEnvPolicy(full_action_spec=env.full_action_spec, deterministic=True)
    check_env_specs(env)
    rollout = env.rollout(5, policy=policy)
    for reward_key in env.reward_keys:
        reward_key = (reward_key,) if isinstance(reward_key, str) else reward_key
        episode_key = ("next", *reward_key[:-1], f"episode_{reward_key[-1]}")
        assert (rollout[episode_key][0, 0, 0, -1] == 5).all()
    env.close()


def test_observation_norm_init_stats_on_a_serial_env():
    def make_env():
        return ContinuousActionVecMockEnv(seed=0)

    env = TransformedEnv(SerialEnv(2, make_env), ObservationNorm(in_keys=["observation"]))
    env.transform.init_stats(num_iter=11, reduce_dim=(0, 1), cat_dim=1)
    assert env.transform.loc.shape == env.observation_spec["observation"].shape[1:]
    check_env_specs(env)
    env.close()


def test_init_tracker_flags_every_reset_of_each_worker(maybe_fork_ParallelEnv):
    def make_env():
        return TransformedEnv(
            CountingBatchedEnv(max_steps=torch.tensor([4, 5]), batch_size=[2]), InitTracker()
        )

    env = maybe_fork_ParallelEnv(2, make_env)
    try:
        rollout = env.rollout(
            100,
            lambda td: td.set("action", torch.ones(td.shape + (1,), dtype=torch.int8)),
            break_when_any_done=False,
        )
        # a reset every 5 (resp. 6) steps: 20 (resp. 17) episode starts in 100 steps
        assert rollout["is_init"].sum(-2).squeeze(-1).tolist() == [[20, 17]] * 2
    finally:
        env.close()


def test_step_counter_truncates_inside_parallel_workers(maybe_fork_ParallelEnv):
    env = maybe_fork_ParallelEnv(
        2, lambda: TransformedEnv(ContinuousActionVecMockEnv(), StepCounter(3))
    )
    try:
        rollout = env.rollout(7, break_when_any_done=False)
        assert rollout["next", "step_count"][0].squeeze(-1).tolist() == [1, 2, 3, 1, 2, 3, 1]
        assert rollout["next", "truncated"].sum().item() == 4
    finally:
        env.close()


def test_action_mask_around_a_serial_env_masks_each_sub_env():
    env = TransformedEnv(SerialEnv(2, MaskedEnv), ActionMask())
    rollout = env.rollout(4)
    for worker in range(2):
        assert sorted(rollout["action"][worker].tolist()) == [0, 1, 2, 3]
    env.close()


def test_device_cast_moves_a_whole_parallel_env(maybe_fork_ParallelEnv):
    env = TransformedEnv(
        maybe_fork_ParallelEnv(2, ContinuousActionVecMockEnv), DeviceCastTransform("cpu:1")
    )
    try:
        assert env.device == torch.device("cpu:1")
        assert env.rollout(3).device == torch.device("cpu:1")
    finally:
        env.close()


def test_exclude_and_rename_nested_entries_of_a_serial_env():
    env = TransformedEnv(
        SerialEnv(2, NestedCountingEnv),
        Compose(ExcludeTransform(("data", "states")), RenameTransform([("data", "reward")], ["r"])),
    )
    check_env_specs(env)
    keys = env.rollout(2).keys(True, True)
    assert ("next", "data", "states") not in keys and ("next", "r") in keys
    env.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_device_cast_to_cuda_around_a_serial_env():
    env = TransformedEnv(SerialEnv(2, ContinuousActionVecMockEnv), DeviceCastTransform("cuda:0"))
    check_env_specs(env)
    assert env.rollout(3).device.type == "cuda"
    env.close()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_device_cast_of_some_keys_to_cuda():
    env = TransformedEnv(
        ContinuousActionVecMockEnv(),
        DeviceCastTransform("cuda:0", in_keys=["observation"], in_keys_inv=["action"]),
    )
    check_env_specs(env)
    rollout = env.rollout(3)
    assert rollout["observation"].device.type == "cuda"
    assert rollout["action"].device.type == "cuda"
    assert rollout["observation_orig"].device.type == "cpu"

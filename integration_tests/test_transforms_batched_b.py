"""The frame, primer, normalisation, env-step, return and image transforms with batched envs.

Each transform is checked inside the sub-envs of a SerialEnv / ParallelEnv and around them
(`test_*_trans_env_check`); VecNorm's statistics are checked to be shared by ParallelEnv
workers under fork and spawn; EndOfLifeTransform runs on the real ALE; FrameSkipTransform is
compared with GymEnv's own frame_skip.
"""

from __future__ import annotations

import importlib.util
import multiprocessing as mp
import warnings
from collections.abc import Callable

import pytest
import torch
from mocking_classes import (
    ContinuousActionVecMockEnv,
    DiscreteActionConvMockEnv,
    DiscreteActionConvMockEnvNumpy,
    IncrementingEnv,
)
from tensordict import TensorDict

from rlbatched import ParallelEnv, SerialEnv
from rlcore import EnvBase, EnvCreator, check_env_specs
from rlspecs import Composite, Unbounded
from rltransforms import (
    CatFrames,
    CenterCrop,
    Compose,
    EndOfLifeTransform,
    FrameSkipTransform,
    GrayScale,
    NoopResetEnv,
    Resize,
    Reward2GoTransform,
    TargetReturn,
    TensorDictPrimer,
    TimeMaxPool,
    ToTensorImage,
    TransformedEnv,
    VecNorm,
)

_has_gym = importlib.util.find_spec("gymnasium") is not None
_has_ale = _has_gym and importlib.util.find_spec("ale_py") is not None
START_METHODS = [m for m in ("fork", "spawn") if m in mp.get_all_start_methods()]

# name -> (base env class, transform factory); each transform fits its env's keys
CASES: dict[str, tuple[type, Callable]] = {
    "CatFrames": (
        ContinuousActionVecMockEnv,
        lambda: CatFrames(dim=-1, N=3, in_keys=["observation"]),
    ),
    "TimeMaxPool": (ContinuousActionVecMockEnv, lambda: TimeMaxPool(in_keys=["observation"], T=3)),
    "TensorDictPrimer": (
        ContinuousActionVecMockEnv,
        lambda: TensorDictPrimer(mykey=Unbounded([4]), random=True),
    ),
    "VecNorm": (ContinuousActionVecMockEnv, lambda: VecNorm(decay=1.0)),
    "FrameSkipTransform": (ContinuousActionVecMockEnv, lambda: FrameSkipTransform(2)),
    "TargetReturn": (ContinuousActionVecMockEnv, lambda: TargetReturn(10.0)),
    "ToTensorImage": (DiscreteActionConvMockEnvNumpy, lambda: ToTensorImage(in_keys=["pixels"])),
    "Resize": (DiscreteActionConvMockEnv, lambda: Resize(4, 5, in_keys=["pixels"])),
    "CenterCrop": (DiscreteActionConvMockEnv, lambda: CenterCrop(3, in_keys=["pixels"])),
    "GrayScale": (
        DiscreteActionConvMockEnvNumpy,
        lambda: Compose(ToTensorImage(in_keys=["pixels"]), GrayScale(in_keys=["pixels"])),
    ),
}
# NoopResetEnv inside sub-envs only: around a batch it refuses (no partial no-ops)
INNER_ONLY = {"NoopResetEnv": (ContinuousActionVecMockEnv, lambda: NoopResetEnv(noops=3))}


def _maker(name: str, cases: dict) -> Callable:
    env_cls, transform = cases[name]
    return lambda: TransformedEnv(env_cls(), transform())


@pytest.mark.parametrize("name", sorted({**CASES, **INNER_ONLY}))
def test_serial_trans_env_check(name):
    env = SerialEnv(2, _maker(name, {**CASES, **INNER_ONLY}))
    check_env_specs(env)
    env.close()


# A ParallelEnv takes seconds to start (spawn): the parallel checks run the transforms of a
# group together, each writing its own keys, in one env.
def _vector_group(inner: bool) -> Compose:
    transforms = [
        CatFrames(dim=-1, N=3, in_keys=["observation"], out_keys=["obs_frames"]),
        TimeMaxPool(in_keys=["observation"], out_keys=["obs_max"], T=3),
        TensorDictPrimer(mykey=Unbounded([4]), random=True),
        TargetReturn(10.0),
        FrameSkipTransform(2),
        VecNorm(in_keys=["observation", "reward"], out_keys=["obs_norm", "reward"]),
    ]
    if inner:
        transforms.insert(0, NoopResetEnv(noops=3))
    return Compose(*transforms)


def _image_group(inner: bool) -> Compose:
    return Compose(
        ToTensorImage(in_keys=["pixels"]),
        Resize(10, 9, in_keys=["pixels"]),
        CenterCrop(6, in_keys=["pixels"]),
        GrayScale(in_keys=["pixels"]),
    )


GROUPS = {
    "vector": (ContinuousActionVecMockEnv, _vector_group),
    "image": (DiscreteActionConvMockEnvNumpy, _image_group),
}


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_parallel_trans_env_check(group, maybe_fork_ParallelEnv):
    env_cls, transforms = GROUPS[group]
    env = maybe_fork_ParallelEnv(2, lambda: TransformedEnv(env_cls(), transforms(inner=True)))
    try:
        check_env_specs(env)
        rollout = env.rollout(3)
        key = "obs_frames" if group == "vector" else "pixels"
        assert rollout["next", key].shape[:2] == (2, 3)
    finally:
        env.close()


@pytest.mark.parametrize("name", sorted(CASES))
def test_trans_serial_env_check(name):
    env_cls, transform = CASES[name]
    env = TransformedEnv(SerialEnv(2, env_cls), transform())
    check_env_specs(env)
    env.close()


@pytest.mark.parametrize("group", sorted(GROUPS))
def test_trans_parallel_env_check(group, maybe_fork_ParallelEnv):
    env_cls, transforms = GROUPS[group]
    env = TransformedEnv(maybe_fork_ParallelEnv(2, env_cls), transforms(inner=False))
    try:
        check_env_specs(env)
        assert env.rollout(3).batch_size == (2, 3)
    finally:
        env.close()


def test_noop_around_a_batch_refuses():
    env = TransformedEnv(SerialEnv(2, ContinuousActionVecMockEnv), NoopResetEnv())
    with pytest.raises(ValueError, match="The parent environment batch-size is non-null"):
        check_env_specs(env)
    env.close()


@pytest.mark.parametrize("random", [True, False])
def test_noop_steps_the_mock(random):
    torch.manual_seed(0)
    env = TransformedEnv(ContinuousActionVecMockEnv(), NoopResetEnv(random=random))
    env.reset()
    assert env.step_count > 0 if random else env.step_count == 30


@pytest.mark.parametrize("noops,max_steps", [(0, 0), (2, 5), (8, 9), (2, 0)])
def test_noop_reset_limit_exceeded(noops, max_steps):
    env = TransformedEnv(IncrementingEnv(max_steps=max_steps), NoopResetEnv(noops, random=False))
    if noops <= max_steps:
        assert env.reset()["observation"] == noops
    else:
        with pytest.raises(RuntimeError, match="repeatedly done or truncated"):
            env.reset()


def test_reward2go_refuses_batched_envs(maybe_fork_ParallelEnv):
    def make():
        return TransformedEnv(ContinuousActionVecMockEnv(), Reward2GoTransform(out_keys=["r2g"]))

    with pytest.raises(ValueError, match="only an inverse transform"):
        SerialEnv(2, make)
    env = maybe_fork_ParallelEnv(2, make)  # builds no sub-env here: its workers do, at start
    with pytest.raises(
        ValueError, match="worker 0 raised ValueError during start: The Reward2GoTransform is only"
    ):
        env.start()
    env.close()
    with pytest.raises(ValueError, match="only an inverse transform"):
        TransformedEnv(SerialEnv(2, ContinuousActionVecMockEnv), Reward2GoTransform())


@pytest.mark.parametrize("spec_shape", [[4], [2, 4]])
def test_primer_around_a_batch_expands(spec_shape):
    env = TransformedEnv(
        SerialEnv(2, ContinuousActionVecMockEnv), TensorDictPrimer(mykey=Unbounded(spec_shape))
    )
    try:
        check_env_specs(env)
        rollout = env.rollout(3)
        assert rollout["next", "mykey"].shape == (2, 3, 4)
    finally:
        env.close()


@pytest.mark.parametrize("padding", ["same", "constant"])
@pytest.mark.parametrize("conv", [False, True])
def test_catframes_offline_against_online(padding, conv):
    """CatFrames in a SerialEnv and CatFrames on the [B, T] rollout give the same stacks."""
    torch.manual_seed(0)
    key, dim = ("pixels", -3) if conv else ("observation", -1)
    base = DiscreteActionConvMockEnv if conv else ContinuousActionVecMockEnv
    env = SerialEnv(
        3,
        lambda: TransformedEnv(
            base(),
            CatFrames(dim=dim, N=5, in_keys=[key], out_keys=[f"{key}_cat"], padding=padding),
        ),
    )
    env.set_seed(0)
    rollout = env.rollout(20, break_when_any_done=False)
    offline = CatFrames(
        dim=dim,
        N=5,
        in_keys=[key, ("next", key)],
        out_keys=[f"{key}_cat2", ("next", f"{key}_cat2")],
        padding=padding,
    )
    data = offline(rollout)
    assert (data[f"{key}_cat2"] == data[f"{key}_cat"]).all()
    assert (data["next", f"{key}_cat2"] == data["next", f"{key}_cat"]).all()


# ---------------------------------------------------------------------------- VecNorm workers
def _make_vecnorm_env():
    return TransformedEnv(ContinuousActionVecMockEnv(), VecNorm(decay=1.0))


@pytest.mark.parametrize("start_method", START_METHODS)
def test_vecnorm_statistics_update_from_every_worker(start_method):
    creator = EnvCreator(_make_vecnorm_env)
    env = ParallelEnv(3, creator, mp_start_method=start_method)
    try:
        env.rollout(10, break_when_any_done=False)
        stats = creator().transform._td  # read in this process
        # every worker: one reset observation and 10 step observations, 10 rewards
        assert stats["observation_count"].item() == 3 * 11
        assert stats["reward_count"].item() == 3 * 10
        before = stats.clone()
        env.rollout(5, break_when_any_done=False)
        assert stats["observation_count"].item() == 3 * 11 + 3 * 6
        assert (stats["observation_sum"] != before["observation_sum"]).all()
    finally:
        env.close()


@pytest.mark.parametrize("start_method", START_METHODS)
def test_vecnorm_instance_given_to_workers_is_shared(start_method):
    vecnorm = VecNorm(in_keys=["observation"], decay=1.0)
    TransformedEnv(ContinuousActionVecMockEnv(), vecnorm)  # statistics built from the specs
    vecnorm.reset_parent()

    def make():
        return TransformedEnv(ContinuousActionVecMockEnv(), vecnorm.clone())

    env = ParallelEnv(2, make, mp_start_method=start_method)
    try:
        env.rollout(4, break_when_any_done=False)
        assert vecnorm._td["observation_count"].item() == 2 * 5
    finally:
        env.close()


class NoisyEnv(EnvBase):
    """Observations drawn afresh each step around 3 (a stationary process, unlike a walk)."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(7))
        self.action_spec = Unbounded(1)
        self.reward_spec = Unbounded(1)

    def _draw(self) -> TensorDict:
        return TensorDict({"observation": 3 + torch.randn(7)}, [])

    def _reset(self, tensordict):
        return self._draw()

    def _step(self, tensordict):
        return self._draw().update({"reward": torch.zeros(1)})

    def _set_seed(self, seed):
        torch.manual_seed(seed)


def test_vecnorm_around_a_parallel_env_standardises(maybe_fork_ParallelEnv):
    torch.manual_seed(0)
    env = TransformedEnv(
        maybe_fork_ParallelEnv(3, NoisyEnv), VecNorm(in_keys=["observation"], decay=1.0)
    )
    try:
        env.set_seed(0)
        rollout = env.rollout(60, break_when_any_done=False)
        obs = rollout["next", "observation"][:, 30:].reshape(-1, 7)
        assert obs.mean(0).abs().max() < 0.5  # 3 without the transform
        assert env.transform._td["observation_count"].item() == 3 * 61
    finally:
        env.close()


# ---------------------------------------------------------------------------- Gym / ALE
@pytest.mark.skipif(not _has_gym, reason="gymnasium not installed")
@pytest.mark.parametrize("skip", [1, 2, 3])
def test_frameskip_matches_gym_frame_skip(skip):
    from rllibs import GymEnv

    base_env = GymEnv("Pendulum-v1", frame_skip=skip)
    env = TransformedEnv(GymEnv("Pendulum-v1"), FrameSkipTransform(skip))
    actions = base_env.action_spec.rand((10,))
    base_env.set_seed(0)
    env.set_seed(0)
    td1, td2 = base_env.reset(), env.reset()
    torch.testing.assert_close(td1["observation"], td2["observation"])
    for action in actions:
        td1 = base_env.step(td1.set("action", action))
        td2 = env.step(td2.set("action", action))
        torch.testing.assert_close(td1["next", "observation"], td2["next", "observation"])
        torch.testing.assert_close(td1["next", "reward"], td2["next", "reward"])
        td1, td2 = td1["next"].exclude("reward"), td2["next"].exclude("reward")


def _breakout(info_reader: bool = False):
    import ale_py
    import gymnasium

    from rllibs import GymEnv, default_info_dict_reader

    gymnasium.register_envs(ale_py)
    env = GymEnv("ALE/Breakout-v5")
    if info_reader:
        env = env.set_info_dict_reader(default_info_dict_reader(["lives"]))
    return env


@pytest.mark.skipif(not _has_ale, reason="gymnasium / ale-py not installed")
@pytest.mark.parametrize("eol_key", ["eol_key", ("nested", "eol")])
@pytest.mark.parametrize("lives_key", ["lives_key", ("nested", "lives")])
def test_end_of_life_on_breakout(eol_key, lives_key):
    env = TransformedEnv(_breakout(), EndOfLifeTransform(eol_key=eol_key, lives_key=lives_key))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a GymEnv: no compatibility warning
        check_env_specs(env)
    torch.manual_seed(0)
    env.set_seed(0)
    rollout = env.rollout(400)
    eol = rollout["next", eol_key].squeeze(-1)
    lost = rollout[lives_key] > rollout["next", lives_key]
    assert lost.any()  # a random policy loses lives
    assert (eol == (lost | rollout["next", "done"].squeeze(-1))).all()
    assert not rollout["next", "done"][:-1].any()  # a lost life does not end the episode


@pytest.mark.skipif(not _has_ale, reason="gymnasium / ale-py not installed")
def test_end_of_life_reads_lives_written_by_the_env_in_a_parallel_env(maybe_fork_ParallelEnv):
    env = TransformedEnv(
        maybe_fork_ParallelEnv(2, lambda: _breakout(info_reader=True)), EndOfLifeTransform()
    )
    try:
        check_env_specs(env)
        rollout = env.rollout(150, break_when_any_done=False)
        lost = rollout["lives"] > rollout["next", "lives"]
        eol = rollout["next", "end-of-life"].squeeze(-1)
        assert lost.any()
        assert (eol == (lost | rollout["next", "done"].squeeze(-1))).all()
    finally:
        env.close()


@pytest.mark.skipif(not _has_ale, reason="gymnasium / ale-py not installed")
@pytest.mark.parametrize("info_reader", [False, True])
def test_end_of_life_on_a_serial_env(info_reader):
    """Lives read from each game (`unwrapped.ale.lives`) or written by the games into their
    outputs; either way torchrl 0.4 warns that the base env (a SerialEnv) is not a gym env."""
    env = TransformedEnv(
        SerialEnv(2, lambda: _breakout(info_reader=info_reader)), EndOfLifeTransform()
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env_specs(env)
        assert env.reset()["lives"].tolist() == [5, 5]
    assert any("The base_env is not a gym env" in str(w.message) for w in caught)
    env.close()


def test_end_of_life_unreadable_lives_say_what_to_do():
    env = TransformedEnv(SerialEnv(2, ContinuousActionVecMockEnv), EndOfLifeTransform())
    with pytest.warns(UserWarning, match="The base_env is not a gym env"):
        with pytest.raises(RuntimeError, match="default_info_dict_reader"):
            env.reset()
    env.close()

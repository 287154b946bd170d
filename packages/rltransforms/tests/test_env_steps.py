"""FrameSkipTransform, NoopResetEnv and EndOfLifeTransform (lives from an attribute or a key)."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from _transform_b_envs import RandomDoneEnv
from _transform_envs import CountEnv, NestedDoneEnv
from tensordict import TensorDict, TensorDictBase
from torch import nn

from rlcore import EnvBase, check_env_specs
from rlspecs import Categorical, Composite, Unbounded
from rltransforms import (
    Compose,
    EndOfLifeTransform,
    FrameSkipTransform,
    NoopResetEnv,
    StepCounter,
    TransformedEnv,
)
from rltransforms._env_steps import FORWARD_NOT_IMPLEMENTED

pytestmark = pytest.mark.filterwarnings("error")


# ---------------------------------------------------------------------------- FrameSkip
@pytest.mark.parametrize("batch", [(), (2,)])
def test_frameskip_single_trans_env_check(batch):
    check_env_specs(TransformedEnv(CountEnv(batch), FrameSkipTransform(2)))


@pytest.mark.parametrize("skip", [1, 2, 3])
def test_frameskip_transform_env_repeats_and_sums(skip):
    env = TransformedEnv(CountEnv((2,)), FrameSkipTransform(skip))
    rollout = env.rollout(3)
    counts = rollout["next", "observation"][..., 0]
    assert (counts == torch.tensor([1, 2, 3]) * skip).all()
    assert (rollout["next", "reward"] == skip).all()


def test_frameskip_stops_at_the_end_of_an_episode():
    env = TransformedEnv(CountEnv(max_count=5), FrameSkipTransform(3))
    rollout = env.rollout(5)
    assert rollout.shape == (2,)  # done at count 5: never stepped past it
    assert rollout["next", "observation"][:, 0].tolist() == [3, 5]
    assert rollout["next", "reward"].squeeze(-1).tolist() == [3, 2]


def test_frameskip_nested_rewards():
    env = TransformedEnv(NestedDoneEnv(), FrameSkipTransform(4))
    rollout = env.rollout(2)
    assert (rollout["next", "data", "reward"] == 4).all()
    assert (rollout["next", "data", "observation"][-1] == 8).all()


def test_frameskip_matches_the_same_actions_repeated():
    skip = 3
    actions = torch.rand(6, 1)
    base = CountEnv()
    td = base.reset()
    for action in actions:
        for _ in range(skip):
            td = base.step(td.set("action", action))
            td = td["next"].exclude("reward")
    env = TransformedEnv(CountEnv(), FrameSkipTransform(skip))
    td2 = env.reset()
    for action in actions:
        td2 = env.step(td2.set("action", action))["next"]
    assert (td2["observation"] == td["observation"]).all()


def test_frameskip_errors_without_env():
    with pytest.raises(ValueError, match="frame_skip should have a value greater or equal to one"):
        FrameSkipTransform(0)
    t = FrameSkipTransform(2)
    td = TensorDict({"next": {}}, [])
    with pytest.raises(RuntimeError, match="parent not found for FrameSkipTransform"):
        t._step(td, td.get("next"))
    with pytest.raises(RuntimeError, match="parent not found for FrameSkipTransform"):
        Compose(FrameSkipTransform(2))._step(td, td.get("next"))
    with pytest.raises(RuntimeError, match="can only be used when appended to a transformed env"):
        nn.Sequential(t, nn.Identity())(TensorDict())
    with pytest.raises(RuntimeError, match="can only be used when appended to a transformed env"):
        t(TensorDict({"a": torch.zeros(10)}, [10]))  # a replay-buffer sample
    assert t.inv(td) is not td and not t.has_inverse


# ---------------------------------------------------------------------------- NoopResetEnv
def test_noop_single_trans_env_check():
    check_env_specs(TransformedEnv(CountEnv(), NoopResetEnv()))


@pytest.mark.parametrize("random", [True, False])
@pytest.mark.parametrize("compose", [True, False])
def test_noop_transform_env(random, compose):
    torch.manual_seed(0)
    noop = NoopResetEnv(noops=10, random=random)
    if compose:
        env = TransformedEnv(CountEnv(), StepCounter())
        env.append_transform(noop)
    else:
        env = TransformedEnv(CountEnv(), Compose(StepCounter(), noop))
    td = env.reset()
    steps = td["step_count"].item()
    assert 0 <= steps < 10 if random else steps == 10
    assert td["observation"][0].item() == steps  # the env really stepped
    assert "reward" not in td.keys() and "action" not in td.keys()
    rollout = env.rollout(3)
    assert rollout["step_count"][0].item() == rollout["observation"][0, 0].item()


@pytest.mark.parametrize("noops,max_count", [(0, 0), (2, 5), (8, 9), (2, 1)])
def test_noop_reset_limit(noops, max_count):
    env = TransformedEnv(CountEnv(max_count=max_count), NoopResetEnv(noops=noops, random=False))
    if noops < max_count or noops == 0:
        assert env.reset()["observation"][0].item() == noops
    else:
        with pytest.raises(RuntimeError, match="repeatedly done or truncated"):
            env.reset()


def test_noop_refuses_batched_envs():
    env = TransformedEnv(CountEnv((2,)), NoopResetEnv())
    with pytest.raises(ValueError, match="The parent environment batch-size is non-null"):
        check_env_specs(env)


def test_noop_without_env():
    t = NoopResetEnv()
    td = TensorDict({"next": {}}, [])
    with pytest.raises(RuntimeError, match=re.escape("NoopResetEnv.parent not found")):
        t._reset(td, td.empty())
    with pytest.raises(RuntimeError, match=re.escape("NoopResetEnv.parent not found")):
        Compose(NoopResetEnv())._reset(td, td.empty())
    Compose(NoopResetEnv())._step(td, td.get("next"))  # steps are untouched
    model = nn.Sequential(NoopResetEnv(), nn.Identity())
    assert model(TensorDict()).is_empty()
    sample = TensorDict(batch_size=[10])
    assert t(sample) is sample and t.inv(sample).batch_size == (10,)
    with pytest.raises(ValueError, match="non-negative integer"):
        NoopResetEnv(noops=-1)


# ---------------------------------------------------------------------------- EndOfLife
class LivesEnv(EnvBase):
    """Loses a life every `every` steps; done when no life is left; `write_lives` puts them in
    the outputs (as a Gym env with an info reader of "lives" does)."""

    def __init__(self, batch_size=(), lives=3, every=2, write_lives=False) -> None:
        super().__init__(batch_size=torch.Size(batch_size))
        b = self.batch_size
        self.start, self.every, self.write_lives = lives, every, write_lives
        spec = {"observation": Unbounded((*b, 1))}
        if write_lives:
            spec["lives"] = Unbounded(b, dtype=torch.int64)
        self.observation_spec = Composite(spec, shape=b)
        self.action_spec = Unbounded((*b, 1))
        self.reward_spec = Unbounded((*b, 1))
        self.done_spec = Categorical(2, (*b, 1), dtype=torch.bool)
        self.t = 0
        self.lives_left = lives

    def lives(self) -> int:
        return self.lives_left

    def _out(self, **extra) -> TensorDictBase:
        b = self.batch_size
        out = {"observation": torch.full((*b, 1), float(self.t)), **extra}
        if self.write_lives:
            out["lives"] = torch.full(b, self.lives_left, dtype=torch.int64)
        out["done"] = torch.full((*b, 1), self.lives_left == 0)
        return TensorDict(out, b)

    def _reset(self, tensordict):
        self.t, self.lives_left = 0, self.start
        return self._out()

    def _step(self, tensordict):
        self.t += 1
        if self.t % self.every == 0:
            self.lives_left -= 1
        return self._out(reward=torch.ones((*self.batch_size, 1)))

    def _set_seed(self, seed):
        return None


@pytest.mark.parametrize("eol_key", ["eol_key", ("nested", "eol")])
@pytest.mark.parametrize("lives_key", ["lives_key", ("nested", "lives")])
def test_eol_single_trans_env_check(eol_key, lives_key):
    env = TransformedEnv(
        LivesEnv(),
        EndOfLifeTransform(eol_key=eol_key, lives_key=lives_key, eol_attribute="lives"),
    )
    with pytest.warns(UserWarning, match="The base_env is not a gym env. Compatibility of"):
        check_env_specs(env)


@pytest.mark.parametrize("write_lives", [False, True])
def test_eol_transform_env(write_lives):
    env = TransformedEnv(
        LivesEnv(lives=3, every=2, write_lives=write_lives),
        EndOfLifeTransform(eol_attribute="lives"),
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        # torchrl 0.4 warns for any base env but a GymWrapper, lives read from data or not
        warnings.filterwarnings("ignore", "The base_env is not a gym env")
        rollout = env.rollout(10)
    eol = rollout["next", "end-of-life"].squeeze(-1)
    assert eol.tolist() == [False, True, False, True, False, True]
    assert rollout["next", "lives"].tolist() == [3, 2, 2, 1, 1, 0]
    assert rollout["next", "done"].squeeze(-1).tolist()[-1]
    assert not rollout["end-of-life"][0].any()  # reset


def test_eol_lives_from_data_in_a_batched_env():
    env = TransformedEnv(LivesEnv((3,), write_lives=True), EndOfLifeTransform())
    # torchrl 0.4 warns whenever the base env is not a GymWrapper, lives read from data or not
    with pytest.warns(UserWarning, match="The base_env is not a gym env"):
        check_env_specs(env)
        rollout = env.rollout(4)
    assert rollout["next", "end-of-life"].shape == (3, 4, 1)
    assert (
        rollout["next", "end-of-life"][:, 1].all()
        and not rollout["next", "end-of-life"][:, 0].any()
    )


def test_eol_unreadable_lives_say_what_to_do():
    env = TransformedEnv(CountEnv(), EndOfLifeTransform())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(RuntimeError, match="default_info_dict_reader"):
            env.reset()
    with pytest.raises(KeyError, match="not in the done spec"):
        TransformedEnv(CountEnv(), EndOfLifeTransform(done_key="nope"))


def test_eol_register_keys():
    class Loss:
        def set_keys(self, **keys):
            self.keys = keys

    loss = Loss()
    EndOfLifeTransform(eol_key="eol").register_keys(loss)
    assert loss.keys == {"done": "eol", "terminated": "eol"}


def test_eol_without_env():
    t = EndOfLifeTransform()
    with pytest.raises(RuntimeError, match=re.escape(t.NO_PARENT_ERR.format(type(t)))):
        t._step(TensorDict(), TensorDict())
    with pytest.raises(RuntimeError, match=re.escape(t.NO_PARENT_ERR.format(type(t)))):
        Compose(EndOfLifeTransform())._step(TensorDict(), TensorDict())
    with pytest.raises(RuntimeError, match=re.escape(FORWARD_NOT_IMPLEMENTED.format(type(t)))):
        nn.Sequential(t)(TensorDict())
    td = TensorDict(a=torch.zeros(1))
    assert t.inv(td)["a"] is td["a"]


def test_random_done_env_under_frameskip_stops_per_batch():
    env = TransformedEnv(RandomDoneEnv((3,), p_done=0.5), FrameSkipTransform(4))
    rollout = env.rollout(5, break_when_any_done=False)
    assert (rollout["next", "reward"] >= 1).all() and (rollout["next", "reward"] <= 4).all()

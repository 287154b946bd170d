"""VecGymEnvTransform: the final observations of a self-resetting vector env put back in place
(torchrl 0.4's contract), and its pass-through on rllibs' GymEnv(..., num_envs=N)."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase, check_env_specs
from rlspecs import Categorical, Composite, Unbounded
from rltransforms import TransformedEnv, VecGymEnvTransform
from rltransforms._vec_gym_env_transform import FORWARD_NOT_IMPLEMENTED

pytestmark = pytest.mark.filterwarnings("error")

MISMATCH = "Cannot partially reset a gym(nasium) async env with a reset mask that does not match"


class SelfResettingEnv(EnvBase):
    """Sub-env `i` counts steps and ends its episode after `lengths[i]` of them, starting the
    next one within that step, as Gym's vector envs do: the step returns the new episode's
    first observation (0) and writes the final one under `"final"`. A reset with a `"_reset"`
    mask does nothing, as torchrl 0.4's GymWrapper of a vector env."""

    def __init__(self, lengths=(2, 3)) -> None:
        super().__init__(batch_size=torch.Size([len(lengths)]))
        b = self.batch_size
        self.lengths = torch.tensor(lengths).unsqueeze(-1)
        obs = Unbounded((*b, 1))
        self.observation_spec = Composite(
            observation=obs, final=Composite(observation=obs.clone(), shape=b), shape=b
        )
        self.action_spec = Unbounded((*b, 1))
        self.reward_spec = Unbounded((*b, 1))
        self.done_spec = Categorical(2, (*b, 1), dtype=torch.bool)
        self.count = torch.zeros(*b, 1)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if tensordict is not None and "_reset" in tensordict.keys():
            return tensordict.exclude("_reset")  # the step already reset the finished sub-envs
        self.count = torch.zeros_like(self.count)
        return TensorDict(
            observation=self.count.clone(),
            final=TensorDict(observation=torch.zeros_like(self.count), batch_size=self.batch_size),
            batch_size=self.batch_size,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count = self.count + 1
        done = self.count >= self.lengths
        final = torch.where(done, self.count, 0.0)
        self.count = torch.where(done, 0.0, self.count)
        return TensorDict(
            observation=self.count.clone(),
            final=TensorDict(observation=final, batch_size=self.batch_size),
            reward=torch.ones_like(self.count),
            done=done,
            batch_size=self.batch_size,
        )

    def _set_seed(self, seed):
        return seed


def _counts(length: int, steps: int, start: int) -> list[float]:
    return [float((start + t) % length) for t in range(steps)]


def test_steps_end_on_the_final_observation_and_resets_restore_the_reset_one():
    env = TransformedEnv(SelfResettingEnv((2, 3)), VecGymEnvTransform())
    rollout = env.rollout(7, break_when_any_done=False)
    for i, length in enumerate((2, 3)):
        # the true next observation: 1, ..., length, then again from 1
        assert rollout["next", "observation"][i].squeeze(-1).tolist() == [
            c + 1 for c in _counts(length, 7, 0)
        ]
        # the root of each step after a done: the new episode's first observation
        assert rollout["observation"][i].squeeze(-1).tolist() == _counts(length, 7, 0)
    assert rollout["next", "done"].sum() == 3 + 2


def test_without_the_transform_the_final_observation_is_lost():
    rollout = SelfResettingEnv((2, 3)).rollout(3, break_when_any_done=False)
    assert rollout["next", "observation"][0].squeeze(-1).tolist()[1] == 0.0


def test_final_entry_leaves_the_specs_and_the_data():
    env = TransformedEnv(SelfResettingEnv(), VecGymEnvTransform())
    assert "final" not in env.observation_spec.keys()
    check_env_specs(env)
    rollout = env.rollout(4, break_when_any_done=False)
    assert "final" not in rollout.keys() and "final" not in rollout["next"].keys()


def test_a_partial_reset_must_follow_the_done_mask():
    env = TransformedEnv(SelfResettingEnv((2, 3)), VecGymEnvTransform())
    td = env.rand_step(env.reset())
    td = env.rand_step(td["next"].exclude("reward"))  # sub-env 0 is done
    assert td["next", "done"].squeeze(-1).tolist() == [True, False]
    with pytest.raises(RuntimeError, match=re.escape(MISMATCH)):
        env.reset(TensorDict(_reset=torch.tensor([[False], [True]]), batch_size=[2]))
    env.reset()  # a full reset is always fine


def test_forward_needs_an_env():
    t = VecGymEnvTransform()
    with pytest.raises(RuntimeError, match=re.escape(FORWARD_NOT_IMPLEMENTED.format(type(t)))):
        t(TensorDict())


# ---------------------------------------------------------------- rllibs' GymEnv(num_envs=N)
def _gym_env(transform: bool, autoreset_mode: str = "NextStep"):
    pytest.importorskip("gymnasium", reason="the GymEnv cases need gymnasium")
    rllibs = pytest.importorskip("rllibs", reason="the GymEnv cases need rllibs")
    env = rllibs.GymEnv("CartPole-v1", num_envs=3, vector_kwargs={"autoreset_mode": autoreset_mode})
    return TransformedEnv(env, VecGymEnvTransform()) if transform else env


@pytest.mark.parametrize("autoreset_mode", ["NextStep", "SameStep", "Disabled"])
def test_gym_env_num_envs_rolls_out_as_without_the_transform(autoreset_mode):
    # rllibs' vector GymEnv already returns the final observations and resets per mask
    rollouts = []
    for transform in (True, False):
        env = _gym_env(transform, autoreset_mode)
        env.set_seed(0)
        torch.manual_seed(0)
        rollouts.append(env.rollout(40, break_when_any_done=False))
        env.close()
    assert rollouts[0]["next", "done"].any()
    assert (rollouts[0] == rollouts[1]).all()


def test_gym_env_num_envs_partial_reset_must_follow_the_done_mask():
    env = _gym_env(True)
    env.set_seed(0)
    td = env.reset()
    for _ in range(200):
        td = env.rand_step(td)
        if td["next", "done"].any():
            break
        td = td["next"].exclude("reward")
    done = td["next", "done"]
    assert done.any() and not done.all()
    with pytest.raises(RuntimeError, match=re.escape(MISMATCH)):
        env.reset(TensorDict(_reset=~done, batch_size=[3]))
    env.close()

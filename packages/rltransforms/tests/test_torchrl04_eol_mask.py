"""EndOfLifeTransform's warning and ActionMask's errors, with torchrl 0.4's texts."""

from __future__ import annotations

import re
import warnings

import pytest
import torch
from _transform_envs import CountEnv, MaskedEnv
from tensordict import TensorDict

from rlcore import EnvBase, check_env_specs
from rlspecs import Categorical, Composite, Unbounded
from rltransforms import ActionMask, EndOfLifeTransform, TransformedEnv
from rltransforms._action import MASK_FORWARD_ERROR, MASK_NO_PARENT_ERROR
from rltransforms._env_steps import EOL_NOT_GYM_WARNING

pytestmark = pytest.mark.filterwarnings("error")

NOT_GYM = "The base_env is not a gym env. Compatibility of"


class LivesEnv(EnvBase):
    """Loses a life every other step and writes the lives in its outputs (as a Gym env with an
    info reader of "lives" does); also exposes them as `lives()`."""

    def __init__(self, batch_size=()) -> None:
        super().__init__(batch_size=torch.Size(batch_size))
        b = self.batch_size
        self.observation_spec = Composite(
            observation=Unbounded((*b, 1)), lives=Unbounded(b, dtype=torch.int64), shape=b
        )
        self.action_spec = Unbounded((*b, 1))
        self.reward_spec = Unbounded((*b, 1))
        self.done_spec = Categorical(2, (*b, 1), dtype=torch.bool)
        self.t = 0

    def lives(self) -> int:
        return 3 - self.t // 2

    def _out(self) -> TensorDict:
        b = self.batch_size
        return TensorDict(
            observation=torch.full((*b, 1), float(self.t)),
            lives=torch.full(b, self.lives(), dtype=torch.int64),
            reward=torch.ones(*b, 1),
            done=torch.zeros(*b, 1, dtype=torch.bool),
            batch_size=b,
        )

    def _reset(self, tensordict):
        self.t = 0
        return self._out().exclude("reward")

    def _step(self, tensordict):
        self.t += 1
        return self._out()

    def _set_seed(self, seed):
        return None


class GymWrapper(LivesEnv):
    """Named as rllibs' GymWrapper: torchrl 0.4 warns for any other base env."""


class GymLikeEnv(LivesEnv):
    """Named as rllibs' GymLikeEnv (DMControl's base): not a GymWrapper, so torchrl 0.4 warns."""


# ------------------------------------------------------------------------ EndOfLifeTransform
@pytest.mark.parametrize("batch_size", [(), (2,)])
def test_eol_warns_when_lives_come_from_a_non_gym_env_s_outputs(batch_size):
    env = TransformedEnv(LivesEnv(batch_size), EndOfLifeTransform())
    with pytest.warns(UserWarning, match=NOT_GYM):
        env.reset()
    with pytest.warns(UserWarning, match=NOT_GYM):
        env.rand_step(env.reset())


def test_eol_warns_for_a_gym_like_env_that_is_not_a_gym_wrapper():
    env = TransformedEnv(GymLikeEnv(), EndOfLifeTransform(eol_attribute="lives"))
    message = re.escape(EOL_NOT_GYM_WARNING.format(cls=EndOfLifeTransform))
    with pytest.warns(UserWarning, match=message):
        env.rollout(3)


def test_eol_does_not_warn_for_a_gym_wrapper():
    env = TransformedEnv(GymWrapper(), EndOfLifeTransform(eol_attribute="lives"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env_specs(env)
        rollout = env.rollout(4)
    assert rollout["next", "end-of-life"].squeeze(-1).tolist() == [False, True, False, True]


# -------------------------------------------------------------------------------- ActionMask
def test_action_mask_spec_error_has_torchrl_04_text_and_names_the_key():
    env = TransformedEnv(CountEnv(), ActionMask(action_key="action", mask_key="action_mask"))
    with pytest.raises(ValueError, match=r"^The action spec must be one of \(") as info:
        env.reset()
    message = str(info.value)
    assert "Got <class " in message and "Unbounded" in message and "'action'" in message


def test_action_mask_without_env_has_torchrl_04_texts():
    mask = TensorDict(action_mask=torch.ones(4, dtype=torch.bool))
    with pytest.raises(
        RuntimeError, match=r"^class <class '.*ActionMask'> cannot be executed without a parent"
    ):
        ActionMask()(mask)
    with pytest.raises(RuntimeError, match=re.escape(MASK_FORWARD_ERROR.format(cls=ActionMask))):
        ActionMask()(mask)
    with pytest.raises(RuntimeError, match=r"^<class '.*ActionMask'>\.parent cannot be None"):
        ActionMask()._call(mask)
    with pytest.raises(RuntimeError, match=re.escape(MASK_NO_PARENT_ERROR.format(cls=ActionMask))):
        ActionMask()._call(mask)


@pytest.mark.parametrize(("arg", "name"), [("action_key", "action key"), ("mask_key", "mask key")])
def test_action_mask_key_type_error_has_torchrl_04_text(arg, name):
    with pytest.raises(ValueError, match=rf"^The {name} must be a nested key. Got <class 'int'>"):
        ActionMask(**{arg: 3})


def test_action_mask_still_works_with_a_masked_env():
    env = TransformedEnv(MaskedEnv(), ActionMask())
    check_env_specs(env)
    assert env.rollout(10)["next", "done"][-1].all()

"""ModelBasedEnvBase: world-model steps, unlocked batch, seeding warning, params swap."""

from __future__ import annotations

import pytest
import torch
from _rlcore_envs import DummyModelBasedEnv, LinearWorldModel
from tensordict import TensorDict

from rlcore import check_env_specs
from rlcore._model_based import SEED_WARNING


def test_model_based_rollout_keys_and_shapes():
    torch.manual_seed(0)
    env = DummyModelBasedEnv(LinearWorldModel(), batch_size=(10,))
    check_env_specs(env)
    out = env.rollout(20)
    assert set(out.keys(True)) == {
        "action",
        "hidden_observation",
        "done",
        "terminated",
        "next",
        ("next", "hidden_observation"),
        ("next", "reward"),
        ("next", "done"),
        ("next", "terminated"),
    }
    assert out["next", "hidden_observation"].shape == (10, 20, 4)


def test_model_based_env_is_not_batch_locked():
    env = DummyModelBasedEnv(LinearWorldModel(), batch_size=(10,))
    assert not env.batch_locked
    td = env.rand_action(env.reset())
    env.step(td)
    with pytest.raises(RuntimeError, match="Expected a tensordict with shape==env.batch_size"):
        env.step(td.unsqueeze(-1).expand(10, 2).reshape(-1).to_tensordict())
    env = DummyModelBasedEnv(LinearWorldModel())
    td = env.rand_action(env.reset())
    out = env.step(td.expand(2).clone())
    assert out["next", "hidden_observation"].shape == (2, 4)


def test_model_based_step_does_not_touch_the_input():
    env = DummyModelBasedEnv(LinearWorldModel())
    td = env.rand_action(env.reset())
    hidden = td["hidden_observation"]
    env.step(td)
    assert td["hidden_observation"] is hidden
    assert "reward" not in td.keys()


def test_model_based_set_seed_warns():
    env = DummyModelBasedEnv(LinearWorldModel())
    with pytest.warns(UserWarning, match=SEED_WARNING):
        env.set_seed(0)


def test_model_based_params_are_swapped_in():
    model = LinearWorldModel()
    params = TensorDict.from_module(model).clone().zero_()
    env = DummyModelBasedEnv(model)
    env.__dict__["world_model_params"] = params
    td = env.step(env.rand_action(env.reset()))
    assert (td["next", "hidden_observation"] == 0).all()
    assert (model.transition.weight != 0).any()


def test_model_based_set_specs_from_env():
    source = DummyModelBasedEnv(LinearWorldModel(), batch_size=(2,))
    env = DummyModelBasedEnv(LinearWorldModel(), batch_size=(2,))
    env.observation_spec = source.observation_spec.empty()
    env.set_specs_from_env(source)
    assert env.observation_keys == ["hidden_observation"]
    assert env.dtype is None

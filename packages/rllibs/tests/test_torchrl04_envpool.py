"""EnvPool resets whose "_reset" mask selects no sub-env: a no-op, as in torchrl 0.4 (issue 29)."""

from __future__ import annotations

import re

import pytest
import torch
from tensordict import TensorDict

from rlspecs import Bounded

envpool = pytest.importorskip("envpool")

from rllibs import MultiThreadedEnv, default_info_dict_reader  # noqa: E402
from rllibs._envpool import PARTIAL_SEED  # noqa: E402


def _elapsed_reader():
    spec = [Bounded(0, 10**6, shape=(), dtype=torch.int32)]
    return default_info_dict_reader(["elapsed_step"], spec=spec)


def _stepped(env, steps):
    """``env`` reset, then stepped ``steps`` times with zero actions: the last root."""
    td = env.reset()
    action = torch.zeros(env.action_spec.shape)
    for _ in range(steps):
        td = env.step(td.set("action", action))["next"].clone()
    return td


def _nothing(env):
    return torch.zeros(*env.batch_size, 1, dtype=torch.bool)


def test_a_mask_selecting_nothing_keeps_every_row():
    env = MultiThreadedEnv(3, "Pendulum-v1").set_info_dict_reader(_elapsed_reader())
    td = _stepped(env, 2)
    before = td.clone()
    td["_reset"] = _nothing(env)
    out = env.reset(td)
    assert "_reset" not in out.keys()
    torch.testing.assert_close(out["observation"], before["observation"])
    assert out["elapsed_step"].tolist() == [2, 2, 2]
    env.close()


def test_a_mask_selecting_nothing_returns_the_current_observations_of_every_row():
    env = MultiThreadedEnv(3, "Pendulum-v1")
    td = _stepped(env, 2)
    out = env.reset(TensorDict({"_reset": _nothing(env)}, batch_size=env.batch_size))
    torch.testing.assert_close(out["observation"], td["observation"])
    assert not out["done"].any() and not out["terminated"].any() and not out["truncated"].any()
    env.close()


def test_episodes_go_on_after_a_reset_selecting_nothing():
    env = MultiThreadedEnv(2, "Pendulum-v1").set_info_dict_reader(_elapsed_reader())
    td = _stepped(env, 3)
    td["_reset"] = _nothing(env)
    td = env.reset(td)
    td = env.step(td.set("action", torch.zeros(2, 1)))["next"]
    assert td["elapsed_step"].tolist() == [4, 4]  # no sub-env was restarted
    env.close()


def test_rows_outside_a_partial_reset_stay_current_for_a_later_reset_selecting_nothing():
    env = MultiThreadedEnv(3, "Pendulum-v1")
    td = _stepped(env, 2)
    td["_reset"] = torch.tensor([[False], [True], [False]])
    after_partial = env.reset(td).clone()
    out = env.reset(TensorDict({"_reset": _nothing(env)}, batch_size=env.batch_size))
    torch.testing.assert_close(out["observation"], after_partial["observation"])
    env.close()


def test_async_mode_resets_nothing_for_a_mask_selecting_nothing():
    env = MultiThreadedEnv(4, "CartPole-v1", create_env_kwargs={"batch_size": 2})
    td = env.reset()
    td = env.step(td.set("action", torch.zeros(2, dtype=torch.int64)))["next"].clone()
    out = env.reset(TensorDict({"_reset": _nothing(env)}, batch_size=env.batch_size))
    torch.testing.assert_close(out["observation"], td["observation"])
    assert out["env_id"].tolist() == td["env_id"].tolist()
    env.close()


def test_a_seed_with_a_mask_selecting_nothing_still_needs_a_full_reset():
    env = MultiThreadedEnv(2, "Pendulum-v1")
    td = env.reset()
    td["_reset"] = _nothing(env)
    with pytest.raises(ValueError, match=re.escape(PARTIAL_SEED.format(seed=3))):
        env.reset(td, seed=3)
    env.close()

"""gSDENoise, BurnInTransform and AutoResetTransform/AutoResetEnv (torchrl 0.4's)."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv
from tensordict import TensorDict
from tensordict.nn import TensorDictModule
from torch import nn

from rlcore import EnvBase, check_env_specs
from rlcore._env_meta import REPLACE_WITHOUT_AUTO_RESET
from rlspecs import Categorical, Composite, Unbounded
from rltransforms import (
    AutoResetEnv,
    AutoResetTransform,
    BurnInTransform,
    Compose,
    StepCounter,
    TransformedEnv,
    gSDENoise,
)
from rltransforms._auto_reset import (
    CONTAINER_ERROR,
    FORWARD_ERROR,
    HETEROGENEOUS_ERROR,
    INSERT_ERROR,
)
from rltransforms._burn_in import (
    BURN_IN_ERROR,
    ENV_ERROR,
    NEXT_OUT_KEY_WARNING,
    NO_TIME_DIM_ERROR,
    NOT_A_MODULE_ERROR,
    NOT_WRITTEN_ERROR,
    TOO_SHORT_ERROR,
)
from rltransforms._gsde import BAD_DIM_ERROR, ONE_DIM_ERROR
from rltransforms._primers import RANDOM_AND_DEFAULT_ERROR

pytestmark = pytest.mark.filterwarnings("error")


# ---------------------------------------------------------------------------- gSDENoise
@pytest.mark.parametrize("batch", [(), (2,)])
@pytest.mark.parametrize("dims", [(None, None), (3, 2)])
def test_gsde_env_check_specs_and_carry(batch, dims):
    """The noise is in the specs, written at reset and carried unchanged from step to step."""
    state_dim, action_dim = dims
    env = TransformedEnv(CountEnv(batch), gSDENoise(state_dim=state_dim, action_dim=action_dim))
    check_env_specs(env)
    tail = (1,) if state_dim is None else (action_dim, state_dim)
    assert env.observation_spec["_eps_gSDE"].shape == (*batch, *tail)
    assert env.state_spec["_eps_gSDE"].shape == (*batch, *tail)
    rollout = env.rollout(4)
    noise = rollout["_eps_gSDE"]
    assert noise.shape == (*batch, 4, *tail)
    first = noise[..., :1, :, :] if state_dim is not None else noise[..., :1, :]
    assert (noise == first).all()
    assert (rollout["next", "_eps_gSDE"] == noise).all()


def test_gsde_without_dims_is_a_zero_placeholder():
    env = TransformedEnv(CountEnv((2,)), gSDENoise())
    td = env.reset()
    assert td["_eps_gSDE"].shape == (2, 1)
    assert (td["_eps_gSDE"] == 0).all()
    assert not gSDENoise().random


def test_gsde_with_dims_draws_normal_noise_at_each_reset():
    torch.manual_seed(0)
    env = TransformedEnv(CountEnv(), gSDENoise(state_dim=50, action_dim=40))
    first = env.reset()["_eps_gSDE"]
    second = env.reset()["_eps_gSDE"]
    assert first.shape == (40, 50)
    assert not torch.equal(first, second)
    # a standard normal draw, not the placeholder's zeros
    assert abs(first.mean().item()) < 0.1 and abs(first.std().item() - 1) < 0.1


def test_gsde_partial_reset_redraws_only_the_reset_envs():
    env = TransformedEnv(CountEnv((3,)), gSDENoise(state_dim=4, action_dim=2))
    td = env.reset()
    before = td["_eps_gSDE"].clone()
    td["_reset"] = torch.tensor([[True], [False], [False]])
    after = env.reset(td)["_eps_gSDE"]
    assert not torch.equal(after[0], before[0])
    assert torch.equal(after[1:], before[1:])


def test_gsde_noise_gets_the_batch_dim_even_when_the_batch_is_action_dim():
    # torchrl 0.4 compared the spec's leading dims with the batch: (action_dim, state_dim)
    # noise in an env of batch (action_dim,) was taken as already batched
    env = TransformedEnv(CountEnv((2,)), gSDENoise(state_dim=3, action_dim=2))
    assert env.reset()["_eps_gSDE"].shape == (2, 2, 3)
    assert gSDENoise(state_dim=3, action_dim=2)(TensorDict(batch_size=[2]))["_eps_gSDE"].shape == (
        2,
        2,
        3,
    )


def test_gsde_shape_gives_leading_dims_and_standalone_call():
    t = gSDENoise(state_dim=3, action_dim=2, shape=(4,))
    td = t(TensorDict(batch_size=[4]))
    assert td["_eps_gSDE"].shape == (4, 2, 3)
    env = TransformedEnv(CountEnv((4,)), gSDENoise(shape=(4,)))
    assert env.reset()["_eps_gSDE"].shape == (4, 1)  # already the batch dims: not expanded


def test_gsde_default_value_and_compose():
    env = TransformedEnv(CountEnv(), Compose(gSDENoise(default_value=2.0), StepCounter()))
    check_env_specs(env)
    rollout = env.rollout(3)
    assert (rollout["next", "_eps_gSDE"] == 2.0).all()
    assert rollout["next", "step_count"].squeeze(-1).tolist() == [1, 2, 3]
    assert "gSDENoise(state_dim=None, action_dim=None" in repr(env.transform[0])


@pytest.mark.parametrize("dims", [(3, None), (None, 2)])
def test_gsde_one_dim_only_raises(dims):
    state_dim, action_dim = dims
    message = ONE_DIM_ERROR.format(state_dim=state_dim, action_dim=action_dim)
    with pytest.raises(ValueError, match=re.escape(message)):
        gSDENoise(state_dim=state_dim, action_dim=action_dim)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_gsde_bad_dim_raises(bad):
    with pytest.raises(
        ValueError, match=re.escape(BAD_DIM_ERROR.format(name="state_dim", value=bad))
    ):
        gSDENoise(state_dim=bad, action_dim=2)


def test_gsde_random_noise_refuses_a_default_value():
    with pytest.raises(ValueError, match=re.escape(RANDOM_AND_DEFAULT_ERROR)):
        gSDENoise(state_dim=3, action_dim=2, default_value=1.0)


# ---------------------------------------------------------------------------- BurnInTransform
def _cumsum_module(out_key=("next", "hidden")):
    """hidden(t+1) = hidden(0) + obs(0) + ... + obs(t), over a [B, T] sequence."""
    return TensorDictModule(
        lambda obs, hidden: hidden[:, :1] + obs.cumsum(1),
        in_keys=["obs", "hidden"],
        out_keys=[out_key],
    )


def _sequences(batch=2, time=6, features=3):
    torch.manual_seed(0)
    return TensorDict(
        obs=torch.randn(batch, time, features),
        hidden=torch.randn(batch, time, features),
        other=torch.arange(batch * time).reshape(batch, time),
        batch_size=[batch, time],
    )


def test_burn_in_returns_the_rest_with_the_burnt_in_state():
    td = _sequences()
    original = td.clone()
    out = BurnInTransform(_cumsum_module(), burn_in=4)(td)
    assert out.batch_size == (2, 2)
    expected = original["hidden"][:, 0] + original["obs"][:, :4].sum(1)
    torch.testing.assert_close(out["hidden"][:, 0], expected)
    assert torch.equal(out["hidden"][:, 1], original["hidden"][:, 5])  # later steps as stored
    assert torch.equal(out["obs"], original["obs"][:, 4:])
    assert torch.equal(out["other"], original["other"][:, 4:])
    assert ("next", "hidden") not in out.keys(True)
    assert (td == original).all()  # the input is left as it was


class _GRUSeq(nn.Module):
    """A GRU over [B, T, F] started from the stored hidden state of the first step."""

    def __init__(self) -> None:
        super().__init__()
        self.gru = nn.GRU(3, 3, batch_first=True)

    def forward(self, obs, hidden):
        out, _ = self.gru(obs, hidden[:, 0].unsqueeze(0).contiguous())
        return out


def test_burn_in_with_a_recurrent_module_matches_running_it_by_hand():
    td = _sequences()
    gru = _GRUSeq()
    module = TensorDictModule(gru, in_keys=["obs", "hidden"], out_keys=[("next", "hidden")])
    out = BurnInTransform([module], burn_in=3)(td)
    with torch.no_grad():
        by_hand = gru(td["obs"][:, :3], td["hidden"][:, :3])[:, -1]
    torch.testing.assert_close(out["hidden"][:, 0], by_hand)
    assert not out["hidden"].requires_grad  # the burn-in runs without gradients


def test_burn_in_runs_the_modules_in_order():
    double = TensorDictModule(
        lambda h: h * 2, in_keys=[("next", "hidden")], out_keys=[("next", "hidden")]
    )
    t = BurnInTransform(nn.ModuleList([_cumsum_module(), double]), burn_in=2)
    td = _sequences()
    out = t(td)
    expected = 2 * (td["hidden"][:, 0] + td["obs"][:, :2].sum(1))
    torch.testing.assert_close(out["hidden"][:, 0], expected)
    assert t.in_keys == ["obs", "hidden", ("next", "hidden")]
    assert t.out_keys == ["hidden"]


def test_burn_in_out_keys_default_to_next_entries_and_strip_next():
    module = _cumsum_module(out_key=("next", "rec", "h"))
    assert BurnInTransform(module, burn_in=1).out_keys == [("rec", "h")]
    with pytest.warns(
        UserWarning, match=re.escape(NEXT_OUT_KEY_WARNING.format(key=("next", "hidden")))
    ):
        t = BurnInTransform(_cumsum_module(), burn_in=1, out_keys=[("next", "hidden")])
    assert t.out_keys == ["hidden"]


def test_burn_in_creates_a_missing_out_key_from_zeros():
    module = _cumsum_module(out_key=("next", "fresh"))
    td = _sequences(time=5)
    out = BurnInTransform(module, burn_in=2)(td)
    expected = td["hidden"][:, 0] + td["obs"][:, :2].sum(1)
    torch.testing.assert_close(out["fresh"][:, 0], expected)
    assert (out["fresh"][:, 1:] == 0).all()
    assert "fresh" not in td.keys()


def test_burn_in_zero_returns_the_tensordict():
    td = _sequences()
    assert BurnInTransform(_cumsum_module(), burn_in=0)(td) is td


def test_burn_in_in_compose():
    td = _sequences()
    out = Compose(BurnInTransform(_cumsum_module(), burn_in=5))(td)
    assert out.batch_size == (2, 1)
    assert "BurnInTransform(burn_in=5" in repr(BurnInTransform(_cumsum_module(), burn_in=5))


def test_burn_in_rejects_a_plain_module():
    with pytest.raises(
        ValueError, match=re.escape(NOT_A_MODULE_ERROR.format(index=1, type="Linear"))
    ):
        BurnInTransform([_cumsum_module(), nn.Linear(2, 2)], burn_in=1)


@pytest.mark.parametrize("bad", [-1, 1.0, None])
def test_burn_in_rejects_a_bad_burn_in(bad):
    with pytest.raises(ValueError, match=re.escape(BURN_IN_ERROR.format(value=bad))):
        BurnInTransform(_cumsum_module(), burn_in=bad)


def test_burn_in_needs_steps_after_the_burn_in():
    t = BurnInTransform(_cumsum_module(), burn_in=6)
    message = TOO_SHORT_ERROR.format(burn_in=6, batch_size=[2, 6])
    with pytest.raises(ValueError, match=re.escape(message)):
        t(_sequences(time=6))
    with pytest.raises(ValueError, match=re.escape(NO_TIME_DIM_ERROR.format(batch_size=[]))):
        t(TensorDict(obs=torch.zeros(3)))


def test_burn_in_raises_when_the_modules_do_not_write_the_out_key():
    t = BurnInTransform(_cumsum_module(), burn_in=2, out_keys=["missing"])
    message = NOT_WRITTEN_ERROR.format(key=("next", "missing"), out_key="missing")
    with pytest.raises(KeyError, match=re.escape(message)):
        t(_sequences())


def test_burn_in_refuses_env_steps():
    env = TransformedEnv(CountEnv(), BurnInTransform(_cumsum_module(), burn_in=2))
    td = env.reset()
    with pytest.raises(RuntimeError, match=re.escape(ENV_ERROR)):
        env.rand_step(td)


# ---------------------------------------------------------------------------- AutoReset
class SelfResettingEnv(EnvBase):
    """Sub-env i ends its episode every `lengths[i]` steps and restarts within that step.

    Observations: `observation` (float count), `episode` (int64) and `even` (bool, count even).
    `_reset` (a real reset) zeroes everything and is counted in `real_resets`.
    """

    def __init__(self, lengths=(2, 3)) -> None:
        batch = torch.Size([len(lengths)])
        super().__init__(batch_size=batch)
        self.lengths = torch.tensor(lengths).unsqueeze(-1)
        self.observation_spec = Composite(
            observation=Unbounded((*batch, 1)),
            episode=Unbounded((*batch, 1), dtype=torch.int64),
            even=Categorical(2, (*batch, 1), dtype=torch.bool),
            shape=batch,
        )
        self.action_spec = Unbounded((*batch, 1))
        self.reward_spec = Unbounded((*batch, 1))
        self.count = torch.zeros(*batch, 1)
        self.episode = torch.zeros(*batch, 1, dtype=torch.int64)
        self.real_resets = 0

    def _obs(self) -> dict:
        return {
            "observation": self.count.clone(),
            "episode": self.episode.clone(),
            "even": self.count % 2 == 0,
        }

    def _reset(self, tensordict):
        self.real_resets += 1
        self.count.zero_()
        self.episode.zero_()
        return TensorDict(self._obs(), self.batch_size)

    def _step(self, tensordict):
        self.count += 1
        done = self.count >= self.lengths
        self.count[done] = 0
        self.episode[done] += 1
        out = {**self._obs(), "reward": torch.ones_like(self.count), "done": done}
        return TensorDict(out, self.batch_size)

    def _set_seed(self, seed):
        return None


def test_auto_reset_fills_done_steps_and_restarts_from_the_kept_observations():
    env = AutoResetEnv(SelfResettingEnv(), AutoResetTransform())
    rollout = env.rollout(7, break_when_any_done=False)
    done = rollout["next", "done"].squeeze(-1)
    assert done.tolist() == [
        [False, True, False, True, False, True, False],
        [False, False, True, False, False, True, False],
    ]
    nxt = rollout["next", "observation"].squeeze(-1)
    assert torch.isnan(nxt[done]).all() and not torch.isnan(nxt[~done]).any()
    assert (rollout["next", "episode"].squeeze(-1)[done] == -1).all()
    assert not rollout["next", "even"].squeeze(-1)[done].any()
    assert (
        rollout["next", "even"].squeeze(-1)[~done].tolist()
        == (rollout["next", "observation"].squeeze(-1)[~done] % 2 == 0).tolist()
    )
    # each step after an ending starts a new episode at 0, with the env's episode count
    assert rollout["observation"].squeeze(-1).tolist() == [
        [0, 1, 0, 1, 0, 1, 0],
        [0, 1, 2, 0, 1, 2, 0],
    ]
    assert rollout["episode"].squeeze(-1).tolist() == [[0, 0, 1, 1, 2, 2, 3], [0, 0, 0, 1, 1, 1, 2]]
    assert not rollout["done"].any()
    assert env.base_env.real_resets == 1  # only the first reset reached the base env


def test_auto_reset_check_env_specs():
    check_env_specs(AutoResetEnv(SelfResettingEnv(), AutoResetTransform()))


def test_auto_reset_break_when_any_done_stops_at_the_filled_step():
    env = AutoResetEnv(SelfResettingEnv(), AutoResetTransform())
    rollout = env.rollout(7)
    assert rollout.batch_size == (2, 2)
    assert torch.isnan(rollout["next", "observation"][0, 1]).all()


def test_auto_reset_replace_false_and_custom_fills():
    rollout = AutoResetEnv(SelfResettingEnv(), AutoResetTransform(replace=False)).rollout(
        3, break_when_any_done=False
    )
    assert rollout["next", "observation"].squeeze(-1).tolist() == [[1, 0, 1], [1, 2, 0]]
    transform = AutoResetTransform(fill_float=-5.0, fill_int=None, fill_bool=True)
    rollout = AutoResetEnv(SelfResettingEnv(), transform).rollout(3, break_when_any_done=False)
    assert rollout["next", "observation"].squeeze(-1).tolist() == [[1, -5, 1], [1, 2, -5]]
    assert rollout["next", "episode"].squeeze(-1).tolist() == [[0, 1, 1], [0, 0, 1]]
    assert rollout["next", "even"].squeeze(-1).tolist() == [
        [False, True, False],
        [False, True, True],
    ]


def test_auto_reset_constructor_flag():
    env = SelfResettingEnv(auto_reset=True)
    assert type(env) is AutoResetEnv and isinstance(env.transform, AutoResetTransform)
    assert isinstance(env.base_env, SelfResettingEnv)
    assert torch.isnan(env.rollout(2, break_when_any_done=False)["next", "observation"][0, 1]).all()
    env = SelfResettingEnv(lengths=(1,), auto_reset=True, auto_reset_replace=False)
    assert env.rollout(2, break_when_any_done=False)["next", "observation"].flatten().tolist() == [
        0,
        0,
    ]
    assert type(SelfResettingEnv(auto_reset=False)) is SelfResettingEnv


def test_auto_reset_replace_without_auto_reset_raises():
    message = REPLACE_WITHOUT_AUTO_RESET.format(cls="SelfResettingEnv", replace=False)
    with pytest.raises(ValueError, match=re.escape(message)):
        SelfResettingEnv(auto_reset_replace=False)


def test_auto_reset_transform_needs_an_auto_reset_env():
    env = TransformedEnv(SelfResettingEnv(), AutoResetTransform())
    message = CONTAINER_ERROR.format(container="a TransformedEnv")
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.reset()
    with pytest.raises(RuntimeError, match=re.escape(FORWARD_ERROR)):
        AutoResetTransform()(TensorDict())


def test_auto_reset_fresh_reset_drops_the_kept_observations():
    env = AutoResetEnv(SelfResettingEnv(lengths=(1, 1)), AutoResetTransform())
    td = env.rand_step(env.reset())
    assert td["next", "done"].all()
    td = env.reset()  # a fresh start: the base env resets, nothing kept comes back
    assert env.base_env.real_resets == 2
    assert (td["episode"] == 0).all()


def test_auto_reset_a_later_step_makes_the_kept_observations_stale():
    env = AutoResetEnv(SelfResettingEnv(lengths=(2, 5)), AutoResetTransform())
    root = env._step_mdp(env.rand_step(env.reset()))
    root = env._step_mdp(env.rand_step(root))  # sub-env 0 done here: observation kept
    assert torch.isnan(root["observation"][0]).all()
    root = env._step_mdp(env.rand_step(root))  # stepped again without reset
    root["_reset"] = torch.tensor([[True], [False]])
    after = env.reset(root)
    assert after["observation"].squeeze(-1).tolist() == [1.0, 3.0]  # as stepped, nothing stale
    assert env.base_env.real_resets == 1


def test_auto_reset_step_and_maybe_reset_and_outer_transforms():
    env = TransformedEnv(SelfResettingEnv(auto_reset=True), StepCounter())
    td = env.reset()
    for _ in range(2):
        data, td = env.step_and_maybe_reset(env.rand_action(td))
    assert data["next", "done"].squeeze(-1).tolist() == [True, False]
    assert td["observation"].squeeze(-1).tolist() == [0, 2]
    assert td["step_count"].squeeze(-1).tolist() == [0, 2]
    inner = AutoResetEnv(SelfResettingEnv(), AutoResetTransform())
    inner.append_transform(StepCounter())
    rollout = inner.rollout(4, break_when_any_done=False)
    assert rollout["step_count"].squeeze(-1).tolist() == [[0, 1, 0, 1], [0, 1, 2, 0]]
    assert torch.isnan(rollout["next", "observation"][0, 1]).all()
    with pytest.raises(RuntimeError, match=re.escape(INSERT_ERROR)):
        inner.insert_transform(0, StepCounter())


class SelfResettingAgentsEnv(EnvBase):
    """Two agents under `"agents"`, agent i ends its episode every `lengths[i]` steps.

    Done flags live only under `"agents"`; a root `"clock"` observation counts all steps.
    """

    def __init__(self, lengths=(2, 3)) -> None:
        super().__init__()
        n = len(lengths)
        self.lengths = torch.tensor(lengths).unsqueeze(-1)
        self.full_observation_spec = Composite(
            agents=Composite(observation=Unbounded((n, 1)), shape=(n,)), clock=Unbounded(1)
        )
        self.full_action_spec = Composite(agents=Composite(action=Unbounded((n, 1)), shape=(n,)))
        self.full_reward_spec = Composite(agents=Composite(reward=Unbounded((n, 1)), shape=(n,)))
        done = Categorical(2, (n, 1), dtype=torch.bool)
        self.full_done_spec = Composite(
            agents=Composite(done=done, terminated=done.clone(), shape=(n,))
        )
        self.count = torch.zeros(n, 1)
        self.clock = torch.zeros(1)

    def _reset(self, tensordict):
        self.count.zero_()
        self.clock.zero_()
        agents = TensorDict(observation=self.count.clone(), batch_size=self.count.shape[:1])
        return TensorDict(agents=agents, clock=self.clock.clone())

    def _step(self, tensordict):
        self.count += 1
        self.clock += 1
        done = self.count >= self.lengths
        self.count[done] = 0
        agents = TensorDict(
            observation=self.count.clone(),
            reward=torch.ones_like(self.count),
            done=done,
            terminated=done.clone(),
            batch_size=self.count.shape[:1],
        )
        return TensorDict(agents=agents, clock=self.clock.clone())

    def _set_seed(self, seed):
        return None


def test_auto_reset_nested_done_groups_fill_and_restart_per_agent():
    env = SelfResettingAgentsEnv(auto_reset=True)
    check_env_specs(env)
    rollout = env.rollout(4, break_when_any_done=False)
    done = rollout["next", "agents", "done"].squeeze(-1)
    assert done.tolist() == [[False, False], [True, False], [False, True], [True, False]]
    nxt = rollout["next", "agents", "observation"].squeeze(-1)
    assert torch.isnan(nxt[done]).all() and not torch.isnan(nxt[~done]).any()
    assert rollout["agents", "observation"].squeeze(-1).tolist() == [[0, 0], [1, 1], [0, 2], [1, 0]]
    # outside every done level: left as the env returned it
    assert rollout["next", "clock"].squeeze(-1).tolist() == [1, 2, 3, 4]


class HeterogeneousAgentsEnv(EnvBase):
    """Two agents under `"agents"` with observations of sizes 2 and 3 (a lazy stack)."""

    def __init__(self) -> None:
        super().__init__()
        agents = [Composite(observation=Unbounded(size)) for size in (2, 3)]
        self.full_observation_spec = Composite(agents=torch.stack(agents, 0))
        self.full_action_spec = Composite(agents=Composite(action=Unbounded((2, 1)), shape=(2,)))
        self.full_reward_spec = Composite(agents=Composite(reward=Unbounded((2, 1)), shape=(2,)))
        done = Categorical(2, (2, 1), dtype=torch.bool)
        self.full_done_spec = Composite(
            agents=Composite(done=done, terminated=done.clone(), shape=(2,))
        )

    def _agents(self, **extra):
        agents = [TensorDict(observation=torch.zeros(size)) for size in (2, 3)]
        stacked = TensorDict.lazy_stack(agents, 0)
        for key, value in extra.items():
            stacked.set(key, value)
        return TensorDict(agents=stacked)

    def _reset(self, tensordict):
        return self._agents()

    def _step(self, tensordict):
        done = torch.ones(2, 1, dtype=torch.bool)
        return self._agents(reward=torch.ones(2, 1), done=done, terminated=done.clone())

    def _set_seed(self, seed):
        return None


def test_auto_reset_heterogeneous_agents_raise_naming_the_key():
    env = HeterogeneousAgentsEnv(auto_reset=True)
    td = env.reset()
    message = HETEROGENEOUS_ERROR.format(key=("agents", "observation"), shape=(2, -1))
    with pytest.raises(NotImplementedError, match=re.escape(message)):
        env.rand_step(td)

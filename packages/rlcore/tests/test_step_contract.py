"""The step contract on a single env: input checks, the done rule, key order, and the rollout's
stepper path giving exactly what the general path gives (keys and their order, values, dtypes,
shapes), with and without early stops and partial resets."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from _rlcore_envs import CountingEnv
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase, StepLeaf, Stepper, check_env_specs, done_from, stepper_of
from rlcore.step_inputs import BAD_DTYPE, BAD_SHAPE, MISSING_ACTION, InputRules
from rlspecs import Bounded, Categorical, Composite, Unbounded

FLAG = torch.Size([1])


# ---------------------------------------------------------------------- input checks
class PushEnv(EnvBase):
    """A float action pushes a point (``_action_required`` as given)."""

    def __init__(self, required: bool = True, batch_size=()):
        super().__init__(batch_size=batch_size)
        batch = self.batch_size
        self.observation_spec = Composite(x=Unbounded((*batch, 1)), shape=batch)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*batch, 1))
        self._action_required = required

    def _reset(self, tensordict):
        return TensorDict({"x": torch.zeros(*self.batch_size, 1)}, self.batch_size)

    def _step(self, tensordict):
        x = tensordict.get("action").reshape(*self.batch_size, 1).float()
        return TensorDict({"x": x, "reward": x}, self.batch_size)

    def _set_seed(self, seed):
        pass


class LabelEnv(CountingEnv):
    """CountingEnv with an int64 Categorical action (labels 0 or 1)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.action_spec = Categorical(2, shape=(*self.batch_size, 1))


def _where(env) -> str:
    return f"{type(env).__name__}.step"


def test_a_wrongly_shaped_action_raises_naming_key_and_shapes():
    env = PushEnv()
    td = env.reset().set("action", torch.zeros(3))
    message = BAD_SHAPE.format(
        where=_where(env), role="action", key="action", got=(3,), expected=(1,)
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        env.step(td)
    with pytest.raises(ValueError, match=re.escape("has shape (2, 1), expected (1,)")):
        env.step(env.reset().set("action", torch.zeros(2, 1)))


def test_fractional_and_out_of_range_values_of_an_integer_action_raise():
    env = LabelEnv()
    with pytest.raises(ValueError, match="non-integer values") as info:
        env.step(env.reset().set("action", torch.full((1,), 0.5)))
    assert str(info.value).startswith(
        BAD_DTYPE.format(
            where=_where(env),
            role="action",
            key="action",
            got=torch.float32,
            dtype=torch.int64,
            why="non-integer values",
        )[:60]
    )
    with pytest.raises(ValueError, match="holds -9223372036854775808"):
        env.step(env.reset().set("action", torch.full((1,), 2.0**64, dtype=torch.float64)))
    # a whole float fits an integer action: it is taken
    assert env.step(env.reset().set("action", torch.ones(1)))["next", "observation"].item() == 1


def test_a_nested_action_leaf_is_checked_as_a_root_one():
    rules = InputRules(
        {"action": Composite(agents=Composite(action=Categorical(3, (2, 1)), shape=(2,)))},
        "Env.step",
    )
    good = TensorDict({"agents": {"action": torch.zeros(2, 1, dtype=torch.int64)}}, [])
    assert rules.check(good) is None
    with pytest.raises(ValueError, match=re.escape("has shape (2,), expected (2, 1)")):
        rules.check(TensorDict({"agents": {"action": torch.zeros(2, dtype=torch.int64)}}, []))
    with pytest.raises(ValueError, match="non-integer values"):
        rules.check(TensorDict({"agents": {"action": torch.full((2, 1), 0.5)}}, []))
    with pytest.raises(KeyError, match="'agents', 'action'"):
        rules.check(TensorDict({"agents": {}}, []))
    # a tensordict where the tensor should be is not taken for it
    not_a_tensor = TensorDict({"agents": {"action": {"x": torch.zeros(2, 1)}}}, [])
    with pytest.raises((ValueError, TypeError)):
        rules.check(not_a_tensor)


def test_a_missing_action_raises_naming_it_unless_the_env_ignores_its_action():
    env = PushEnv()
    message = MISSING_ACTION.format(
        where=_where(env), key="action", shape=(1,), dtype=torch.float32
    )
    with pytest.raises(KeyError, match=re.escape(message)):
        env.step(env.reset())

    class Ignoring(PushEnv):  # steps without an action (as torchrl's MockSerialEnv)
        def _step(self, tensordict):
            return TensorDict({"x": torch.zeros(1), "reward": torch.zeros(1)}, [])

    ignoring = Ignoring(required=False)
    assert ignoring.step(ignoring.reset())["next", "x"].shape == (1,)
    with pytest.raises(ValueError, match=re.escape("has shape (3,), expected (1,)")):
        ignoring.step(ignoring.reset().set("action", torch.zeros(3)))


def test_an_unlocked_env_takes_leading_dims_and_checks_the_rest():
    class Unlocked(PushEnv):
        _batch_locked = False

        def _step(self, tensordict):
            x = tensordict.get("action").float()
            return TensorDict({"x": x, "reward": x}, tensordict.batch_size)

    env = Unlocked()
    td = TensorDict({"x": torch.zeros(4, 1), "action": torch.zeros(4, 1)}, [4])
    assert env.step(td)["next", "x"].shape == (4, 1)
    with pytest.raises(ValueError, match=re.escape("has shape (4, 2), expected (..., 1)")):
        env.step(TensorDict({"x": torch.zeros(4, 1), "action": torch.zeros(4, 2)}, [4]))


# ---------------------------------------------------------------------- done rule, key order
class ReversedEnv(CountingEnv):
    """Writes its step and reset entries in the reverse of the spec order."""

    def _reset(self, tensordict):
        out = super()._reset(tensordict)
        return TensorDict(dict(reversed(list(out.items()))), self.batch_size)

    def _step(self, tensordict):
        out = super()._step(tensordict)
        return TensorDict(dict(reversed(list(out.items()))), self.batch_size)


def test_steps_and_resets_come_in_the_contracts_key_order():
    env = ReversedEnv()
    root = env.reset()
    assert list(root.keys()) == ["observation", "done", "terminated"]
    step = env.step(root.set("action", torch.ones(1, dtype=torch.bool)))
    assert list(step["next"].keys()) == ["observation", "reward", "done", "terminated"]


class ReversedGroupEnv(EnvBase):
    """A multi-agent-like env whose nested "agents" entries come in the reverse of spec order."""

    def __init__(self):
        super().__init__()
        group = Composite(obs=Unbounded((2, 2)), shape=(2,))
        self.observation_spec = Composite(agents=group)
        self.reward_spec = Composite(agents=Composite(reward=Unbounded((2, 1)), shape=(2,)))
        flags = Composite(
            done=Categorical(2, (2, 1), dtype=torch.bool),
            terminated=Categorical(2, (2, 1), dtype=torch.bool),
            shape=(2,),
        )
        self.done_spec = Composite(agents=flags)
        self.action_spec = Composite(agents=Composite(action=Unbounded((2, 1)), shape=(2,)))

    def _out(self, reward: bool) -> TensorDict:
        agents = {"terminated": torch.zeros(2, 1, dtype=torch.bool)}
        agents["done"] = torch.zeros(2, 1, dtype=torch.bool)
        if reward:
            agents["reward"] = torch.ones(2, 1)
        agents["obs"] = torch.zeros(2, 2)
        return TensorDict({"agents": TensorDict(agents, [2])}, [])

    def _reset(self, tensordict):
        return self._out(reward=False)

    def _step(self, tensordict):
        return self._out(reward=True)

    def _set_seed(self, seed):
        return seed


def test_nested_levels_come_in_the_contracts_key_order_too():
    env = ReversedGroupEnv()
    root = env.reset()
    assert list(root["agents"].keys()) == ["obs", "done", "terminated"]
    step = env.step(env.rand_action(root))
    assert list(step["next", "agents"].keys()) == ["obs", "reward", "done", "terminated"]


def test_the_done_rule():
    assert done_from(torch.tensor([True, False]), torch.tensor([False, False])).tolist() == [
        True,
        False,
    ]
    assert done_from(np.array([False]), np.array([True])).tolist() == [True]
    assert done_from(False, False) is False


# ---------------------------------------------------------------------- the stepper path
class Walk:
    """A tiny simulator: a point pushed by the action; terminated past 1.5, truncated at 6."""

    def __init__(self, batch: int = 0):
        self.rng = np.random.default_rng(0)
        self.batch = batch
        self.shape = (batch, 2) if batch else (2,)
        self.position = np.zeros(self.shape, np.float32)
        self.count = np.zeros(self.shape[:-1], np.int64)

    def reset(self, mask=None):
        fresh = self.rng.uniform(-0.5, 0.5, self.shape).astype(np.float32)
        if mask is None or not self.batch:
            self.position, self.count = fresh, np.zeros_like(self.count)
        else:
            self.position = np.where(mask[:, None], fresh, self.position)
            self.count = np.where(mask, 0, self.count)
        return self.position.copy()

    def step(self, action):
        self.position = (self.position + np.asarray(action, np.float32)).astype(np.float32)
        self.count = self.count + 1
        terminated = np.abs(self.position).max(-1) > 1.5
        truncated = self.count >= 6
        return self.position.copy(), -np.abs(self.position).sum(-1), terminated, truncated


class WalkEnv(EnvBase):
    """``Walk`` as an env: ``_step``/``_reset`` build tensordicts, its stepper fills rows."""

    def __init__(self, batch: int = 0, stepper: bool = True):
        super().__init__(batch_size=(batch,) if batch else ())
        b = self.batch_size
        self.sim = Walk(batch)
        self.observation_spec = Composite(position=Unbounded((*b, 2)), shape=b)
        self.action_spec = Bounded(-1.0, 1.0, shape=(*b, 2))
        self.reward_spec = Unbounded((*b, 1))
        flag = Categorical(2, shape=(*b, 1), dtype=torch.bool)
        self.done_spec = Composite(done=flag, terminated=flag, truncated=flag, shape=b)
        self.offers_stepper = stepper

    def _flags(self, terminated, truncated) -> dict:
        shape = (*self.batch_size, 1)
        return {
            "terminated": torch.from_numpy(np.asarray(terminated).reshape(shape)),
            "truncated": torch.from_numpy(np.asarray(truncated).reshape(shape)),
        }

    def _reset(self, tensordict):
        mask = None if tensordict is None else tensordict.get("_reset", None)
        mask = None if mask is None else mask.reshape(-1).numpy()
        out = {"position": torch.from_numpy(self.sim.reset(mask))}
        return TensorDict(out, self.batch_size)

    def _step(self, tensordict):
        position, reward, terminated, truncated = self.sim.step(tensordict["action"].numpy())
        out = {"position": torch.from_numpy(position)}
        out["reward"] = torch.from_numpy(
            np.asarray(reward, np.float32).reshape(*self.batch_size, 1)
        )
        out.update(self._flags(terminated, truncated))  # "done": the contract's rule
        return TensorDict(out, self.batch_size)

    def _set_seed(self, seed):
        self.sim.rng = np.random.default_rng(seed)

    def _stepper(self) -> Stepper | None:
        return WalkStepper(self) if self.offers_stepper else None


class WalkStepper(Stepper):
    action_key, numpy_action = "action", True

    def __init__(self, env: WalkEnv):
        self.env = env
        b = env.batch_size
        self.obs_leaves = (StepLeaf("position", torch.Size((*b, 2)), torch.float32),)
        self.scalar_leaves = tuple(
            StepLeaf(key, torch.Size((*b, 1)), dtype)
            for key, dtype in (
                ("reward", torch.float32),
                ("terminated", torch.bool),
                ("truncated", torch.bool),
            )
        )

    def step(self, action, out, row):
        position, reward, terminated, truncated = self.env.sim.step(action)
        out[0][row] = position
        return reward, terminated, truncated

    def reset(self, tensordict, out, row):
        mask = None if tensordict is None else tensordict.get("_reset").reshape(-1).numpy()
        out[0][row] = self.env.sim.reset(mask)


def assert_same(a: TensorDictBase, b: TensorDictBase) -> None:
    assert type(a) is type(b) and a.batch_size == b.batch_size and a.names == b.names
    assert list(a.keys(True, True)) == list(b.keys(True, True))
    for key in a.keys(True, True):
        x, y = a.get(key), b.get(key)
        assert (x.dtype, x.shape) == (y.dtype, y.shape), key
        assert torch.equal(x, y), key


def _pair(batch: int):
    envs = []
    for stepper in (True, False):
        env = WalkEnv(batch, stepper)
        env.set_seed(3)
        envs.append(env)
    return envs


@pytest.mark.parametrize("batch", [0, 3])
@pytest.mark.parametrize("break_when_any_done", [True, False])
def test_stepper_rollout_equals_the_general_path(batch, break_when_any_done):
    with_stepper, general = _pair(batch)
    assert stepper_of(with_stepper) is not None and stepper_of(general) is None
    results = []
    for env in (with_stepper, general):
        torch.manual_seed(0)
        results.append(env.rollout(40, break_when_any_done=break_when_any_done))
    assert_same(*results)
    done = results[0]["next", "done"]
    assert bool(done.any()) and torch.equal(
        done, results[0]["next", "terminated"] | results[0]["next", "truncated"]
    )
    if not break_when_any_done:  # finished rows restarted mid-rollout (partial resets)
        assert results[0].shape[-1] == 40


def test_stepper_path_checks_the_input_as_step_does():
    env = WalkEnv()

    def bad_policy(td):
        return td.set("action", torch.zeros(3))

    with pytest.raises(
        ValueError, match=re.escape("action 'action' has shape (3,), expected (2,)")
    ):
        env.rollout(3, bad_policy)


def test_stepper_path_with_a_callback_and_the_callers_tensordict():
    seen = {True: [], False: []}
    results = []
    for env in _pair(0):
        offers = env.offers_stepper
        torch.manual_seed(0)
        root = env.reset()
        out = env.rollout(
            12,
            callback=lambda _, td, offers=offers: seen[offers].append(td.clone()),
            auto_reset=False,
            tensordict=root,
            break_when_any_done=False,
        )
        results.append((out, root))
    assert_same(results[0][0], results[1][0])
    assert_same(results[0][1], results[1][1])  # "next" written into the caller's root
    assert len(seen[True]) == len(seen[False]) == 12


def test_stepper_env_passes_check_env_specs():
    check_env_specs(WalkEnv(), seed=0)
    check_env_specs(WalkEnv(3), seed=0)


def test_a_class_changing_a_step_method_keeps_the_general_path():
    class Counted(WalkEnv):
        def _step(self, tensordict):
            self.calls = getattr(self, "calls", 0) + 1
            return super()._step(tensordict)

    env = Counted()
    assert stepper_of(env) is None
    env.rollout(4, break_when_any_done=False)
    assert env.calls == 4

"""SerialEnv's stepper path against its general path: same results, same errors.

Each test builds the same SerialEnv twice, one with the fast path and one forced onto the
general path (``_steppers_allowed = False``), drives both alike and compares everything: keys
and their order, values, dtypes, shapes, strides, devices, names, errors. The sub-env is a
pure-rlcore env whose stepper shares its arithmetic with its ``_step`` (GymEnv sub-envs:
rllibs' tests).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from rlbatched import SerialEnv
from rlbatched._serial_steppers import SteppedBatch
from rlcore import EnvBase, EnvClosedError, StepLeaf, Stepper
from rlmocks import ContinuousActionVecMockEnv, CountingEnv
from rlspecs import Bounded, Categorical, Composite, Unbounded
from rltransforms import Compose, RewardSum, StepCounter, TransformedEnv

FLAG = torch.Size([1])
DONE_KEYS = ("terminated", "truncated", "done")


class WalkEnv(EnvBase):
    """A point pushed by the action; terminated past ``limit``, truncated at ``horizon`` steps.

    Its stepper (``dense=True``) runs the same ``_advance`` and writes into rows; a seed
    from ``set_seed`` (or the ``offset`` reset keyword) decides the start position.
    """

    def __init__(
        self,
        horizon: int = 9,
        limit: float = 1.5,
        dense: bool = True,
        numpy_action: bool = True,
        fail_on: str | None = None,
        spec_device: str | None = None,
        reads_input: bool = True,
    ):
        super().__init__()
        self.observation_spec = Composite(
            position=Unbounded(2, device=spec_device),
            steps=Unbounded(1, dtype=torch.int64, device=spec_device),
            device=spec_device,
        )
        self.action_spec = Bounded(-1.0, 1.0, shape=(1,))
        self.reward_spec = Unbounded(1)
        self.done_spec = Composite(
            {key: Categorical(2, shape=(1,), dtype=torch.bool) for key in DONE_KEYS}
        )
        self.horizon, self.limit = horizon, limit
        self.dense, self.numpy_action, self.fail_on = dense, numpy_action, fail_on
        self.reads_input = reads_input
        self.step_calls = 0
        self.reset_inputs: list = []  # what the stepper's reset was given
        self.pending_seed: int | None = None
        self.rng = np.random.default_rng(0)
        self.position = np.zeros(2, np.float32)
        self.count = 0

    # shared by _step/_reset and the stepper
    def _start(self, offset: float = 0.0) -> tuple:
        if self.fail_on == "reset":
            raise ValueError("boom in reset")
        if self.pending_seed is not None:
            self.rng, self.pending_seed = np.random.default_rng(self.pending_seed), None
        self.position = (self.rng.uniform(-0.5, 0.5, 2) + offset).astype(np.float32)
        self.count = 0
        return self.position.copy(), np.array([0])

    def _advance(self, action: np.ndarray) -> tuple:
        if self.fail_on == "step":
            raise ValueError("boom in step")
        self.position = self.position + np.asarray(action, np.float32)
        self.count += 1
        terminated = bool(np.abs(self.position).max() > self.limit)
        truncated = self.count >= self.horizon
        reward = -float(np.abs(self.position).sum())
        return self.position.copy(), np.array([self.count]), reward, terminated, truncated

    def _set_seed(self, seed: int | None) -> None:
        self.pending_seed = seed

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        position, steps = self._start(**kwargs)
        out = {"position": torch.from_numpy(position), "steps": torch.from_numpy(steps)}
        out.update({key: torch.zeros(FLAG, dtype=torch.bool) for key in DONE_KEYS})
        return TensorDict(out, [])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.step_calls += 1
        position, steps, reward, terminated, truncated = self._advance(
            tensordict["action"].detach().numpy()
        )
        return TensorDict(
            {
                "position": torch.from_numpy(position),
                "steps": torch.from_numpy(steps),
                "reward": torch.tensor([reward], dtype=torch.float32),
                "terminated": torch.tensor([terminated]),
                "truncated": torch.tensor([truncated]),
                "done": torch.tensor([terminated or truncated]),
            },
            [],
        )

    def _stepper(self) -> Stepper | None:
        return WalkStepper(self) if self.dense else None


class WalkStepper(Stepper):
    """``WalkEnv``'s stepper: positions and step counts into rows, reward and flags returned."""

    action_key = "action"

    def __init__(self, env: WalkEnv):
        self.env = env
        self.numpy_action = env.numpy_action
        self.reset_reads_input = env.reads_input
        obs = (StepLeaf("position", torch.Size([2]), torch.float32),)
        obs += (StepLeaf("steps", FLAG, torch.int64),)
        flags = tuple(StepLeaf(key, FLAG, torch.bool) for key in ("terminated", "truncated"))
        self.obs_leaves = obs
        self.scalar_leaves = (StepLeaf("reward", FLAG, torch.float32), *flags)

    def step(self, action, out, row):
        if not self.numpy_action:
            action = action.detach().numpy()
        position, steps, reward, terminated, truncated = self.env._advance(action)
        out[0][row] = position
        out[1][row] = steps
        return reward, terminated, truncated  # "done": the step contract's rule

    def reset(self, tensordict, out, row):
        self.env.reset_inputs.append(tensordict)
        out[0][row], out[1][row] = self.env._start()


def pair(num: int = 3, make=None, **kwargs) -> tuple[SerialEnv, SerialEnv]:
    """The same SerialEnv twice: fast path allowed, and forced onto the general path."""
    make = make or [lambda i=i: WalkEnv(horizon=5 + 3 * i) for i in range(num)]
    fast = SerialEnv(num, make, **kwargs)
    general = SerialEnv(num, make, **kwargs)
    general._steppers_allowed = False
    return fast, general


def assert_same(a: TensorDictBase, b: TensorDictBase) -> None:
    """Same keys in the same order, and leaf by leaf the same values, dtype, strides, device."""
    assert type(a) is type(b)
    assert a.batch_size == b.batch_size and a.device == b.device and a.names == b.names
    keys = list(a.keys(True, True))
    assert keys == list(b.keys(True, True))
    for key in keys:
        x, y = a.get(key), b.get(key)
        assert (x.dtype, x.shape, x.stride(), x.device) == (y.dtype, y.shape, y.stride(), y.device)
        assert torch.equal(x, y), key


def both(fast: SerialEnv, general: SerialEnv, call) -> tuple:
    """``call(env)`` on each env with the same torch RNG state."""
    torch.manual_seed(1)
    one = call(fast)
    torch.manual_seed(1)
    return one, call(general)


def test_fast_path_is_taken():
    """Every sub-env offers a stepper: steps go through it, not through the sub-envs' _step."""
    fast, general = pair()
    fast.rollout(20, break_when_any_done=False)
    general.rollout(20, break_when_any_done=False)
    assert isinstance(fast._stepped, SteppedBatch) and general._stepped is None
    assert [env.step_calls for env in fast._envs] == [0, 0, 0]
    assert all(env.step_calls == 20 for env in general._envs)


def test_rollout_runs_the_rollouts_stepper_loop(monkeypatch):
    """A rollout goes through the SerialEnv's own stepper (the rollout's stepper loop, as for a
    vector GymEnv), not through a batched step per step."""
    from rlbatched._serial_steppers import SerialStepper
    from rlcore import stepper_of

    make = [lambda i=i: WalkEnv(horizon=5 + 3 * i, reads_input=False) for i in range(3)]
    fast, general = pair(make=make)
    assert isinstance(stepper_of(fast), SerialStepper) and stepper_of(general) is None

    def no_batched_steps(self, tensordict):
        raise AssertionError("a batched step during the rollout")

    monkeypatch.setattr(SteppedBatch, "step", no_batched_steps)
    one, two = both(fast, general, lambda env: env.rollout(30, break_when_any_done=False))
    assert_same(one, two)
    assert bool(one["next", "done"].any())


def test_closed_env_rollout_from_a_tensordict_raises_on_the_stepper_loop():
    fast, _ = pair(make=[functools.partial(WalkEnv, reads_input=False)] * 3)
    td = fast.reset()
    td = fast.rand_action(td)
    fast.close()
    with pytest.raises(EnvClosedError):
        fast.rollout(3, auto_reset=False, tensordict=td)
    assert fast.is_closed


@pytest.mark.parametrize("numpy_action", [True, False])
@pytest.mark.parametrize("break_when_any_done", [True, False])
@pytest.mark.parametrize("reads_input", [True, False], ids=["batched-steps", "serial-stepper"])
def test_rollouts_identical(numpy_action, break_when_any_done, reads_input):
    """Seeded rollouts, with auto-resets of the sub-envs that end, are identical (resets that
    read no input: the rollout runs the SerialEnv's own stepper)."""
    make = [
        lambda i=i: WalkEnv(horizon=4 + i, numpy_action=numpy_action, reads_input=reads_input)
        for i in range(3)
    ]
    fast, general = pair(make=make)
    for env in (fast, general):
        env.set_seed(3)
    one, two = both(fast, general, lambda env: env.rollout(40, break_when_any_done=False))
    assert_same(one, two)
    assert bool(one["next", "done"].any()) and bool(one["next", "truncated"].any())
    one, two = both(
        fast, general, lambda env: env.rollout(40, break_when_any_done=break_when_any_done)
    )
    assert_same(one, two)


def test_hand_loops_identical():
    """``step`` and ``step_and_maybe_reset`` loops give the same data at every step."""
    fast, general = pair()
    roots = [env.reset() for env in (fast, general)]
    for _ in range(30):
        torch.manual_seed(len(roots))
        actions = fast.rand_action(roots[0].clone()).get("action")
        data = []
        for i, env in enumerate((fast, general)):
            roots[i].set("action", actions.clone())
            transition, roots[i] = env.step_and_maybe_reset(roots[i])
            data.append(transition)
        assert_same(*data)
        assert_same(*roots)
    stepped = [env.step(root.clone()) for env, root in zip((fast, general), roots)]
    assert_same(*stepped)


@pytest.mark.parametrize(
    "mask", [[True, False, True], [False, False, False], [True, True, True], [False, True, False]]
)
@pytest.mark.parametrize("given", ["mask only", "observations", "other dtype", "state spec keys"])
def test_partial_resets_identical(mask, given):
    """Partial resets: rows not reset keep the input's values (or zeros), as the templates do."""
    fast, general = pair()
    for env in (fast, general):
        env.set_seed(0)
        env.rollout(3)
    reset = torch.tensor(mask).unsqueeze(-1)
    inputs = TensorDict({"_reset": reset}, [3])
    if given != "mask only":
        inputs["position"] = torch.arange(6, dtype=torch.float32).reshape(3, 2)
        inputs["done"] = torch.ones(3, 1, dtype=torch.bool)
    if given == "other dtype":  # taken as the general path takes it: through its stack
        inputs["position"] = inputs["position"].double()
    if given == "state spec keys":
        inputs["steps"] = torch.full((3, 1), 7)
    one, two = both(fast, general, lambda env: env.reset(inputs.clone()))
    assert_same(one, two)
    one, two = both(fast, general, lambda env: env._reset(inputs.clone()))
    assert_same(one, two)


@pytest.mark.parametrize("mask", [[True, False], [False, False], [True, True]])
def test_reset_devices_identical(mask):
    """Specs on a device, data on none: rows reset and rows from templates stack alike."""
    fast, general = pair(2, [lambda: WalkEnv(spec_device="cpu")] * 2)
    inputs = TensorDict({"_reset": torch.tensor(mask).unsqueeze(-1)}, [2])
    for env in (fast, general):
        env.rollout(2)
    one, two = both(fast, general, lambda env: env._reset(inputs.clone()))
    assert_same(one, two)


def test_full_reset_with_a_tensordict_and_keywords():
    """A full reset given a tensordict, and one with keyword arguments (general path)."""
    fast, general = pair()
    inputs = TensorDict({"position": torch.ones(3, 2)}, [3])
    assert_same(*both(fast, general, lambda env: env.reset(inputs.clone())))
    assert_same(*both(fast, general, lambda env: env.reset(offset=10.0)))
    assert bool((fast.reset(offset=10.0)["position"] > 9).all())


@pytest.mark.parametrize("reads_input", [True, False])
def test_reset_input_rows_reach_steppers_that_read_them(reads_input):
    """A stepper's reset gets its row of the input, or None where it reads none."""
    env = SerialEnv(2, functools.partial(WalkEnv, reads_input=reads_input))
    env.reset()
    env.reset(TensorDict({"_reset": torch.tensor([[False], [True]])}, [2]))
    seen = [sub.reset_inputs for sub in env._envs]
    assert seen[0] == [None] and seen[1][0] is None
    if reads_input:
        assert seen[1][1].batch_size == () and bool(seen[1][1]["_reset"])
    else:
        assert seen[1][1] is None


def test_seeding_identical():
    """Seeds reach the sub-envs alike: sub-env i gets the seed sub-env i-1 returned."""
    fast, general = pair()
    assert fast.set_seed(7) == general.set_seed(7)
    first = [env.reset() for env in (fast, general)]
    assert_same(*first)
    again = [env.reset() for env in (fast, general)]  # the pending seed was used up
    assert_same(*again)
    assert not torch.equal(first[0]["position"], again[0]["position"])


def test_transforms_around_the_serial_env():
    """A TransformedEnv over each gives identical rollouts (counters, sums, auto-resets)."""
    fast, general = pair()
    envs = [
        TransformedEnv(env, Compose(StepCounter(max_steps=6), RewardSum()))
        for env in (fast, general)
    ]
    for env in envs:
        env.set_seed(2)
    one, two = both(*envs, lambda env: env.rollout(30, break_when_any_done=False))
    assert_same(one, two)
    assert fast._stepped is not None


def test_input_errors_identical():
    """Missing, mis-shaped and unrepresentable actions raise the same errors on both paths."""
    fast, general = pair()
    cases = {
        "missing": (TensorDict({}, [3]), KeyError),
        "shape": (TensorDict({"action": torch.zeros(3, 2)}, [3]), ValueError),
        "dtype": (
            TensorDict({"action": torch.full((3, 1), 1e300, dtype=torch.float64)}, [3]),
            ValueError,
        ),
    }
    for name, (td, error) in cases.items():
        messages = []
        for env in (fast, general):
            with pytest.raises(error) as info:
                env.step(td.clone())
            messages.append(str(info.value).replace("SerialEnv", ""))
        assert messages[0] == messages[1], name


def test_closed_env_rules_identical():
    """After close(), stepping raises EnvClosedError on both paths; reset() reopens densely."""
    fast, general = pair()
    for env in (fast, general):
        env.rollout(2)
        env.close()
        assert env._stepped is None
        with pytest.raises(EnvClosedError):
            env.rand_step(env.fake_tensordict().exclude("next"))
        env.reset()
    assert fast._stepped is not None
    assert_same(*both(fast, general, lambda env: env.rollout(5, break_when_any_done=False)))


@pytest.mark.parametrize("phase", ["step", "reset"])
def test_sub_env_errors_identical(phase):
    """A sub-env's exception keeps its type and gets the same note naming its index."""
    make = [lambda: WalkEnv(), lambda: WalkEnv(fail_on=phase)]
    fast, general = pair(2, make)
    notes = []
    for env in (fast, general):
        with pytest.raises(ValueError, match=f"boom in {phase}") as info:
            env.rollout(3)
        notes.append(info.value.__notes__)
    assert notes[0] == notes[1] == [f"raised by sub-env 1 of SerialEnv during {phase}"]


def test_actions_of_other_dtypes_and_with_gradients():
    """A float64 action and an action that needs gradients reach the sub-envs alike."""
    for numpy_action in (True, False):
        make = [functools.partial(WalkEnv, numpy_action=numpy_action)] * 2
        fast, general = pair(2, make)
        for action in (
            torch.full((2, 1), 0.25, dtype=torch.float64),
            torch.full((2, 1), 0.25, requires_grad=True),
        ):
            out = [env.step(env.reset().set("action", action)) for env in (fast, general)]
            assert_same(out[0].exclude("action"), out[1].exclude("action"))


def test_output_device_identical():
    """A SerialEnv with its own device gives the same devices on both paths."""
    fast, general = pair(device="cpu")
    assert_same(*both(fast, general, lambda env: env.rollout(4, break_when_any_done=False)))
    assert fast.rollout(2).device == torch.device("cpu")


def test_sub_envs_without_a_stepper_take_the_general_path():
    """Mocks, a sub-env without a stepper among others, heterogeneous specs: no stepper path."""
    cases = [
        SerialEnv(2, ContinuousActionVecMockEnv),
        SerialEnv(2, CountingEnv),
        SerialEnv(2, [lambda: WalkEnv(), lambda: WalkEnv(dense=False)]),
        SerialEnv(2, [WalkEnv, CountingEnv]),
    ]
    for env in cases:
        env.rollout(3)
        assert env._stepped is None
    fast, general = pair(2, [lambda: WalkEnv(), lambda: WalkEnv(dense=False)])
    assert_same(*both(fast, general, lambda env: env.rollout(12, break_when_any_done=False)))


class OtherLayoutStepper(WalkStepper):
    """Declares an int32 step count: a layout unlike its neighbours'."""

    def __init__(self, env):
        super().__init__(env)
        self.obs_leaves = (self.obs_leaves[0], StepLeaf("steps", FLAG, torch.int32))


class NoStepsStepper(WalkStepper):
    """Leaves ``steps`` out of its leaves: not the env's observation keys."""

    def __init__(self, env):
        super().__init__(env)
        self.obs_leaves = tuple(leaf for leaf in self.obs_leaves if leaf.key != "steps")


@pytest.mark.parametrize("stepper", [OtherLayoutStepper, NoStepsStepper])
def test_mismatched_layouts_take_the_general_path(stepper, monkeypatch):
    """Steppers whose layouts differ, or whose leaves are not the env's: no stepper path."""
    env = SerialEnv(2, WalkEnv)
    env.start()
    for i, sub in enumerate(env._envs):
        if stepper is NoStepsStepper or i == 1:
            monkeypatch.setattr(sub, "_stepper", lambda sub=sub: stepper(sub))
        sub.empty_cache()
    env.rollout(3)
    assert env._stepped is None


def test_a_spec_change_of_a_sub_env_is_seen_at_the_next_step():
    """A sub-env's specs change (its cache empties): the next step decides the path again."""
    fast, general = pair(2)
    for env in (fast, general):
        env.rollout(2)
    before = fast._stepped
    fast._envs[0].empty_cache()
    assert_same(*both(fast, general, lambda env: env.rollout(2)))
    assert fast._stepped is not None and fast._stepped is not before
    for env in (fast, general):  # a sub-env that stops offering a stepper
        env._envs[1].dense = False
        env._envs[1].empty_cache()
    assert_same(*both(fast, general, lambda env: env.rollout(8, break_when_any_done=False)))
    assert fast._stepped is None
    assert fast._envs[1].step_calls == 8


def test_examples_of_the_protocol():
    """StepLeaf and Stepper as documented: rows written, scalars returned in order."""
    env = WalkEnv()
    stepper = WalkStepper(env)
    out = [np.zeros((2, 2), np.float32), np.zeros((2, 1), np.int64)]
    stepper.reset(None, out, 1)
    reward, terminated, truncated = stepper.step(np.array([0.1], np.float32), out, 1)
    assert out[1][1, 0] == 1 and out[1][0, 0] == 0
    assert isinstance(reward, float) and isinstance(terminated, bool) and not truncated


def test_sub_env_note_without_add_note():
    """Python 3.10 has no BaseException.add_note: the note still lands in __notes__."""
    from rlbatched._serial_steppers import note_sub_env

    class NoAddNote(ValueError):
        def __getattribute__(self, name):
            if name == "add_note":
                raise AttributeError(name)
            return super().__getattribute__(name)

    err = NoAddNote("boom")
    note_sub_env(err, 3, "step")
    note_sub_env(err, 4, "reset")
    assert err.__notes__ == [
        "raised by sub-env 3 of SerialEnv during step",
        "raised by sub-env 4 of SerialEnv during reset",
    ]

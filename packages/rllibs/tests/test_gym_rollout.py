"""A GymLikeEnv's rollout through its stepper returns exactly what the general path returns.

Every case runs the same seeded env twice, once as it is (``env.rollout`` through the env's
stepper, ``rlcore._rollout_stepper``) and once offering no stepper (the general path: a
tensordict per step), and compares the results: type, batch size, dim names, keys in order,
and each leaf's dtype, shape and values.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch
from tensordict import LazyStackedTensorDict, TensorDict
from tensordict.nn import TensorDictModule

from rlcore import stepper_of
from rlcore._step_mdp import StepMDP

gym = pytest.importorskip("gymnasium")

from rllibs import GymEnv, GymWrapper, default_info_dict_reader  # noqa: E402

HAS_ENVPOOL = importlib.util.find_spec("envpool") is not None
HAS_DMC = importlib.util.find_spec("dm_control") is not None


def _dict_env(space_env_cls):
    space = gym.spaces.Dict(
        position=gym.spaces.Box(-1, 1, (2,), np.float32),
        mode=gym.spaces.Discrete(3),
        flags=gym.spaces.MultiBinary(4),
    )
    return GymWrapper(space_env_cls(space, gym.spaces.Box(-1, 1, (1,), np.float32)))


def _counting_vector(counting_env_cls, mode):
    fns = [lambda n=n: counting_env_cls(max_steps=n) for n in (2, 3, 5)]
    return GymWrapper(gym.vector.SyncVectorEnv(fns, autoreset_mode=mode))


def _envpool(name, **kwargs):
    from rllibs import MultiThreadedEnv

    return MultiThreadedEnv(3, name, **kwargs)


def _dm_control():
    from rllibs import DMControlEnv

    return DMControlEnv("cartpole", "balance")


ENVS = {
    "pendulum": lambda c: GymEnv("Pendulum-v1"),
    "cartpole": lambda c: GymEnv("CartPole-v1"),
    "cartpole-labels": lambda c: GymEnv("CartPole-v1", categorical_action_encoding=True),
    "pendulum-frame-skip": lambda c: GymEnv("Pendulum-v1", frame_skip=3),
    "cartpole-frame-skip": lambda c: GymEnv("CartPole-v1", frame_skip=2),
    "dict-observations": lambda c: _dict_env(c["space"]),
    "pixels-and-state": lambda c: GymWrapper(
        c["counting"](render_mode="rgb_array"), from_pixels=True, pixels_only=False
    ),
    "vector-pendulum": lambda c: GymEnv("Pendulum-v1", num_envs=3),
    "vector-cartpole": lambda c: GymEnv("CartPole-v1", num_envs=3),
    "vector-same-step": lambda c: GymEnv(
        "CartPole-v1", num_envs=3, vector_kwargs={"autoreset_mode": "SameStep"}
    ),
    "vector-counting-next-step": lambda c: _counting_vector(c["counting"], "NextStep"),
    "vector-counting-disabled": lambda c: _counting_vector(c["counting"], "Disabled"),
}
if HAS_ENVPOOL:
    ENVS["envpool-cartpole"] = lambda c: _envpool("CartPole-v1")
    # one thread: which sub-envs are ready first is then fixed, so two runs can be compared
    ENVS["envpool-async"] = lambda c: _envpool(
        "CartPole-v1", create_env_kwargs={"batch_size": 2, "num_threads": 1}
    )
if HAS_DMC:
    ENVS["dm-control"] = lambda c: _dm_control()


@pytest.fixture
def classes(counting_env_cls, space_env_cls):
    return {"counting": counting_env_cls, "space": space_env_cls}


def _fresh(make):
    env = make()
    env.set_seed(0)
    torch.manual_seed(0)
    return env


def _assert_same(fast, slow, ordered: bool = True) -> None:
    assert type(fast) is type(slow)
    assert fast.batch_size == slow.batch_size
    assert fast.names == slow.names
    if ordered:
        assert list(fast.keys(True, True)) == list(slow.keys(True, True))
    else:
        assert set(fast.keys(True, True)) == set(slow.keys(True, True))
    if isinstance(slow, LazyStackedTensorDict):
        # each step of a lazy stack keeps the key order it was built with (step_mdp's)
        for a, b in zip(fast.tensordicts, slow.tensordicts):
            _assert_same(a, b, ordered=False)
        return
    for key in slow.keys(True, True):
        a, b = fast.get(key), slow.get(key)
        assert a.dtype == b.dtype and a.shape == b.shape, key
        assert torch.equal(a, b), key


def _general(env):
    """``env`` on the general path: it offers no stepper (a tensordict per step)."""
    env._stepper = lambda: None
    env.empty_cache()
    return env


def _prepare(run: str, env):
    return env if run == "fast" else _general(env)


def _both(make, *args, tensordict=None, **kwargs):
    """(stepper, general) results of the same rollout call on two identically seeded envs."""
    results = []
    for prepare in (lambda env: env, _general):
        env = prepare(_fresh(make))
        td = None if tensordict is None else tensordict(env)
        extra = {} if td is None else {"tensordict": td}
        results.append((env.rollout(*args, **kwargs, **extra), td))
    return results


def _constant(env):
    action = env.full_action_spec["action"].zero()
    action.view(-1)[-1] = 1  # a valid one-hot, label 1, or a push of 1
    return action


def _constant_policy(env):
    action = _constant(env)
    return lambda td: td.set("action", action)


# ---------------------------------------------------------------------- the matrix
@pytest.mark.parametrize("name", list(ENVS))
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"break_when_any_done": False},
        {"break_when_any_done": False, "return_contiguous": False},
    ],
    ids=["break", "no-break", "no-break-lazy"],
)
@pytest.mark.parametrize("policy", ["random", "constant"])
def test_stepper_rollout_equals_the_general_path(classes, name, options, policy):
    make = lambda: ENVS[name](classes)  # noqa: E731
    assert stepper_of(make()) is not None  # the stepper path applies
    steps = 60
    results = []
    for prepare in (lambda env: env, _general):
        env = prepare(_fresh(make))
        act = None if policy == "random" else _constant_policy(env)
        results.append(env.rollout(steps, act, **options))
    _assert_same(*results)


@pytest.mark.parametrize("name", ["cartpole", "vector-cartpole", "dict-observations"])
@pytest.mark.parametrize("rows", [1, 7])
def test_observation_chunks_across_boundaries(classes, name, rows, monkeypatch):
    """Observations written into chunks of ``rows`` steps: 60 steps cross many boundaries."""
    import rlcore._rollout_stepper as stepper_path

    monkeypatch.setattr(stepper_path, "CHUNK_ROWS", rows)
    make = lambda: ENVS[name](classes)  # noqa: E731
    results = []
    for prepare in (lambda env: env, _general):
        env = prepare(_fresh(make))
        results.append(env.rollout(60, _constant_policy(env), break_when_any_done=False))
    _assert_same(*results)


def test_recorded_observations_do_not_alias_the_policys_inputs(classes):
    """The result owns its observations: writing into what the policy saw changes nothing."""
    env = _fresh(lambda: ENVS["pendulum"](classes))
    seen = []

    def policy(td):
        seen.append(td["observation"])
        return td.set("action", _constant(env))

    out = env.rollout(5, policy, break_when_any_done=False)
    expected = out["next", "observation"].clone()
    for observation in seen:
        observation.fill_(123.0)
    assert torch.equal(out["next", "observation"], expected)


@pytest.mark.parametrize("name", ["cartpole", "vector-cartpole"])
def test_fast_loop_never_builds_a_step_mdp(classes, name, monkeypatch):
    env = _fresh(lambda: ENVS[name](classes))

    def refuse(*args, **kwargs):
        raise AssertionError("the fast loop called step_mdp")

    monkeypatch.setattr(StepMDP, "__call__", refuse)
    rollout = env.rollout(50, break_when_any_done=False)
    assert rollout["next", "done"].any()  # resets happened, without step_mdp or maybe_reset


# ---------------------------------------------------------------------- inputs and policies
@pytest.mark.parametrize("name", ["cartpole", "vector-cartpole"])
def test_tensordict_input_with_extra_entries(classes, name):
    def start(env):
        return TensorDict({"hidden": torch.ones(*env.batch_size, 2)}, env.batch_size)

    (fast, fast_input), (slow, slow_input) = _both(
        lambda: ENVS[name](classes), 30, tensordict=start, break_when_any_done=False
    )
    _assert_same(fast, slow)
    assert (fast["hidden"] == 1).all()
    # rollout writes the first step into the caller's tensordict
    _assert_same(fast_input, slow_input)
    assert "next" in fast_input.keys() and "action" in fast_input.keys()


@pytest.mark.parametrize("name", ["pendulum", "vector-pendulum"])
def test_auto_reset_false_starts_from_the_given_root(classes, name):
    def start(env):
        env.rollout(3)  # the env is mid-episode, the root below carries on from reset
        return env.reset()

    (fast, _), (slow, _) = _both(
        lambda: ENVS[name](classes), 20, tensordict=start, auto_reset=False
    )
    _assert_same(fast, slow)


def test_auto_reset_false_with_a_done_root_resets_it_first(classes):
    def start(env):
        root = env.reset()
        root["done"] = torch.ones_like(root["done"])
        return root

    (fast, _), (slow, _) = _both(
        lambda: ENVS["cartpole"](classes), 20, tensordict=start, auto_reset=False
    )
    _assert_same(fast, slow)


class _Recurrent:
    """Writes the action and a memory that counts steps, plus a log-prob."""

    def __init__(self, env):
        self.action = _constant(env)
        self.batch = env.batch_size

    def __call__(self, td):
        memory = td.get("memory", None)
        memory = torch.zeros(*self.batch, 3) if memory is None else memory + 1
        td.set("memory", memory)
        td.set("log_prob", memory.sum(-1))
        return td.set("action", self.action)


class _OutOfPlace(_Recurrent):
    def __call__(self, td):
        return super().__call__(td.clone()).select("action", "memory")


@pytest.mark.parametrize("policy_cls", [_Recurrent, _OutOfPlace])
@pytest.mark.parametrize("name", ["cartpole", "vector-cartpole", "pendulum-frame-skip"])
def test_policies_writing_more_than_the_action(classes, policy_cls, name):
    results = []
    for run in ("fast", "general"):
        env = _prepare(run, _fresh(lambda: ENVS[name](classes)))
        rollout = env.rollout
        results.append(rollout(40, policy_cls(env), break_when_any_done=False))
    _assert_same(*results)
    assert results[0]["memory"][..., 5, 0].eq(5).all()


def test_tensordict_module_policy(classes):
    results = []
    for run in ("fast", "general"):
        env = _prepare(run, _fresh(lambda: ENVS["pendulum"](classes)))
        torch.manual_seed(1)
        module = TensorDictModule(torch.nn.Linear(3, 1), ["observation"], ["action"])
        rollout = env.rollout
        results.append(rollout(25, module))
    _assert_same(*results)


@pytest.mark.parametrize("name", ["cartpole", "vector-cartpole"])
def test_callback_sees_every_transition(classes, name):
    seen = {"fast": [], "general": []}
    results = []
    for run in ("fast", "general"):
        env = _fresh(lambda: ENVS[name](classes))

        def callback(env_, transition, run=run):
            seen[run].append(transition.clone())

        rollout = _prepare(run, env).rollout
        results.append(rollout(30, _constant_policy(env), callback, break_when_any_done=False))
    _assert_same(*results)
    assert len(seen["fast"]) == len(seen["general"]) == 30
    for a, b in zip(seen["fast"], seen["general"]):
        # the stacked results share one key order; a step's own order is step_mdp's business
        _assert_same(a, b, ordered=False)


# ---------------------------------------------------------------------- layout changes mid-way
class _LateKey:
    """Adds a key from step ``start`` on: the layout changes mid-rollout."""

    def __init__(self, env, start=4, shape_change=False):
        self.action = _constant(env)
        self.batch = env.batch_size
        self.count = 0
        self.start = start
        self.shape_change = shape_change

    def __call__(self, td):
        self.count += 1
        if self.shape_change:
            size = 2 if self.count < self.start else 3
            td.set("extra", torch.zeros(*self.batch, size))
        elif self.count >= self.start:
            td.set("late", torch.ones(*self.batch))
        return td.set("action", self.action)


@pytest.mark.parametrize("contiguous", [False, True])
@pytest.mark.parametrize("name", ["cartpole", "vector-cartpole"])
def test_a_new_key_mid_rollout_hands_over_to_the_general_path(classes, name, contiguous):
    outcomes = []
    for run in ("fast", "general"):
        env = _prepare(run, _fresh(lambda: ENVS[name](classes)))
        rollout = env.rollout
        try:
            outcomes.append(
                rollout(12, _LateKey(env), break_when_any_done=False, return_contiguous=contiguous)
            )
        except Exception as err:  # noqa: BLE001 - both paths must fail alike
            outcomes.append(type(err))
    if isinstance(outcomes[1], type):
        assert outcomes[0] is outcomes[1]
    else:
        _assert_same(*outcomes)


@pytest.mark.parametrize("contiguous", [False, True])
def test_an_entry_changing_shape(classes, contiguous):
    outcomes = []
    for run in ("fast", "general"):
        env = _prepare(run, _fresh(lambda: ENVS["cartpole"](classes)))
        rollout = env.rollout
        policy = _LateKey(env, shape_change=True)
        try:
            outcomes.append(
                rollout(8, policy, break_when_any_done=False, return_contiguous=contiguous)
            )
        except RuntimeError as err:
            outcomes.append(type(err))
    if contiguous:
        assert outcomes == [RuntimeError, RuntimeError]
    else:
        _assert_same(*outcomes)
        assert isinstance(outcomes[0], LazyStackedTensorDict)


def test_a_nested_entry_hands_over_at_once(classes):
    def policy(td):
        td.set(("agent", "memory"), torch.zeros(2))
        return td.set("action", torch.tensor([0, 1]))

    results = []
    for prepare in (lambda env: env, _general):
        env = prepare(_fresh(lambda: ENVS["cartpole"](classes)))
        results.append(env.rollout(10, policy, break_when_any_done=False))
    _assert_same(*results)


# ---------------------------------------------------------------------- where the loop stands aside
class _StepCounting(GymWrapper):
    def _step(self, tensordict):
        self.steps = getattr(self, "steps", 0) + 1
        return super()._step(tensordict)


def test_what_the_stepper_does_not_cover_takes_the_general_path(counting_env_cls):
    env = GymEnv("Pendulum-v1")
    env._run_type_checks = True
    assert stepper_of(env) is None  # type checks run on the general path

    reading = GymWrapper(counting_env_cls()).set_info_dict_reader(
        default_info_dict_reader(["count"])
    )
    assert stepper_of(reading) is None
    rollout = reading.rollout(4, break_when_any_done=False)
    assert rollout["next", "count"].tolist() == [1.0, 2.0, 3.0, 4.0]

    subclass = _StepCounting(counting_env_cls(max_steps=10))
    assert stepper_of(subclass) is None  # it changes _step: the stepper no longer stands for it
    subclass.rollout(4)
    assert subclass.steps == 4


def test_nn_module_on_tensors_still_works():
    env = _fresh(lambda: GymEnv("CartPole-v1", categorical_action_encoding=True))

    class ArgMax(torch.nn.Module):
        def forward(self, values):
            return values.argmax(-1)

    rollout = env.rollout(10, torch.nn.Sequential(torch.nn.Linear(4, 2), ArgMax()))
    assert rollout["action"].dtype == torch.int64


class _MixedRewards(gym.Env):
    """Returns its reward as a float or as a one-element array, alternately."""

    observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
    action_space = gym.spaces.Box(-1, 1, (1,), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        reward = float(self.t) if self.t % 2 else np.array([self.t], dtype=np.float64)
        return np.zeros(1, np.float32), reward, np.bool_(self.t >= 6), False, {}


def test_library_values_of_varying_shapes():
    results = []
    for prepare in (lambda env: env, _general):
        env = prepare(_fresh(lambda: GymWrapper(_MixedRewards())))
        results.append(env.rollout(8))
    _assert_same(*results)
    assert results[0]["next", "reward"].squeeze(-1).tolist() == [1, 2, 3, 4, 5, 6]

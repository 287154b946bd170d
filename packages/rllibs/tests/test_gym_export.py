"""Our envs as gymnasium envs: EnvBase.register_gym, gymnasium.make / make_vec, check_env."""

from __future__ import annotations

import copy
import functools
import itertools
import re
import warnings

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from rlcore import EnvBase
from rlmocks import ContinuousActionVecMockEnv, CountingBatchedEnv, DiscreteActionVecMockEnv
from rlspecs import Bounded, Categorical, Composite, Unbounded
from rltransforms import ObservationNorm, RewardSum, StepCounter, TransformedEnv

gym = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402
from gymnasium.vector import AutoresetMode  # noqa: E402

from rllibs import GymEnv, register_gym  # noqa: E402
from rllibs._gym_export import (  # noqa: E402
    BATCHED_SINGLE,
    NEXT_STEP_UNSUPPORTED,
    PER_ENV_SEEDS,
    SEVERAL_REWARDS,
    ExportedGymEnv,
    ExportedGymVectorEnv,
)
from rllibs._register_gym import (  # noqa: E402
    ABSTRACT_ENTRY,
    GYM_UNRECOGNIZED_KWARG,
    NUM_ENVS_MISMATCH,
)

# gymnasium's checker advises finite Box bounds and [-1, 1] actions: advice, not API breaches
ADVICE = [
    ".*Box observation space (minimum|maximum) value is (-)?infinity",
    ".*we recommend using a symmetric and normalized space",
]


class Walker(EnvBase):
    """Walks by its action; terminated 3 away from 0, truncated after ``limit`` steps."""

    def __init__(self, start, *, limit=100, batch_size=(), **kwargs):
        super().__init__(batch_size=batch_size, **kwargs)
        batch = self.batch_size
        self.start, self.limit = start, limit
        self.observation_spec = Composite(
            position=Unbounded((*batch, 1)),
            other=Composite(steps=Unbounded((*batch, 1), dtype=torch.int64), shape=batch),
            shape=batch,
        )
        self.action_spec = Bounded(-1.0, 1.0, (*batch, 1))
        flag = Categorical(2, (*batch, 1), dtype=torch.bool)
        self.full_done_spec = Composite(
            done=flag, terminated=flag.clone(), truncated=flag.clone(), shape=batch
        )
        self.position = torch.zeros(*batch, 1, device=self.device)
        self.steps = torch.zeros(*batch, 1, dtype=torch.int64, device=self.device)

    def _reset(self, tensordict):
        mask = None if tensordict is None else tensordict.get("_reset", None)
        # seeded through set_seed
        fresh = self.start + torch.rand(*self.batch_size, 1, device=self.device)
        if mask is None:
            self.position, self.steps = fresh, torch.zeros_like(self.steps)
        else:
            self.position = torch.where(mask, fresh, self.position)
            self.steps = torch.where(mask, 0, self.steps)
        return TensorDict(
            {"position": self.position.clone(), "other": {"steps": self.steps.clone()}},
            self.batch_size,
        )

    def _step(self, tensordict):
        self.position = self.position + tensordict["action"]
        self.steps = self.steps + 1
        terminated = self.position.abs() >= 3
        return TensorDict(
            {
                "position": self.position.clone(),
                "other": {"steps": self.steps.clone()},
                "reward": tensordict["action"].clone(),
                "terminated": terminated,
                "truncated": (self.steps >= self.limit) & ~terminated,
            },
            self.batch_size,
        )

    def _set_seed(self, seed):
        pass


_ids = itertools.count()


@pytest.fixture
def gym_id():
    """A fresh gymnasium id, removed from the registry afterwards."""
    made = []

    def new(name="Walker"):
        made.append(f"{name}{next(_ids)}-v0")
        return made[-1]

    yield new
    for env_id in made:
        gym.envs.registry.pop(env_id, None)


def _quiet_check_env(env):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for advice in ADVICE:
            warnings.filterwarnings("ignore", message=advice)
        check_env(env)


# ---------------------------------------------------------------------- registration and make
def test_make_builds_a_new_env_of_the_class_with_the_registered_kwargs(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=1.0, to_numpy=True)
    first, second = gym.make(env_id), gym.make(env_id)
    assert isinstance(first.unwrapped, ExportedGymEnv)
    assert first.unwrapped.torchrl_env is not second.unwrapped.torchrl_env
    assert isinstance(first.unwrapped.torchrl_env, Walker)
    assert first.unwrapped.torchrl_env.start == 1.0
    assert gym.make(env_id, start=2.0).unwrapped.torchrl_env.start == 2.0  # make kwargs win


def test_an_entry_point_factory_is_built_instead_of_the_class(gym_id):
    env_id = gym_id()
    EnvBase.register_gym(env_id, entry_point=Walker, start=0.5, to_numpy=True)
    assert isinstance(gym.make(env_id).unwrapped.torchrl_env, Walker)


def test_rllibs_register_gym_is_what_envbase_reaches(gym_id):
    env_id = gym_id()
    register_gym(Walker, env_id, start=0.0, to_numpy=True)
    assert isinstance(gym.make(env_id).unwrapped.torchrl_env, Walker)


def test_spaces_come_from_the_specs_with_nested_keys_as_nested_dicts(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, to_numpy=True)
    env = gym.make(env_id)
    assert env.action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert isinstance(env.observation_space["other"], gym.spaces.Dict)
    assert env.observation_space["position"] == gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    assert env.observation_space["other"]["steps"].dtype == np.int64


def test_numpy_results_are_gymnasium_tuples(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, to_numpy=True)
    env = gym.make(env_id)
    obs, info = env.reset(seed=0)
    assert info == {} and obs in env.observation_space
    obs, reward, terminated, truncated, info = env.step(np.array([0.5], np.float32))
    assert isinstance(obs["position"], np.ndarray) and obs in env.observation_space
    assert obs["other"]["steps"].tolist() == [1]
    assert reward == 0.5 and isinstance(reward, float)
    assert terminated is False and truncated is False


def test_tensor_results_keep_the_env_tensors(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, disable_env_checker=True)
    env = gym.make(env_id)
    obs, _ = env.reset(seed=0)
    assert isinstance(obs["position"], torch.Tensor)
    obs, reward, *_ = env.step(torch.tensor([0.25]))
    assert isinstance(obs["other"]["steps"], torch.Tensor)
    assert obs["other"]["steps"].dtype == torch.int64
    assert reward == 0.25


def test_terminated_and_truncated_come_from_the_done_keys(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, limit=4, to_numpy=True)
    env = gym.make(env_id)
    env.reset(seed=0)
    flags = [env.step(np.array([1.0], np.float32))[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (True, False)]
    env.reset(seed=0)
    flags = [env.step(np.zeros(1, np.float32))[2:4] for _ in range(4)]
    assert flags[-1] == (False, True) and flags[:-1] == [(False, False)] * 3


def test_info_keys_move_entries_from_the_observation_to_info(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, info_keys=["other", "truncated"], to_numpy=True)
    env = gym.make(env_id)
    assert set(env.observation_space) == {"position"}
    obs, info = env.reset(seed=0)
    assert set(obs) == {"position"} and info["other"]["steps"].tolist() == [0]
    _, _, _, _, info = env.step(np.zeros(1, np.float32))
    assert info["other"]["steps"].tolist() == [1] and info["truncated"].tolist() == [False]
    # info_keys can be given to gymnasium.make too
    env = gym.make(env_id, info_keys=[("other", "steps")])
    assert set(env.observation_space) == {"position"}


def test_a_transform_is_applied_and_each_env_gets_its_own_copy(gym_id):
    env_id = gym_id()
    transform = ObservationNorm(loc=1.0, scale=2.0, in_keys=["position"])
    Walker.register_gym(env_id, start=0.0, transform=transform, to_numpy=True)
    first, second = gym.make(env_id), gym.make(env_id)
    base = first.unwrapped.torchrl_env
    assert isinstance(base, TransformedEnv)
    assert base.transform is not second.unwrapped.torchrl_env.transform
    assert base.transform is not transform
    obs, _ = first.reset(seed=0)
    raw = base.base_env.position
    np.testing.assert_allclose(obs["position"], (raw * 2.0 + 1.0).numpy())


def test_one_hot_actions_take_discrete_actions(gym_id):
    env_id = gym_id()
    DiscreteActionVecMockEnv.register_gym(env_id, to_numpy=True)
    env = gym.make(env_id)
    assert env.action_space == gym.spaces.Discrete(7)
    before, _ = env.reset(seed=0)
    after, *_ = env.step(3)  # the mock adds the one-hot action / 100 to its state
    np.testing.assert_allclose(
        after["observation"] - before["observation"], np.eye(7)[3] / 100, atol=1e-6
    )
    tensor_env = gym.make(env_id, to_numpy=False, disable_env_checker=True)
    before, _ = tensor_env.reset(seed=0)
    after, *_ = tensor_env.step(torch.tensor(2))  # a label tensor is one-hot encoded
    torch.testing.assert_close(after["observation"] - before["observation"], torch.eye(7)[2] / 100)


def test_returned_data_never_shares_memory_with_the_env(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, to_numpy=True)
    env = gym.make(env_id)
    first, _ = env.reset(seed=0)
    kept = copy.deepcopy(first)
    second, *_ = env.step(np.ones(1, np.float32))
    second["position"] += 100  # the user owns what it gets
    third, *_ = env.step(np.ones(1, np.float32))
    np.testing.assert_array_equal(first["position"], kept["position"])
    np.testing.assert_allclose(third["position"] - kept["position"], [2.0], rtol=1e-6)


def test_seeded_resets_replay(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, to_numpy=True)
    one, other = gym.make(env_id), gym.make(env_id)
    first = [one.reset(seed=3)[0]["position"], one.reset()[0]["position"]]
    again = [other.reset(seed=3)[0]["position"], other.reset()[0]["position"]]
    assert first == again
    assert one.reset(seed=3)[0]["position"] != one.reset(seed=4)[0]["position"]


@pytest.mark.parametrize("env_cls", [ContinuousActionVecMockEnv, DiscreteActionVecMockEnv])
def test_check_env_passes_on_a_registered_mock(gym_id, env_cls):
    env_id = gym_id()
    env_cls.register_gym(env_id, to_numpy=True)
    _quiet_check_env(gym.make(env_id).unwrapped)


def test_check_env_passes_on_a_registered_transformed_pendulum(gym_id):
    env_id = gym_id("Pendulum")
    transform = [ObservationNorm(loc=0.0, scale=0.5, in_keys=["observation"]), RewardSum()]
    GymEnv.register_gym(env_id, env_name="Pendulum-v1", to_numpy=True)
    env = gym.make(env_id, transform=StepCounter(50))
    _quiet_check_env(env.unwrapped)
    from rltransforms import Compose

    env = gym.make(env_id, transform=Compose(*transform))
    _quiet_check_env(env.unwrapped)
    obs, _ = env.reset(seed=1)
    assert set(obs) == {"observation", "episode_reward"}


def test_max_episode_steps_and_autoreset_use_gymnasium_wrappers(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, to_numpy=True, max_episode_steps=2, autoreset=True)
    env = gym.make(env_id)
    env.reset(seed=0)
    results = [env.step(np.zeros(1, np.float32)) for _ in range(3)]
    assert [r[3] for r in results] == [False, True, False]
    assert results[2][0]["other"]["steps"].tolist() == [0]  # autoreset: a fresh episode


def test_closing_twice_is_harmless(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, to_numpy=True)
    env = gym.make(env_id)
    env.close()
    env.close()
    assert env.unwrapped.torchrl_env.is_closed


# ---------------------------------------------------------------------- refusals
def test_a_batched_env_is_refused_by_make_with_a_make_vec_hint(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, batch_size=(2,), to_numpy=True)
    message = BATCHED_SINGLE.format(env="Walker", batch=(2,), id=env_id)
    with pytest.raises(ValueError, match=re.escape(message)):
        gym.make(env_id)


def test_an_unknown_info_key_is_named(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, info_keys=["speed"], to_numpy=True)
    with pytest.raises(KeyError, match="info key 'speed' is not an entry of Walker"):
        gym.make(env_id)


def test_several_rewards_are_refused(gym_id):
    def several_rewards():
        env = Walker(0.0)
        env.full_reward_spec = Composite(a=Unbounded(1), b=Unbounded(1))
        return env

    env_id = gym_id()
    EnvBase.register_gym(env_id, entry_point=several_rewards, to_numpy=True)
    message = SEVERAL_REWARDS.format(env="Walker", keys=["a", "b"])
    with pytest.raises(ValueError, match=re.escape(message)):
        gym.make(env_id)


def test_registration_refusals(gym_id):
    with pytest.raises(TypeError, match=re.escape(ABSTRACT_ENTRY.format(cls="EnvBase", id="X-v0"))):
        EnvBase.register_gym("X-v0")
    message = GYM_UNRECOGNIZED_KWARG.format("apply_api_compatibility", gym.__version__)
    with pytest.raises(TypeError, match=re.escape(message)):
        Walker.register_gym(gym_id(), start=0.0, apply_api_compatibility=True)
    with pytest.raises(ImportError, match="rllibs wraps gymnasium only"):
        Walker.register_gym(gym_id(), start=0.0, backend="gym")
    Walker.register_gym(gym_id(), start=0.0, backend="gymnasium")


def test_stepping_before_reset_is_refused(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, to_numpy=True, order_enforce=False)
    with pytest.raises(gym.error.ResetNeeded):
        gym.make(env_id, disable_env_checker=True).step(np.zeros(1, np.float32))


# ---------------------------------------------------------------------- vector envs
def test_make_vec_of_a_batched_env_is_a_vector_env_with_batched_spaces(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, batch_size=(3,), to_numpy=True)
    env = gym.make_vec(env_id)
    assert isinstance(env, ExportedGymVectorEnv) and env.num_envs == 3
    assert env.single_action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert env.action_space.shape == (3, 1)
    assert env.observation_space["other"]["steps"].shape == (3, 1)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    obs, _ = env.reset(seed=0)
    obs, rewards, terminated, truncated, _ = env.step(np.full((3, 1), 0.5, np.float32))
    assert obs["position"].shape == (3, 1) and rewards.tolist() == [0.5] * 3
    assert terminated.dtype == bool and terminated.shape == truncated.shape == (3,)


def test_same_step_autoreset_keeps_the_final_observation(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, batch_size=(2,), to_numpy=True, info_keys=["other"])
    env = gym.make_vec(env_id)
    env.reset(seed=0)
    actions = np.array([[1.0], [0.0]], np.float32)
    for _ in range(2):
        obs, _, terminated, _, info = env.step(actions)
        assert "final_obs" not in info and not terminated.any()
    obs, _, terminated, _, info = env.step(actions)
    assert terminated.tolist() == [True, False]
    assert info["_final_obs"].tolist() == [True, False] and info["final_obs"][1] is None
    assert info["final_obs"][0]["position"][0] >= 3.0  # the last observation of the episode
    assert obs["position"][0, 0] < 1.0  # the new episode's first observation
    assert info["other"]["steps"].tolist() == [[0], [3]] and info["_other"].all()
    assert info["final_info"]["other"]["steps"].tolist() == [[3], [3]]


def test_disabled_autoreset_resets_through_the_reset_mask(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, batch_size=(2,), to_numpy=True, info_keys=["other"])
    env = gym.make_vec(env_id, autoreset_mode=AutoresetMode.DISABLED)
    env.reset(seed=0)
    env.step(np.ones((2, 1), np.float32))
    obs, info = env.reset(options={"reset_mask": np.array([False, True])})
    assert info["other"]["steps"].tolist() == [[1], [0]]
    with pytest.raises(ValueError, match="needs 2 booleans, got shape \\(3,\\)"):
        env.reset(options={"reset_mask": np.ones(3, bool)})


def test_max_episode_steps_truncates_each_sub_env(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, batch_size=(2,), to_numpy=True, max_episode_steps=2)
    env = gym.make_vec(env_id)
    env.reset(seed=0)
    truncated = [env.step(np.zeros((2, 1), np.float32))[3].tolist() for _ in range(3)]
    assert truncated == [[False, False], [True, True], [False, False]]


def test_seeded_vector_resets_replay(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, batch_size=(2,), to_numpy=True)
    one, other = gym.make_vec(env_id), gym.make_vec(env_id)
    np.testing.assert_array_equal(
        one.reset(seed=5)[0]["position"], other.reset(seed=5)[0]["position"]
    )
    with pytest.raises(ValueError, match=re.escape(PER_ENV_SEEDS.format(seed=[1, 2]))):
        one.reset(seed=[1, 2])


def test_vector_refusals(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, batch_size=(2,), to_numpy=True)
    message = NUM_ENVS_MISMATCH.format(id=env_id, num_envs=3, batch=(2,), size=2)
    with pytest.raises(ValueError, match=re.escape(message)):
        gym.make_vec(env_id, num_envs=3)
    with pytest.raises(
        ValueError, match=re.escape(NEXT_STEP_UNSUPPORTED.format(mode=AutoresetMode.NEXT_STEP))
    ):
        gym.make_vec(env_id, autoreset_mode=AutoresetMode.NEXT_STEP)


def test_make_vec_of_an_unbatched_env_batches_copies(gym_id):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, to_numpy=True, max_episode_steps=5)
    env = gym.make_vec(env_id, num_envs=3)
    assert isinstance(env, gym.vector.SyncVectorEnv)
    envs = [sub.unwrapped.torchrl_env for sub in env.envs]
    assert len({id(e) for e in envs}) == 3
    obs, _ = env.reset(seed=0)
    assert obs["position"].shape == (3, 1)


def test_a_counting_mock_vector_env_reports_its_terminations(gym_id):
    env_id = gym_id("Counting")
    CountingBatchedEnv.register_gym(
        env_id, batch_size=(2,), max_steps=torch.tensor([1, 2]), to_numpy=True
    )
    env = gym.make_vec(env_id)
    env.reset(seed=0)
    ones = np.ones((2, 1), np.int8)
    flags = [env.step(ones)[2].tolist() for _ in range(3)]
    assert flags == [[False, False], [True, False], [False, True]]


def _parallel_walkers(start_method):
    from rlbatched import ParallelEnv

    return ParallelEnv(2, functools.partial(Walker, 0.0), mp_start_method=start_method)


@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_a_parallel_env_is_a_vector_env_whose_workers_close_with_it(gym_id, start_method):
    env_id = gym_id("Parallel")
    EnvBase.register_gym(
        env_id, entry_point=_parallel_walkers, start_method=start_method, to_numpy=True
    )
    env = gym.make_vec(env_id)
    assert env.num_envs == 2
    env.reset(seed=0)
    actions = np.array([[1.0], [-0.5]], np.float32)
    for _ in range(2):
        obs, rewards, terminated, _, _ = env.step(actions)
    obs, rewards, terminated, _, info = env.step(actions)
    assert rewards.tolist() == [1.0, -0.5] and terminated.tolist() == [True, False]
    assert info["final_obs"][0]["other"]["steps"].tolist() == [3]
    assert obs["other"]["steps"].tolist() == [[0], [3]]
    env.close()
    assert env.torchrl_env.is_closed


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA required")
@pytest.mark.parametrize("to_numpy", [True, False])
def test_an_env_on_cuda_is_exported_from_its_device(gym_id, to_numpy):
    env_id = gym_id()
    Walker.register_gym(env_id, start=0.0, device="cuda", to_numpy=to_numpy)
    env = gym.make(env_id, disable_env_checker=True)
    obs, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, _ = env.step(np.ones(1, np.float32))
    assert reward == 1.0 and terminated is False
    if to_numpy:
        assert isinstance(obs["position"], np.ndarray)
    else:
        assert obs["position"].device.type == "cuda"
    vector_id = gym_id()
    Walker.register_gym(vector_id, start=0.0, batch_size=(2,), device="cuda", to_numpy=to_numpy)
    envs = gym.make_vec(vector_id)
    envs.reset(seed=0)
    for _ in range(3):
        obs, rewards, terminated, _, info = envs.step(np.ones((2, 1), np.float32))
    assert terminated.tolist() == [True, True] and info["_final_obs"].tolist() == [True, True]

"""EnvBase specs: defaults, setters, done completion, locking, cached key lists."""

from __future__ import annotations

import re

import pytest
import torch
from _rlcore_envs import CountingEnv, HeterogeneousEnv, NestedCountingEnv, done_leaf
from tensordict import TensorDict

from rlcore import EnvBase, check_env_specs
from rlcore._env_specs import MANY_KEYS, NOT_A_COMPOSITE, NOT_A_SPEC, SPEC_BATCH_MISMATCH
from rlspecs import Bounded, Categorical, Composite, Unbounded


class BareEnv(EnvBase):
    def _set_seed(self, seed):
        pass


def test_default_specs():
    env = BareEnv(batch_size=(2,))
    assert env.done_keys == ["done", "terminated"]
    assert env.full_done_spec["done"].dtype == torch.bool
    assert env.full_done_spec["done"].shape == (2, 1)
    assert env.reward_keys == ["reward"]
    assert env.reward_spec.shape == (2, 1)
    assert env.action_keys == []
    assert env.observation_keys == []
    assert env.state_keys == []
    assert env.output_spec.is_locked and env.input_spec.is_locked
    assert set(env.output_spec.keys()) == {
        "full_observation_spec",
        "full_reward_spec",
        "full_done_spec",
    }
    assert set(env.input_spec.keys()) == {"full_action_spec", "full_state_spec"}


def test_leaf_specs_go_under_default_keys():
    env = BareEnv()
    env.action_spec = Bounded(-1, 1, shape=(3,))
    env.reward_spec = Unbounded(1)
    env.observation_spec = Unbounded(4)
    assert env.action_keys == ["action"] and isinstance(env.full_action_spec, Composite)
    assert env.action_spec == env.full_action_spec["action"]
    assert env.reward_spec == env.full_reward_spec["reward"]
    assert env.observation_keys == ["observation"]


def test_leaf_done_spec_becomes_done_and_terminated():
    env = BareEnv()
    env.done_spec = done_leaf()
    assert env.done_keys == ["done", "terminated"]
    assert isinstance(env.done_spec, Composite)


@pytest.mark.parametrize("given, added", [("done", "terminated"), ("terminated", "done")])
def test_done_composite_is_completed_at_every_level(given, added):
    env = BareEnv()
    env.done_spec = Composite({given: done_leaf(), ("agent", given): done_leaf()})
    assert added in env.full_done_spec.keys()
    assert ("agent", added) in env.full_done_spec.keys(True)


def test_composite_setters_replace_the_group():
    env = CountingEnv()
    env.full_reward_spec = Composite(a=Unbounded(1), b=Unbounded(1))
    assert env.reward_keys == ["a", "b"]
    assert isinstance(env.reward_spec, Composite)
    env.state_spec = Composite(hidden=Unbounded(2))
    assert env.state_keys == ["hidden"]
    env.state_spec = None
    assert env.state_keys == []


def test_output_and_input_spec_setters_fill_missing_entries_and_lock():
    env = BareEnv()
    env.output_spec = Composite(full_observation_spec=Composite(obs=Unbounded(2)))
    assert env.observation_keys == ["obs"]
    assert env.done_keys == ["done", "terminated"]
    assert env.output_spec.is_locked
    env.input_spec = Composite(full_action_spec=Composite(act=Unbounded(2)))
    assert env.action_keys == ["act"] and env.state_keys == []
    assert env.input_spec.is_locked


def test_output_spec_is_locked_at_its_top_level_only():
    # torchrl 0.4: the containers refuse new or deleted groups, the groups are writable
    env = CountingEnv()
    with pytest.raises(RuntimeError, match="locked"):
        env.output_spec["full_done_spec"] = Composite(done=done_leaf())
    with pytest.raises(RuntimeError, match="locked"):
        del env.input_spec["full_state_spec"]
    assert not env.full_done_spec.is_locked and not env.full_action_spec.is_locked
    env.output_spec["full_done_spec", "truncated"] = done_leaf()
    assert env.done_keys == ["done", "terminated", "truncated"]


def test_locked_output_spec_can_be_unlocked_and_mutated():
    env = CountingEnv()
    env.output_spec.unlock_()
    env.output_spec["full_done_spec", "done"].dtype = torch.int
    assert env.full_done_spec["done"].dtype == torch.int


def test_key_lists_are_cached_and_refreshed_by_setters():
    env = CountingEnv()
    keys = env.observation_keys
    assert env.observation_keys is keys
    env.observation_spec = Composite(other=Unbounded(1))
    assert env.observation_keys == ["other"]


def test_nested_keys_and_reset_keys():
    env = NestedCountingEnv(has_root_done=True)
    assert env.action_key == ("data", "action")
    assert env.reward_key == ("data", "reward")
    assert env.done_keys == ["done", "terminated", ("data", "done"), ("data", "terminated")]
    assert env.done_key == "done"
    assert env.reset_keys == ["_reset", ("data", "_reset")]
    assert env.done_keys_groups == [
        ["done", "terminated"],
        [("data", "done"), ("data", "terminated")],
    ]
    assert env.observation_keys == [("data", "states")]
    assert env.reward_spec == env.output_spec["full_reward_spec", "data", "reward"]


def test_lazy_stacked_spec_keys():
    env = HeterogeneousEnv()
    assert env.observation_keys == [("agents", "vector")]
    assert env.action_keys == [("agents", "action")]
    assert env.reset_keys == [("agents", "_reset")]


def test_single_key_properties_raise_with_several_keys():
    env = BareEnv()
    env.full_reward_spec = Composite(a=Unbounded(1), b=Unbounded(1))
    with pytest.raises(
        KeyError, match=re.escape(MANY_KEYS.format(name="reward", n=2, keys=["a", "b"]))
    ):
        _ = env.reward_key
    with pytest.raises(KeyError, match="action_key requested"):
        _ = env.action_key


def test_spec_batch_mismatch_raises():
    env = BareEnv(batch_size=(4,))
    message = SPEC_BATCH_MISMATCH.format(name="action", shape=(3,), batch_size=(4,))
    with pytest.raises(ValueError, match=re.escape(message)):
        env.action_spec = Unbounded(3)
    with pytest.raises(ValueError, match="The observation spec has shape"):
        env.observation_spec = Composite(obs=Unbounded(3))


def test_spec_type_errors():
    env = BareEnv()
    with pytest.raises(TypeError, match=re.escape(NOT_A_SPEC.format(name="action", type="int"))):
        env.action_spec = 3
    with pytest.raises(
        TypeError, match=re.escape(NOT_A_COMPOSITE.format(name="output_spec", type="int"))
    ):
        env.output_spec = 3
    with pytest.raises(
        TypeError, match=re.escape(NOT_A_COMPOSITE.format(name="input_spec", type="int"))
    ):
        env.input_spec = 3
    with pytest.raises(
        TypeError, match=re.escape(NOT_A_COMPOSITE.format(name="state_spec", type="Unbounded"))
    ):
        env.state_spec = Unbounded(1)


def test_setting_specs_does_not_lock_or_alias_the_given_composite():
    env = BareEnv()
    spec = Composite(obs=Unbounded(2))
    env.observation_spec = spec
    assert not spec.is_locked
    spec["other"] = Unbounded(1)
    assert env.observation_keys == ["obs"]


def test_batch_size_setter_reshapes_specs():
    env = BareEnv()
    env.batch_size = (3,)
    assert env.output_spec.shape == (3,)
    assert env.full_done_spec.shape == (3,)
    assert env.specs.shape == (3,)


def test_specs_may_be_set_before_base_init():
    class Early(EnvBase):
        def __init__(self):
            self.batch_size = (2,)
            self.observation_spec = Composite(obs=Unbounded((2, 3)), shape=(2,))
            super().__init__()

        def _set_seed(self, seed):
            pass

    env = Early()
    assert env.batch_size == (2,)
    assert env.observation_keys == ["obs"]
    assert env.full_done_spec["done"].shape == (2, 1)


def test_specs_property_holds_both_containers():
    env = CountingEnv(batch_size=(2,))
    specs = env.specs
    assert specs.shape == (2,)
    assert specs["output_spec", "full_done_spec", "done"] == env.full_done_spec["done"]
    assert specs["input_spec", "full_action_spec", "action"] == env.action_spec


def test_batch_size_setter_on_built_specs():
    env = CountingEnv(batch_size=(2, 3))
    env.batch_size = (2,)
    assert env.batch_size == (2,)
    assert env.output_spec.shape == (2,) and env.full_observation_spec.shape == (2,)
    assert env.output_spec.is_locked
    with pytest.raises(ValueError, match="must match the Composite's shape"):
        env.batch_size = (5,)
    assert env.batch_size == (2,) and env.output_spec.shape == (2,)
    assert env.output_spec.is_locked


def test_device_setter_clears_caches():
    env = CountingEnv()
    keys = env.done_keys
    env.device = "cpu"
    assert env.device == torch.device("cpu")
    assert env.done_keys is not keys


# ---------------------------------------------------------------------- specs set on the class
class ClassSpecsEnv(EnvBase):
    """Current torchrl's mock pattern: specs assigned to the class in ``__new__``."""

    def __new__(cls, *args, batch_size=(), **kwargs):
        batch = torch.Size(batch_size)
        cls._output_spec = Composite(
            full_observation_spec=Composite(observation=Unbounded((*batch, 1)), shape=batch),
            full_reward_spec=Composite(reward=Unbounded((*batch, 1)), shape=batch),
            full_done_spec=Composite(
                done=Categorical(2, (*batch, 1), dtype=torch.bool), shape=batch
            ),
            shape=batch,
        )
        cls._input_spec = Composite(
            full_action_spec=Composite(action=Unbounded((*batch, 1)), shape=batch),
            full_state_spec=Composite(shape=batch),
            shape=batch,
        )
        return super().__new__(cls, *args, **kwargs)

    def __init__(self, batch_size=(), device="cpu"):
        super().__init__(device=device, batch_size=batch_size)

    def _reset(self, tensordict):
        return TensorDict({"observation": torch.zeros(*self.batch_size, 1)}, self.batch_size)

    def _step(self, tensordict):
        action = tensordict["action"]
        return TensorDict({"observation": action, "reward": action}, self.batch_size)

    def _set_seed(self, seed):
        pass


@pytest.mark.parametrize("batch_size", [(), (2,)])
def test_specs_set_on_the_class_in_new_are_the_envs(batch_size):
    env = ClassSpecsEnv(batch_size=batch_size)
    assert env.action_keys == ["action"] and env.observation_keys == ["observation"]
    assert "_output_spec" not in vars(ClassSpecsEnv) and "_input_spec" not in vars(ClassSpecsEnv)
    assert env.full_action_spec["action"].device == torch.device("cpu")
    check_env_specs(env)
    # the class keeps no specs: each env gets its own
    other = ClassSpecsEnv(batch_size=batch_size)
    assert other.full_action_spec is not env.full_action_spec
    td = env.rand_step(env.reset())
    assert torch.equal(td["next", "observation"], td["action"])


def test_batch_locked_constructor_keyword():
    class Unlockable(CountingEnv):
        def __init__(self, _batch_locked=True, **kwargs):
            super().__init__(**kwargs)

    assert Unlockable(_batch_locked=False).batch_locked is False
    assert Unlockable().batch_locked is True

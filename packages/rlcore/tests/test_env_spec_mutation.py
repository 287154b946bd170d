"""Env specs edited in place, as torchrl 0.4 users do, and no cache derived from them going stale.

Each pattern (add, replace, delete; root and nested keys; inside ``__init__`` and after
construction) is checked two ways: every cached key list and step plan equals what a cold
cache computes from the specs now, and ``check_env_specs`` passes on an env whose outputs
follow its specs.
"""

from __future__ import annotations

import copy
import pickle

import pytest
import torch
from tensordict import TensorDict

from rlcore import EnvBase, EnvCreator, check_env_specs
from rlmocks import SpecDrivenEnv
from rlspecs import Bounded, Categorical, Composite, Unbounded


def done_leaf(batch_size=()) -> Categorical:
    return Categorical(2, shape=(*batch_size, 1), dtype=torch.bool)


def _batch(env):
    return tuple(env.batch_size)


# module-level edits (picklable): each mutates a freshly built SpecDrivenEnv's specs in place
def add_root_observation(env):
    env.observation_spec["pixels"] = Unbounded((*_batch(env), 2, 2))


def add_nested_observation(env):
    env.observation_spec["agent", "pos"] = Unbounded((*_batch(env), 2))


def replace_observation(env):
    env.observation_spec["obs"] = Unbounded((*_batch(env), 5), dtype=torch.float64)


def delete_observation(env):
    del env.observation_spec["obs"]


def add_truncated(env):
    env.full_done_spec["truncated"] = env.full_done_spec["done"].clone()


def add_nested_done(env):
    env.full_done_spec["agent", "done"] = done_leaf(_batch(env))
    env.full_done_spec["agent", "terminated"] = done_leaf(_batch(env))


def replace_action(env):
    env.full_action_spec["action"] = Bounded(5, 6, shape=(*_batch(env), 1))


def add_nested_action(env):
    env.full_action_spec["agent", "act"] = Bounded(-2, 2, shape=(*_batch(env), 2))


def add_state(env):
    env.full_state_spec["hidden"] = Unbounded((*_batch(env), 4))


def add_nested_reward(env):
    env.full_reward_spec["agent", "reward"] = Unbounded((*_batch(env), 1))


def through_output_spec(env):
    env.output_spec["full_observation_spec", "extra"] = Unbounded((*_batch(env), 1))
    del env.output_spec["full_observation_spec", "obs"]


def through_input_spec(env):
    env.input_spec["full_state_spec", "memory", "h"] = Unbounded((*_batch(env), 2))


def update_group(env):
    env.full_observation_spec.update(
        {"obs": Unbounded((*_batch(env), 2)), "more": Unbounded(_batch(env))}
    )


def pop_and_put_back(env):
    obs = env.observation_spec.pop("obs")
    env.observation_spec["renamed"] = obs


EDITS = [
    add_root_observation,
    add_nested_observation,
    replace_observation,
    delete_observation,
    add_truncated,
    add_nested_done,
    replace_action,
    add_nested_action,
    add_state,
    add_nested_reward,
    through_output_spec,
    through_input_spec,
    update_group,
    pop_and_put_back,
]


def derived(env: EnvBase) -> dict:
    """Everything the env caches from its specs, in comparable form."""
    step_mdp = env._step_mdp
    return {
        "action_keys": list(env.action_keys),
        "reward_keys": list(env.reward_keys),
        "done_keys": list(env.done_keys),
        "observation_keys": list(env.observation_keys),
        "state_keys": list(env.state_keys),
        "reset_keys": list(env.reset_keys),
        "done_keys_groups": [list(g) for g in env.done_keys_groups],
        "done_levels": [(lv.prefix, lv.names, lv.shapes) for lv in env._done_levels],
        "reward_shapes": list(env._reward_shapes),
        "any_done_keys": list(env._any_done_keys),
        "flat_done": env._flat_done,
        "complete_step_keys": list(env._complete_step_keys),
        "root_action_leaves": [(k, id(s)) for k, s in env._root_action_leaves()],
        "step_mdp": (step_mdp.keys_from_next, step_mdp.keys_from_root, step_mdp.exclude_from_root),
    }


def assert_caches_fresh(env: EnvBase) -> None:
    cached = derived(env)
    env.empty_cache()
    assert cached == derived(env)


@pytest.mark.parametrize("batch_size", [(), (2,)])
@pytest.mark.parametrize("edit", EDITS)
def test_edit_after_construction(edit, batch_size):
    env = SpecDrivenEnv(batch_size)
    check_env_specs(env)  # warms every cache, step plans included
    before = derived(env)
    edit(env)
    assert derived(env) != before or edit is replace_observation
    assert_caches_fresh(env)
    check_env_specs(env)


@pytest.mark.parametrize("edit", EDITS)
def test_edit_inside_init(edit):
    env = SpecDrivenEnv((2,), edit=edit)
    assert_caches_fresh(env)
    check_env_specs(env)


def test_each_key_list_follows_the_edits():
    env = SpecDrivenEnv()
    add_truncated(env)
    assert env.done_keys == ["done", "terminated", "truncated"]
    add_nested_done(env)
    assert env.reset_keys == ["_reset", ("agent", "_reset")]
    assert env.done_keys_groups[1] == [("agent", "done"), ("agent", "terminated")]
    add_nested_observation(env)
    assert env.observation_keys == ["obs", ("agent", "pos")]
    delete_observation(env)
    assert env.observation_keys == [("agent", "pos")]
    add_nested_action(env)
    assert env.action_keys == ["action", ("agent", "act")]
    add_state(env)
    assert env.state_keys == ["hidden"]
    add_nested_reward(env)
    assert env.reward_keys == ["reward", ("agent", "reward")]
    td = env.rollout(3)
    assert ("next", "truncated") in td.keys(True) and ("next", "agent", "pos") in td.keys(True)


def test_replaced_action_leaf_is_the_one_sampled():
    env = SpecDrivenEnv()
    env.rand_action(env.reset())  # caches the root action leaves
    replace_action(env)
    action = env.rand_action(env.reset())["action"]
    assert bool(((action >= 5) & (action <= 6)).all())


def test_in_place_leaf_changes_reach_the_step_plans():
    env = SpecDrivenEnv()
    check_env_specs(env)
    env.full_reward_spec["reward"].shape = torch.Size([1, 1])  # reshaped from (1,) by the step
    assert env._reward_shapes == [("reward", torch.Size([1, 1]))]
    assert env.rand_step(env.reset())["next", "reward"].shape == (1, 1)
    env.full_done_spec["truncated"] = done_leaf()
    env.full_done_spec["truncated"].shape = torch.Size([1, 1])
    assert env._done_levels[0].shapes[-1] == (1, 1)


def test_nested_composite_shape_and_device_changes_empty_the_cache():
    env = SpecDrivenEnv((2,))
    env.observation_spec["agent"] = Composite(pos=Unbounded((2, 3, 1)), shape=(2, 3))
    keys = env.observation_keys
    env.observation_spec["agent"].shape = (2,)
    assert env.observation_keys is not keys
    keys = env.observation_keys
    env.observation_spec["agent"].device = "cpu"
    assert env.observation_keys is not keys
    keys = env.observation_keys
    env.observation_spec.clear_device_()
    assert env.observation_keys is not keys


def test_containers_stay_locked_at_their_top_level():
    env = SpecDrivenEnv()
    with pytest.raises(RuntimeError, match="locked"):
        env.output_spec["full_observation_spec"] = Composite()
    with pytest.raises(RuntimeError, match="locked"):
        del env.input_spec["full_action_spec"]
    env.observation_spec = Composite(other=Unbounded(1))  # the setters replace groups
    assert env.observation_keys == ["other"]
    assert env.output_spec.is_locked and not env.full_observation_spec.is_locked


def test_a_nested_lock_set_by_the_user_is_kept_by_the_setters():
    env = SpecDrivenEnv()
    env.observation_spec.lock_()
    env.reward_spec = Unbounded(1)
    with pytest.raises(RuntimeError, match="locked"):
        env.observation_spec["x"] = Unbounded(1)


def test_specs_read_before_an_edit_are_the_objects_edited():
    env = SpecDrivenEnv()
    group = env.full_observation_spec
    group["late"] = Unbounded(1)  # a reference kept from earlier still edits the env
    assert "late" in env.observation_keys


def test_moved_env_observes_its_new_specs():
    env = SpecDrivenEnv()
    group = env.full_observation_spec
    env.to("cpu")  # from no device: the specs are copies now
    assert env.full_observation_spec is not group
    _ = env.observation_keys
    env.observation_spec["x"] = Unbounded(1)
    assert "x" in env.observation_keys


def test_batch_size_change_keeps_specs_observed():
    env = SpecDrivenEnv((2, 3))
    env.batch_size = (2,)
    _ = env.observation_keys
    env.observation_spec["x"] = Unbounded((2, 1))
    assert "x" in env.observation_keys


# ------------------------------------------------------------------ copies and pickles
def _assert_observed(env: EnvBase) -> None:
    _ = env.observation_keys
    env.observation_spec["after_copy"] = Unbounded((*env.batch_size, 1))
    assert "after_copy" in env.observation_keys


@pytest.mark.parametrize(
    "copy_env",
    [
        pytest.param(lambda e: pickle.loads(pickle.dumps(e)), id="pickle"),
        pytest.param(copy.deepcopy, id="deepcopy"),
    ],
)
def test_copied_envs_observe_their_own_specs(copy_env):
    env = SpecDrivenEnv((2,), edit=add_nested_done)
    _ = env.observation_keys
    clone = copy_env(env)
    _assert_observed(clone)
    assert "after_copy" not in env.observation_keys
    _assert_observed(env)
    check_env_specs(clone)


def test_env_creator_pickles_with_observed_specs():
    creator = EnvCreator(SpecDrivenEnv, {"edit": add_truncated})
    restored = pickle.loads(pickle.dumps(creator))
    assert "truncated" in restored.done_keys
    env = restored()
    _assert_observed(env)


def test_shallow_copy_observes_with_its_own_observer():
    env = SpecDrivenEnv()
    twin = copy.copy(env)  # shares the spec objects: an edit through either reaches both
    _ = env.observation_keys, twin.observation_keys
    twin.observation_spec["x"] = Unbounded(1)
    assert "x" in env.observation_keys and "x" in twin.observation_keys


def test_no_step_after_an_edit_sees_data_of_the_old_specs():
    env = SpecDrivenEnv()
    td = env.reset()
    env.rand_step(td)
    env.observation_spec["obs"] = Unbounded(2)
    root = env.reset()
    step = env.rand_step(root)
    assert step["next", "obs"].shape == (2,)
    assert isinstance(step, TensorDict)

"""step_mdp and StepMDP: moving "next" up, exclusions, identity of tensors, nesting, lazy stacks."""

from __future__ import annotations

import re

import pytest
import torch
from _rlcore_envs import CountingEnv, HeterogeneousEnv, NestedCountingEnv
from tensordict import LazyStackedTensorDict, TensorDict

from rlcore import StepMDP, step_mdp
from rlcore._step_mdp import NO_NEXT


def _transition() -> TensorDict:
    return TensorDict(
        {
            "obs": torch.zeros(4, 2),
            "action": torch.ones(4, 1),
            "done": torch.zeros(4, 1, dtype=torch.bool),
            "reward": torch.zeros(4, 1),
            "other": torch.full((4, 1), 3.0),
            "next": {
                "obs": torch.ones(4, 2),
                "reward": torch.ones(4, 1),
                "done": torch.ones(4, 1, dtype=torch.bool),
            },
        },
        [4],
    )


def test_step_mdp_moves_next_entries_to_root_without_copies():
    td = _transition()
    out = step_mdp(td)
    assert set(out.keys()) == {"obs", "done", "other"}
    assert out["obs"] is td["next", "obs"]
    assert out["done"] is td["next", "done"]
    assert out["other"] is td["other"]


@pytest.mark.parametrize("keep_other", [True, False])
@pytest.mark.parametrize("exclude_reward", [True, False])
@pytest.mark.parametrize("exclude_done", [True, False])
@pytest.mark.parametrize("exclude_action", [True, False])
def test_step_mdp_flags_select_entries(keep_other, exclude_reward, exclude_done, exclude_action):
    out = step_mdp(
        _transition().lock_(),
        keep_other=keep_other,
        exclude_reward=exclude_reward,
        exclude_done=exclude_done,
        exclude_action=exclude_action,
    )
    keys = set(out.keys())
    assert "obs" in keys
    assert ("other" in keys) == keep_other
    assert ("reward" in keys) == (not exclude_reward)
    assert ("done" in keys) == (not exclude_done)
    assert ("action" in keys) == (not exclude_action)
    if not exclude_reward:
        assert (out["reward"] == 1).all()


def test_step_mdp_writes_into_given_tensordict():
    dest = TensorDict({}, [4])
    assert step_mdp(_transition(), next_tensordict=dest) is dest
    assert "obs" in dest.keys()


def test_step_mdp_nested_keys_build_new_sub_tensordicts():
    td = TensorDict(
        {
            "data": TensorDict({"action": torch.zeros(4, 3, 1)}, [4, 3]),
            "next": {"data": TensorDict({"state": torch.ones(4, 3, 1)}, [4, 3])},
        },
        [4],
    )
    out = step_mdp(td, action_keys=("data", "action"), exclude_action=False)
    assert out["data"] is not td["next", "data"]
    assert out["data"].batch_size == (4, 3)
    assert set(out.keys(True, True)) == {("data", "action"), ("data", "state")}
    out = step_mdp(td, action_keys=[("data", "action")])
    assert set(out.keys(True, True)) == {("data", "state")}


def test_step_mdp_drops_sub_tensordicts_left_empty():
    td = TensorDict(
        {
            "data": TensorDict({"action": torch.zeros(4, 3, 1)}, [4, 3]),
            "next": {"obs": torch.ones(4, 1)},
        },
        [4],
    )
    assert "data" not in step_mdp(td, action_keys=("data", "action")).keys()


def _nested_transition() -> TensorDict:
    return TensorDict(
        {
            "agents": {"obs": torch.zeros(4, 2), "root_only": torch.ones(4, 1)},
            "action": torch.ones(4, 1),
            "empty": TensorDict({}, [4]),
            "next": {
                "agents": {"obs": torch.ones(4, 2), "reward": torch.ones(4, 1)},
                "info": {"deep": {"x": torch.ones(4, 3)}},
                "reward": torch.ones(4, 1),
                "done": torch.ones(4, 1, dtype=torch.bool),
            },
        },
        [4],
    )


@pytest.mark.parametrize("keep_other", [True, False])
@pytest.mark.parametrize("exclude_action", [True, False])
def test_step_mdp_dense_path_matches_general_path(keep_other, exclude_action):
    # Without a destination, trees of plain TensorDicts take a dense fast path; writing into a
    # given destination takes the general one. Both must agree on keys, values and identity.
    kwargs = dict(
        keep_other=keep_other,
        exclude_action=exclude_action,
        reward_keys=["reward", ("agents", "reward")],
    )
    td = _nested_transition()
    fast = step_mdp(td, **kwargs)
    general = step_mdp(td, next_tensordict=TensorDict({}, [4]), **kwargs)
    assert set(fast.keys(True, True)) == set(general.keys(True, True))
    for key in fast.keys(True, True):
        assert fast[key] is general[key]
    assert (("agents", "root_only") in fast.keys(True, True)) == keep_other
    assert "empty" not in fast.keys()
    assert fast["agents"] is not td["next", "agents"]
    assert fast["info", "deep"] is not td["next", "info", "deep"]


def test_step_mdp_on_lazy_stack_keeps_member_specific_entries():
    tds = _transition().unbind(0)
    tds[0]["next", "only_first"] = torch.ones(2)
    td = LazyStackedTensorDict.lazy_stack(list(tds), 0)
    out = step_mdp(td)
    assert isinstance(out, LazyStackedTensorDict)
    assert (out[0]["only_first"] == 1).all()
    dest = LazyStackedTensorDict.lazy_stack([TensorDict({}, []) for _ in range(4)], 0)
    assert step_mdp(td, next_tensordict=dest) is dest


def test_step_mdp_without_next_raises():
    with pytest.raises(KeyError, match=re.escape(NO_NEXT)):
        step_mdp(TensorDict({"obs": torch.zeros(1)}, []))


@pytest.mark.parametrize("keep_other", [True, False])
@pytest.mark.parametrize("exclude_reward", [True, False])
@pytest.mark.parametrize("exclude_done", [True, False])
@pytest.mark.parametrize("exclude_action", [True, False])
@pytest.mark.parametrize("env_cls", [CountingEnv, NestedCountingEnv, HeterogeneousEnv])
def test_step_mdp_class_matches_function(
    env_cls, keep_other, exclude_reward, exclude_done, exclude_action
):
    env = env_cls()
    td = env.rand_step(env.reset())
    flags = {
        "keep_other": keep_other,
        "exclude_reward": exclude_reward,
        "exclude_done": exclude_done,
        "exclude_action": exclude_action,
    }
    expected = step_mdp(
        td.lock_(),
        done_keys=env.done_keys,
        action_keys=env.action_keys,
        reward_keys=env.reward_keys,
        **flags,
    )
    assert (StepMDP(env, **flags)(td) == expected).all()


def test_step_mdp_class_rebuilds_nested_roots():
    env = NestedCountingEnv()
    td = env.rand_step(env.reset())
    out = StepMDP(env, exclude_action=False)(td)
    assert out["data"] is not td["next", "data"]
    assert out["data", "states"] is td["next", "data", "states"]
    assert out["data"].batch_size == (3,)


def test_step_mdp_keeps_dim_names():
    td = _transition()
    td.names = ["env"]
    out = step_mdp(td)
    assert out.names == ["env"]
    assert out["obs"] is td["next", "obs"]


@pytest.mark.parametrize("exclude_reward", [True, False])
@pytest.mark.parametrize("exclude_done", [True, False])
@pytest.mark.parametrize("exclude_action", [True, False])
@pytest.mark.parametrize(
    "next_keys",
    [("observation", "done"), ("done",), ("observation", "reward", "done", "terminated")],
)
def test_shift_layout_equals_shift_entries(exclude_reward, exclude_done, exclude_action, next_keys):
    """The compiled shift gives ``shift_entries``'s dict: same keys, same order, same values."""
    from rlspecs.private_apis import td_entries

    env = CountingEnv()
    data = env.rand_step(env.reset().set("other", torch.ones(1)))
    shift = StepMDP(
        env,
        exclude_reward=exclude_reward,
        exclude_done=exclude_done,
        exclude_action=exclude_action,
    )
    assert shift.flat
    root = {key: value for key, value in td_entries(data).items() if key != "next"}
    nxt = {key: data["next", key] for key in next_keys}
    expected = shift.shift_entries(root, nxt)
    compiled = shift.shift_layout(tuple(root), next_keys)
    got = compiled(tuple(root.values()), tuple(nxt.values()))
    assert list(got) == list(expected)
    assert all(got[key] is expected[key] for key in expected)

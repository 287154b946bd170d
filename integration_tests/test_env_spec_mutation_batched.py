"""Spec edits (torchrl 0.4 style, in place) through SerialEnv and ParallelEnv.

Sub-envs that edit their specs in ``__init__`` batch correctly (the batched env reads the
edited specs before start, the workers build the same ones after); edits of a batched env's
own specs reach its input checks, before and after start; envs whose specs are observed
pickle into spawned workers. ParallelEnv runs under fork and spawn.
"""

from __future__ import annotations

import functools
import re
import sys

import pytest
import torch

from rlbatched import ParallelEnv, SerialEnv
from rlbatched._parallel import NO_SLOT
from rlcore import EnvBase, EnvCreator, check_env_specs
from rlspecs import Bounded, Categorical, Composite, Unbounded

START_METHODS = ["spawn"] + (["fork"] if sys.platform != "darwin" else [])


class EditedEnv(EnvBase):
    """Emits exactly what its specs hold; ``edits`` name in-``__init__`` spec edits to apply."""

    def __init__(self, edits: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.observation_spec = Composite(obs=Unbounded(3))
        self.action_spec = Bounded(-1, 1, shape=(1,))
        self.reward_spec = Unbounded(1)
        _ = self.done_keys, self.observation_keys  # caches warm before the edits
        for name in edits:
            EDITS[name](self)

    def _reset(self, tensordict):
        out = self.full_observation_spec.zero()
        out.update(self.full_done_spec.zero())
        out.update(self.full_state_spec.zero())
        return out

    def _step(self, tensordict):
        out = self.full_observation_spec.rand()
        out.update(self.full_state_spec.zero())
        out.update(self.full_reward_spec.zero())
        out.update(self.full_done_spec.zero())
        return out

    def _set_seed(self, seed):
        pass


def _done() -> Categorical:
    return Categorical(2, shape=(1,), dtype=torch.bool)


EDITS = {
    "add-nested-observation": lambda env: env.observation_spec.set(("agent", "pos"), Unbounded(2)),
    "replace-observation": lambda env: env.observation_spec.set("obs", Unbounded(5)),
    "delete-observation": lambda env: env.observation_spec.__delitem__("obs"),
    "add-truncated": lambda env: env.full_done_spec.set("truncated", _done()),
    "add-nested-done": lambda env: env.full_done_spec.update(
        {"agent": {"done": _done(), "terminated": _done()}}
    ),
    "add-state": lambda env: env.full_state_spec.set("hidden", Unbounded(4)),
    "add-nested-action": lambda env: env.full_action_spec.set(
        ("agent", "act"), Bounded(-1, 1, shape=(2,))
    ),
}
EDIT_SETS = [
    ("add-nested-observation", "add-truncated"),
    ("replace-observation", "add-state"),
    ("delete-observation", "add-nested-done"),
    ("add-nested-action",),
]


def _batched(kind: str, make, start_method: str | None = None) -> EnvBase:
    if kind == "serial":
        return SerialEnv(2, make)
    return ParallelEnv(2, make, mp_start_method=start_method)


KINDS = [("serial", None)] + [("parallel", method) for method in START_METHODS]


@pytest.mark.parametrize("kind, start_method", KINDS)
@pytest.mark.parametrize("edits", EDIT_SETS, ids=lambda e: "+".join(e))
def test_sub_envs_editing_their_specs_in_init(kind, start_method, edits):
    env = _batched(kind, functools.partial(EditedEnv, edits), start_method)
    try:
        single = EditedEnv(edits)
        assert env.observation_keys == single.observation_keys  # read before start
        assert env.done_keys == single.done_keys and env.reset_keys == single.reset_keys
        assert env.action_keys == single.action_keys and env.state_keys == single.state_keys
        check_env_specs(env)  # starts the workers, which build the same edited specs
        rollout = env.rollout(3)
        for key in single.observation_keys:
            assert ("next", *((key,) if isinstance(key, str) else key)) in rollout.keys(True)
    finally:
        env.close()


@pytest.mark.parametrize("kind, start_method", KINDS)
@pytest.mark.parametrize("started", [False, True], ids=["before-start", "after-start"])
def test_input_checks_follow_edits_of_the_batched_env_specs(kind, start_method, started):
    env = _batched(kind, EditedEnv, start_method)
    try:
        if started:
            env.rand_step(env.reset())  # caches the input rules
        else:
            _ = env.action_keys
        td = env.reset()
        env.full_action_spec["action"].dtype = torch.int8  # a leaf edited in place
        td["action"] = torch.full((2, 1), 0.5)
        with pytest.raises(ValueError, match=r"'action'.*torch\.int8"):
            env.step(td)
        env.full_action_spec["action"].dtype = torch.float32
        env.full_action_spec["extra"] = Bounded(-1, 1, shape=(2, 1))  # an entry added
        with pytest.raises(KeyError, match="'extra'"):
            env.step(td)
        del env.full_action_spec["extra"]  # and deleted: the input is fine again
        assert env.step(td)["next", "obs"].shape == (2, 3)
    finally:
        env.close()


@pytest.mark.parametrize("start_method", START_METHODS)
def test_instances_with_observed_specs_reach_the_workers(start_method):
    instance = EditedEnv(("add-truncated", "add-nested-observation"))
    instance.observation_spec["late"] = Unbounded(1)  # edited after construction too
    creator = EnvCreator(functools.partial(EditedEnv, ("add-state",)))
    env = ParallelEnv(
        2, [lambda: instance, creator], mp_start_method=start_method, share_individual_td=True
    )
    try:
        td = env.reset()
        assert ("late" in td[0].keys()) and ("hidden" in td[1].keys())
        env.rollout(2)
    finally:
        env.close()


@pytest.mark.parametrize("start_method", START_METHODS)
def test_parallel_env_refuses_a_key_added_to_its_own_specs_after_start(start_method):
    # the sub-envs neither read nor write it: never silently dropped
    env = ParallelEnv(2, EditedEnv, mp_start_method=start_method)
    try:
        td = env.rand_action(env.reset())
        env.full_action_spec["extra"] = Bounded(-1, 1, shape=(2, 1))
        td["extra"] = torch.zeros(2, 1)
        with pytest.raises(KeyError, match=re.escape(NO_SLOT.format(role="action", key="extra"))):
            env.step(td)
        del env.full_action_spec["extra"]
        assert env.step(td)["next", "obs"].shape == (2, 3)
    finally:
        env.close()

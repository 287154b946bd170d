"""EnvMetaData and get_env_metadata (current torchrl's), and the empty-spec check batched envs
run on their sub-envs' metadata (torchrl 0.4's RuntimeError and text)."""

from __future__ import annotations

import pickle
import re

import pytest
import torch
from batched_test_envs import EmptyInfoEnv, GrowingObsEnv

from rlbatched import EnvMetaData, get_env_metadata
from rlbatched._metadata import EMPTY_SPECS_ERROR
from rlcore import EnvCreator
from rlmocks import CountingEnv, HeterogeneousCountingEnv
from rltransforms import RemoveEmptySpecs, TransformedEnv


class ClosingCountingEnv(CountingEnv):
    """A CountingEnv that records, in the class, how many instances were closed."""

    closed = 0

    def close(self) -> None:
        type(self).closed += 1
        super().close()


def test_metadata_of_an_env_copies_its_specs():
    env = CountingEnv(batch_size=(3,))
    meta = get_env_metadata(env)
    assert meta.batch_size == (3,) and meta.batch_locked and meta.device is None
    assert meta.output_spec == env.output_spec and meta.output_spec is not env.output_spec
    assert meta.specs["input_spec", "full_action_spec"] == env.full_action_spec
    assert meta.env_str == str(env)


def test_metadata_of_a_factory_builds_one_env_and_closes_it():
    ClosingCountingEnv.closed = 0
    meta = get_env_metadata(ClosingCountingEnv, {"batch_size": (2,)})
    assert meta.batch_size == (2,)
    assert ClosingCountingEnv.closed == 1


def test_metadata_of_an_env_creator_builds_no_env():
    creator = EnvCreator(ClosingCountingEnv)
    ClosingCountingEnv.closed = 0
    meta = get_env_metadata(creator, {})
    assert ClosingCountingEnv.closed == 0
    assert meta.same_specs(EnvMetaData.from_env(CountingEnv()))
    assert meta.env_str == "ClosingCountingEnv()"


def test_env_creator_kwargs_must_match_its_own():
    creator = EnvCreator(CountingEnv, {"max_steps": 3})
    assert get_env_metadata(creator, {"max_steps": 3}).batch_size == ()
    with pytest.raises(RuntimeError, match=re.escape("kwargs mismatch between EnvCreator")):
        get_env_metadata(creator, {"max_steps": 4})


def test_env_validator_sees_the_env_read():
    seen = []
    get_env_metadata(CountingEnv, env_validator=seen.append)
    get_env_metadata(EnvCreator(CountingEnv), env_validator=seen.append)
    assert [type(env) for env in seen] == [CountingEnv, CountingEnv]

    def refuse(env):
        raise ValueError("not in a worker")

    with pytest.raises(ValueError, match="not in a worker"):
        get_env_metadata(CountingEnv, env_validator=refuse)


def test_metadata_of_something_else_is_not_supported():
    with pytest.raises(NotImplementedError, match="is not supported by get_env_metadata"):
        get_env_metadata(42)


def test_expand_clone_and_to_keep_the_specs():
    meta = EnvMetaData.from_env(CountingEnv())
    expanded = meta.expand(4)
    assert expanded.batch_size == (4,)
    assert expanded.output_spec["full_observation_spec", "observation"].shape == (4, 1)
    copy = meta.clone()
    assert copy.same_specs(meta) and copy.output_spec is not meta.output_spec
    assert meta.to("cpu").device == torch.device("cpu")


def test_tensordict_holds_zeros_of_every_entry_a_step_touches():
    td = EnvMetaData.from_env(CountingEnv(batch_size=(2,))).tensordict
    assert td.batch_size == (2,)
    assert set(td.keys(True, True)) == {
        "observation",
        "done",
        "terminated",
        "action",
        ("next", "observation"),
        ("next", "reward"),
        ("next", "done"),
        ("next", "terminated"),
    }
    assert not td["next", "observation"].any()


def test_dynamic_specs_are_lazy_stacks_of_different_shapes():
    assert not EnvMetaData.from_env(CountingEnv()).has_dynamic_specs
    assert EnvMetaData.from_env(GrowingObsEnv()).has_dynamic_specs
    assert EnvMetaData.from_env(HeterogeneousCountingEnv()).has_dynamic_specs


def test_metadata_pickles():
    meta = pickle.loads(pickle.dumps(EnvMetaData.from_env(CountingEnv())))
    assert meta.same_specs(EnvMetaData.from_env(CountingEnv()))


# ---------------------------------------------------------------------- empty specs
@pytest.mark.parametrize("kind", ["serial", "fork", "spawn"])
@pytest.mark.parametrize("nested", [False, True])
def test_batched_envs_refuse_sub_envs_with_empty_specs(make_kind, kind, nested):
    """torchrl 0.4's check: an empty Composite inside a spec group has no buffer to live in."""
    cls = "SerialEnv" if kind == "serial" else "ParallelEnv"
    key = ("info", "extra") if nested else "info"
    message = re.escape(EMPTY_SPECS_ERROR.format(cls=cls, key=key))
    with pytest.raises(RuntimeError, match=message):
        env = make_kind(kind, 2, EmptyInfoEnv, {"nested": nested})
        env.reset()  # a ParallelEnv learns the specs when its workers start


def test_an_env_creator_with_empty_specs_is_refused_at_construction(make_fork):
    with pytest.raises(RuntimeError, match="has empty specs in info"):
        make_fork(2, EnvCreator(EmptyInfoEnv))


def test_remove_empty_specs_lets_the_sub_env_through(make_batched):
    env = make_batched(2, lambda: TransformedEnv(EmptyInfoEnv(), RemoveEmptySpecs()))
    assert "info" not in env.observation_spec.keys()
    assert env.rollout(2).batch_size == (2, 2)


def test_an_empty_spec_group_is_fine(make_batched):
    env = make_batched(2, CountingEnv)  # CountingEnv has no state: an empty full_state_spec
    assert env.full_state_spec.is_empty()
    assert env.rollout(2).batch_size == (2, 2)

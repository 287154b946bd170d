"""RemoveEmptySpecs and TensorDictPrimer with rlbatched's SerialEnv and ParallelEnv, used as
torchrl 0.4 documents them: RemoveEmptySpecs inside each sub-env (0.4's batched envs refuse
sub-envs with empty specs and point to it), TensorDictPrimer over or inside a batched env."""

from __future__ import annotations

import multiprocessing

import pytest
import torch
from _transform_envs import CountEnv, EmptySpecsEnv

from rlcore import check_env_specs
from rlspecs import Bounded, Composite, Unbounded
from rltransforms import RemoveEmptySpecs, TensorDictPrimer, TransformedEnv

rlbatched = pytest.importorskip("rlbatched", reason="the batched-env cases need rlbatched")

pytestmark = pytest.mark.filterwarnings("error")

KINDS = ["serial", "fork"] if "fork" in multiprocessing.get_all_start_methods() else ["serial"]


@pytest.fixture
def make_batched():
    """`make_batched(kind, n, factory)`: a SerialEnv or a ParallelEnv, closed at teardown."""
    opened = []

    def make(kind, num_workers, factory):
        if kind == "serial":
            env = rlbatched.SerialEnv(num_workers, factory)
        else:
            env = rlbatched.ParallelEnv(num_workers, factory, mp_start_method=kind)
        opened.append(env)
        return env

    yield make
    for env in opened:
        env.close()


def _without_empty_specs():
    # module level: a spawned worker imports it
    return TransformedEnv(EmptySpecsEnv(), RemoveEmptySpecs())


def _assert_no_empty_composites(spec: Composite) -> None:
    """No empty Composite inside the groups of an input or output spec."""
    for group in spec.values():
        for key, leaf in group.items(True):
            assert not (isinstance(leaf, Composite) and leaf.is_empty()), key


@pytest.mark.parametrize("kind", [*KINDS, "spawn"])
def test_remove_empty_specs_inside_each_sub_env(make_batched, kind):
    env = make_batched(kind, 2, _without_empty_specs)
    for spec in (env.output_spec, env.input_spec):
        _assert_no_empty_composites(spec)
    check_env_specs(env)
    rollout = env.rollout(3)
    assert rollout.shape == (2, 3)
    assert "other" not in rollout["next"].keys() and "other_reward" not in rollout["next"].keys()


@pytest.mark.parametrize("kind", KINDS)
def test_primer_over_a_batched_env_fills_and_carries_its_entry(make_batched, kind):
    # torchrl 0.4's docstring: the spec holds the batch dims of the batch-locked env
    env = TransformedEnv(make_batched(kind, 2, CountEnv))
    env.append_transform(TensorDictPrimer(mykey=Unbounded([2, 3])))
    td = env.reset()
    assert td["mykey"].tolist() == [[0.0] * 3] * 2
    td = env.rand_step(td)
    assert td["next", "mykey"].tolist() == [[0.0] * 3] * 2
    td = env.reset()
    td["next", "mykey"] = torch.ones(2, 3)  # a value written under "next" is not replaced
    assert env.rand_step(td)["next", "mykey"].tolist() == [[1.0] * 3] * 2


@pytest.mark.parametrize("kind", KINDS)
def test_random_primer_over_a_batched_env_draws_per_sub_env(make_batched, kind):
    torch.manual_seed(0)
    spec = Bounded(-1.0, 1.0, (3,))
    env = TransformedEnv(make_batched(kind, 2, CountEnv), TensorDictPrimer(h=spec, random=True))
    assert env.observation_spec["h"].shape == (2, 3)
    value = env.reset()["h"]
    assert value.shape == (2, 3) and spec.is_in(value[0]) and not torch.equal(value[0], value[1])
    check_env_specs(env)


def _primed_count_env():
    return TransformedEnv(CountEnv(), TensorDictPrimer(h=Unbounded(3), default_value=1.0))


@pytest.mark.parametrize("kind", KINDS)
def test_primer_inside_each_sub_env(make_batched, kind):
    env = make_batched(kind, 2, _primed_count_env)
    assert env.state_spec["h"].shape == (2, 3)
    check_env_specs(env)
    rollout = env.rollout(3)
    assert (rollout["h"] == 1).all() and (rollout["next", "h"] == 1).all()

"""EnvBase: reset, step, partial resets, done completion, batch locking, seeds, lifecycle."""

from __future__ import annotations

import gc
import re

import pytest
import torch
from _rlcore_envs import (
    CountingEnv,
    HeterogeneousEnv,
    NestedCountingEnv,
    TerminatedOnlyEnv,
    UnlockedEnv,
)
from tensordict import LazyStackedTensorDict, TensorDict

from rlcore import EnvBase
from rlcore._done_rule import TERMINATED_FROM_DONE_AND_TRUNCATED
from rlcore._env_base import (
    BATCH_LOCKED_READ_ONLY,
    BATCH_MISMATCH,
    RAND_ACTION_BATCH,
    RESET_INPLACE,
    RESET_NOT_TD,
    STEP_NOT_TD,
)
from rlcore._step_plan import (
    DONE_AFTER_PARTIAL_RESET,
    DONE_AFTER_RESET,
    DTYPE_MISMATCH,
    SHAPE_MISMATCH,
)

BATCHES = [(), (2,), (4, 3)]


def _ones_action(env: EnvBase) -> TensorDict:
    action = env.action_spec.zero() + 1
    return TensorDict({"action": action}, env.batch_size)


# ---------------------------------------------------------------------------- reset / step
@pytest.mark.parametrize("batch_size", BATCHES)
def test_reset_returns_observations_and_done_flags(batch_size):
    env = CountingEnv(batch_size=batch_size)
    td = env.reset()
    assert td.batch_size == batch_size
    assert set(td.keys()) == {"observation", "done", "terminated"}
    assert not td["done"].any()


@pytest.mark.parametrize("batch_size", BATCHES)
def test_step_writes_results_under_next(batch_size):
    env = CountingEnv(batch_size=batch_size)
    td = env.step(env.reset().update(_ones_action(env)))
    assert set(td["next"].keys()) == {"observation", "reward", "done", "terminated"}
    assert (td["next", "observation"] == 1).all()
    assert (td["observation"] == 0).all()


def test_step_keeps_preset_next_entries():
    env = CountingEnv()
    td = env.reset().update(_ones_action(env))
    td["next", "extra"] = torch.ones(3)
    td["next", "observation"] = torch.full((1,), -1, dtype=torch.int32)
    td = env.step(td)
    assert (td["next", "extra"] == 1).all()
    assert (td["next", "observation"] == 1).all()


def test_step_rejects_non_tensordict_results():
    class BadStep(CountingEnv):
        def _step(self, tensordict):
            return {"observation": 0}

    with pytest.raises(TypeError, match=re.escape(STEP_NOT_TD.format(cls="BadStep", type="dict"))):
        BadStep().rand_step()


def test_reset_rejects_inplace_and_non_tensordict_results():
    class InPlace(CountingEnv):
        def _reset(self, tensordict):
            return tensordict

    class NotTD(CountingEnv):
        def _reset(self, tensordict):
            return None

    with pytest.raises(RuntimeError, match=re.escape(RESET_INPLACE.format(cls="InPlace"))):
        InPlace().reset(TensorDict({}, []))
    with pytest.raises(
        RuntimeError, match=re.escape(RESET_NOT_TD.format(cls="NotTD", type="NoneType"))
    ):
        NotTD().reset()


def test_reset_forwards_kwargs():
    class WithKwargs(CountingEnv):
        def _reset(self, tensordict, start=0):
            self.start_val = start
            return super()._reset(tensordict)

    assert (WithKwargs().reset(start=3)["observation"] == 3).all()


def test_reset_refuses_done_unless_allowed():
    env = CountingEnv(max_steps=-1)
    with pytest.raises(
        RuntimeError, match=re.escape(DONE_AFTER_RESET.format(key="done", cls="CountingEnv"))
    ):
        env.reset()
    env = CountingEnv(max_steps=-1, allow_done_after_reset=True)
    assert env.reset()["done"].all()


# ---------------------------------------------------------------------------- partial resets
@pytest.mark.parametrize("batch_size", [(2,), (4, 3)])
def test_partial_reset_changes_only_flagged_entries(batch_size):
    env = CountingEnv(max_steps=3, batch_size=batch_size)
    td = None
    for _ in range(4):
        td = env.step(_ones_action(env))
    root = td["next"].exclude("reward")
    reset = torch.zeros((*batch_size, 1), dtype=torch.bool)
    reset.view(-1)[0] = True
    root["_reset"] = reset
    out = env.reset(root)
    assert out is root
    assert "_reset" not in out.keys()
    assert (out["observation"][reset] == 0).all() and not out["done"][reset].any()
    assert (out["observation"][~reset] == 4).all() and out["done"][~reset].all()


def test_partial_reset_flag_of_batch_shape_is_accepted():
    env = CountingEnv(max_steps=0, batch_size=(3,))
    root = env.step(_ones_action(env))["next"].exclude("reward")
    root["_reset"] = torch.tensor([True, False, False])
    out = env.reset(root)
    assert out["done"].squeeze(-1).tolist() == [False, True, True]


def test_partial_reset_still_done_raises():
    class Stubborn(CountingEnv):
        def _reset(self, tensordict):
            out = super()._reset(None)
            out["done"] = torch.ones_like(out["done"])
            return out

    env = Stubborn(batch_size=(2,))
    root = TensorDict({"_reset": torch.tensor([[True], [False]])}, [2])
    message = DONE_AFTER_PARTIAL_RESET.format(key="done", reset_key="_reset")
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.reset(root)


def test_nested_partial_reset_merges_at_the_nested_level():
    env = NestedCountingEnv(max_steps=0, batch_size=(2,))
    root = env.step(TensorDict({("data", "action"): torch.ones(2, 3, 1, dtype=torch.int8)}, [2]))[
        "next"
    ].exclude(("data", "reward"))
    reset = torch.zeros(2, 3, 1, dtype=torch.bool)
    reset[0] = True
    root["data", "_reset"] = reset
    out = env.reset(root)
    assert ("data", "_reset") not in out.keys(True)
    done = out["data", "done"].squeeze(-1)
    assert not done[0].any() and done[1].all()
    assert out["data"].batch_size == (2, 3)


def test_maybe_reset_passes_done_shaped_reset_to_reset():
    env = CountingEnv(max_steps=0, batch_size=(3,))
    root = env._step_mdp(env.step(_ones_action(env)))
    root["done"][1:] = False
    root["terminated"][1:] = False
    out = env.maybe_reset(root)
    assert env.reset_inputs[-1]["_reset"].shape == (3, 1)
    assert set(env.reset_inputs[-1].keys()) == {"_reset"}
    assert out["done"].squeeze(-1).tolist() == [False, False, False]
    assert out["observation"].squeeze(-1).tolist() == [0, 1, 1]
    assert "_reset" not in out.keys()


def test_maybe_reset_without_done_is_a_no_op():
    env = CountingEnv(batch_size=(2,))
    root = env.reset()
    calls = len(env.reset_inputs)
    assert env.maybe_reset(root) is root
    assert len(env.reset_inputs) == calls


def test_maybe_reset_nested_done():
    env = NestedCountingEnv(max_steps=0, batch_size=(2,))
    td = env.step(TensorDict({("data", "action"): torch.ones(2, 3, 1, dtype=torch.int8)}, [2]))
    out = env.maybe_reset(env._step_mdp(td))
    assert env.reset_inputs[-1]["data", "_reset"].shape == (2, 3, 1)
    assert not out["data", "done"].any()


def test_step_and_maybe_reset_returns_transition_and_next_root():
    env = CountingEnv(max_steps=0, batch_size=(2,))
    td, root = env.step_and_maybe_reset(env.reset().update(_ones_action(env)))
    assert td["next", "done"].all()
    assert not root["done"].any()
    assert (root["observation"] == 0).all()
    assert (root["action"] == 1).all()


# ---------------------------------------------------------------------------- done completion
def test_done_is_derived_from_terminated_or_truncated():
    env = TerminatedOnlyEnv(max_steps=0, batch_size=(2,))
    td = env.reset()
    assert set(td.keys()) == {"observation", "done", "terminated", "truncated"}
    td = env.step(td.update(_ones_action(env)))
    assert td["next", "done"].all() and td["next", "terminated"].all()
    assert not td["next", "truncated"].any()


def test_terminated_is_copied_from_done():
    class DoneOnly(CountingEnv):
        def _step(self, tensordict):
            return super()._step(tensordict).exclude("terminated")

    env = DoneOnly(max_steps=0)
    td = env.step(_ones_action(env))
    assert td["next", "terminated"].all()
    assert td["next", "terminated"] is not td["next", "done"]


def test_terminated_cannot_be_inferred_from_done_and_truncated():
    env = TerminatedOnlyEnv()

    class Bad(TerminatedOnlyEnv):
        def _step(self, tensordict):
            out = CountingEnv._step(self, tensordict).exclude("terminated")
            out["truncated"] = torch.zeros_like(out["done"])
            return out

    env = Bad()
    with pytest.raises(
        RuntimeError, match=re.escape(TERMINATED_FROM_DONE_AND_TRUNCATED.format(level=()))
    ):
        env.rand_step(env.reset())


def test_done_of_wrong_shape_is_reshaped():
    class FlatDone(CountingEnv):
        def _step(self, tensordict):
            out = super()._step(tensordict)
            out["done"] = out["done"].reshape(-1)
            out["reward"] = torch.zeros(self.batch_size)
            return out

    td = FlatDone(batch_size=(2,)).rand_step()
    assert td["next", "done"].shape == (2, 1)
    assert td["next", "reward"].shape == (2, 1)


def test_complete_done_hook_fills_missing_leaves():
    env = NestedCountingEnv(has_root_done=True)
    data = TensorDict({("data", "done"): torch.ones(3, 1, dtype=torch.bool)}, [])
    data["data"].batch_size = (3,)
    out = env._complete_done(data)
    assert out["data", "terminated"].all()
    assert not out["done"].any() and not out["terminated"].any()


# ---------------------------------------------------------------------------- type checks
def test_type_checks_raise_on_dtype_and_shape():
    env = CountingEnv(run_type_checks=True)
    assert env.run_type_checks
    env.rand_step(env.reset())
    env.output_spec.unlock_()
    env.output_spec["full_done_spec", "done"].dtype = torch.int
    message = DTYPE_MISMATCH.format(name="done", expected=torch.int32, got=torch.bool, key="done")
    with pytest.raises(TypeError, match=re.escape(message)):
        env.rand_step(env.reset())
    env.output_spec["full_done_spec", "done"].dtype = torch.bool
    env.output_spec["full_observation_spec", "observation"].shape = torch.Size([2])
    message = SHAPE_MISMATCH.format(
        name="observation", expected=torch.Size([2]), got=torch.Size([1]), key="observation"
    )
    with pytest.raises(TypeError, match=re.escape(message)):
        env.rand_step(env.reset())
    env.run_type_checks = False
    env.rand_step(env.reset())


# ---------------------------------------------------------------------------- batch locking
def test_batch_locked_is_read_only():
    env = CountingEnv()
    assert env.batch_locked
    with pytest.raises(RuntimeError, match=re.escape(BATCH_LOCKED_READ_ONLY)):
        env.batch_locked = False


def test_locked_env_rejects_other_batch_sizes():
    env = CountingEnv()
    td = env.reset().update(_ones_action(env)).expand(2).clone()
    message = BATCH_MISMATCH.format(got=torch.Size([2]), expected=torch.Size([]))
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.step(td)
    with pytest.raises(RuntimeError, match="Expected a tensordict with shape==env.batch_size"):
        env.reset(td)


def test_unlocked_env_accepts_leading_dims():
    env = UnlockedEnv()
    assert not env.batch_locked
    td = env.reset(TensorDict({}, [5]))
    assert td.batch_size == (5,)
    td = env.rand_step(td)
    assert td["next", "observation"].shape == (5, 1)
    assert td["next", "done"].shape == (5, 1)
    assert td["next", "reward"].shape == (5, 1)


def test_unlocked_env_with_batch_size_rejects_other_sizes():
    env = UnlockedEnv(batch_size=(2,))
    with pytest.raises(RuntimeError, match="Expected a tensordict with shape"):
        env.step(TensorDict({"action": torch.zeros(4, 1), "observation": torch.zeros(4, 1)}, [4]))
    message = RAND_ACTION_BATCH.format(env=torch.Size([2]), td=torch.Size([4]))
    with pytest.raises(RuntimeError, match=re.escape(message)):
        env.rand_action(TensorDict({}, [4]))


# ---------------------------------------------------------------------------- random, fake
@pytest.mark.parametrize("batch_size", BATCHES)
def test_rand_action_and_rand_step(batch_size):
    env = CountingEnv(batch_size=batch_size)
    action = env.rand_action()
    assert set(action.keys()) == {"action"} and action.batch_size == batch_size
    td = env.rand_action(env.reset())
    assert env.action_spec.is_in(td["action"])
    td = env.rand_step()
    assert "next" in td.keys()


@pytest.mark.parametrize("batch_size", BATCHES)
def test_rand_action_writes_in_place_and_draws_like_the_composite(batch_size):
    # a plain tensordict of the env's batch gets its root action leaves written directly;
    # the draws are those of full_action_spec.rand(), in the same order
    env = CountingEnv(batch_size=batch_size)
    td = env.reset()
    torch.manual_seed(0)
    assert env.rand_action(td) is td
    torch.manual_seed(0)
    assert torch.equal(td["action"], env.full_action_spec.rand()["action"])


def test_rand_action_on_other_tensordicts_samples_the_composite():
    env = UnlockedEnv()  # batch-unlocked: the input's batch size is the sample's
    assert env.rand_action(TensorDict({}, [3]))["action"].shape[:1] == (3,)
    lazy = LazyStackedTensorDict.lazy_stack([TensorDict({}, []), TensorDict({}, [])], 0)
    assert env.rand_action(lazy)["action"].shape[:1] == (2,)
    with pytest.raises(RuntimeError):  # a locked tensordict takes no new entry
        env.rand_action(TensorDict({}, [3]).lock_())


def test_rand_action_nested_keeps_sub_batch():
    env = NestedCountingEnv(batch_size=(2,), nested_dim=5)
    assert env.rand_action()["data"].batch_size == (2, 5)
    td = env.rand_step(env.reset())
    assert td["next", "data"].batch_size == (2, 5)


def test_rand_step_heterogeneous():
    env = HeterogeneousEnv(batch_size=(2,))
    td = env.rand_step(env.reset())
    assert (td["next", "agents"][..., 1]["vector"] == 1).all()
    assert td["next", "agents"][..., 1]["vector"].shape == (2, 3)


@pytest.mark.parametrize("batch_size", BATCHES)
def test_fake_tensordict_matches_a_transition(batch_size):
    env = CountingEnv(batch_size=batch_size)
    fake = env.fake_tensordict()
    real = env.rand_step(env.reset())
    assert set(fake.keys(True, True)) == set(real.keys(True, True))
    for key in real.keys(True, True):
        assert fake[key].shape == real[key].shape, key
        assert fake[key].dtype == real[key].dtype, key


# ---------------------------------------------------------------------------- seeds, lifecycle
def test_set_seed_seeds_torch_and_returns_a_deterministic_next_seed():
    env = CountingEnv()
    first = env.set_seed(3)
    a = torch.rand(1)
    assert env.set_seed(3) == first != 3
    assert torch.rand(1) == a
    assert env.set_seed(3, static_seed=True) == 3
    assert env.set_seed(None) is None


def test_to_moves_specs_and_buffers():
    env = CountingEnv(device="cpu")
    assert env.to("cpu") is env
    meta = torch.device("meta")
    env.to(meta)
    assert env.device == meta
    assert env.count.device == meta
    assert env.full_done_spec["done"].device == meta
    assert env.output_spec.is_locked
    env = CountingEnv()
    assert env.cpu() is env and env.device == torch.device("cpu")
    assert env.full_done_spec["done"].device == torch.device("cpu")


def test_close_and_del():
    env = CountingEnv()
    assert not env.is_closed
    env.close()
    assert env.is_closed

    closed = []

    class Tracked(CountingEnv):
        def close(self):
            closed.append(True)
            raise RuntimeError("close failed")

    env = Tracked()
    del env
    gc.collect()
    assert closed == [True]


def test_forward_is_not_used():
    with pytest.raises(NotImplementedError, match="call step, reset or rollout"):
        CountingEnv()()


def test_missing_subclass_methods_raise():
    class Empty(EnvBase):
        pass

    env = Empty()
    with pytest.raises(NotImplementedError, match="must implement _reset"):
        env.reset()
    with pytest.raises(NotImplementedError, match="must implement _step"):
        env.step(TensorDict({}, []))
    with pytest.raises(NotImplementedError, match="must implement _set_seed"):
        env.set_seed(0)


def test_repr_and_numel():
    env = CountingEnv(batch_size=(2, 3))
    assert repr(env) == "CountingEnv(batch_size=torch.Size([2, 3]), device=None)"
    assert env.numel() == 6 and env.batch_dims == 2
    assert env.shape == (2, 3) and env.ndim == env.ndimension() == 2


@pytest.mark.parametrize("has_root_done", [False, True])
def test_add_truncated_keys_beside_every_done_key(has_root_done):
    """One truncated entry per done level, with its done spec; filled with False at each step."""
    env = NestedCountingEnv(batch_size=(2,), has_root_done=has_root_done)
    before = env.full_done_spec.clone()
    assert env.add_truncated_keys() is env
    levels = [("data",), ()] if has_root_done else [("data",)]
    for level in levels:
        key = (*level, "truncated") if level else "truncated"
        assert key in env.done_keys
        assert env.full_done_spec[key] == before[(*level, "done") if level else "done"]
    assert len(env.done_keys) == len(before.keys(True, True)) + len(levels)
    out = env.rollout(3)
    assert not out["next", "data", "truncated"].any()
    env.add_truncated_keys()  # twice: nothing more
    assert len(env.done_keys) == len(before.keys(True, True)) + len(levels)


def test_add_truncated_keys_keeps_an_existing_truncated_spec():
    env = CountingEnv()
    done_spec = env.full_done_spec.clone()
    done_spec["truncated"] = done_spec["done"].clone()
    env.full_done_spec = done_spec
    keys = list(env.done_keys)
    env.add_truncated_keys()
    assert env.done_keys == keys


def test_partial_reset_of_a_lazy_stacked_level():
    env = HeterogeneousEnv(batch_size=(2,))
    root = env._step_mdp(env.rand_step(env.reset()))
    assert (root["agents"][..., 1]["vector"] == 1).all()
    reset = torch.zeros(2, 2, 1, dtype=torch.bool)
    reset[0] = True
    root["agents", "_reset"] = reset
    out = env.reset(root)
    for agent in range(2):
        vector = out["agents"][..., agent]["vector"]
        assert (vector[0] == 0).all() and (vector[1] == 1).all()
    assert ("agents", "_reset") not in out.keys(True)


def test_an_env_class_may_also_be_an_abc():
    """EnvBase's metaclass is an ABCMeta (as torchrl 0.4's): no conflict with abc.ABC."""
    import abc

    class AbstractCounting(CountingEnv, abc.ABC):
        @abc.abstractmethod
        def describe(self) -> str: ...

    class Counting(AbstractCounting):
        def describe(self) -> str:
            return "counts"

    with pytest.raises(TypeError, match="abstract"):
        AbstractCounting()
    assert Counting().rollout(2).shape == (2,)

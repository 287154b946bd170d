"""``Composite``: nested mapping of specs sharing batch dims."""

from __future__ import annotations

import copy
import pickle
import re

import pytest
import torch
from rlspecs_cases import CUDA
from tensordict import TensorDict

from rlspecs import (
    Bounded,
    Categorical,
    Composite,
    CompositeSpec,
    DiscreteTensorSpec,
    OneHot,
    Unbounded,
    UnboundedContinuousTensorSpec,
)
from rlspecs._composite import LEAF_SHAPE, LOCKED, NOT_A_SPEC, SHAPE_TWICE, UNKNOWN_KEY


def make(batch):
    return Composite(
        obs=Unbounded((*batch, 3)),
        action=OneHot(4, shape=(*batch, 4)),
        next=Composite(
            reward=Bounded(-1, 1, (*batch, 1)),
            done=Categorical(2, shape=(*batch, 1), dtype=torch.bool),
            shape=batch,
        ),
        shape=batch,
    )


@pytest.fixture
def spec(batch):
    return make(batch)


def test_construct_from_dict_with_tuple_keys():
    spec = Composite({("a", "b"): Unbounded(2), "c": Unbounded(1)}, shape=())
    assert isinstance(spec["a"], Composite)
    assert spec["a", "b"].shape == (2,)
    assert spec[("a", "b")] is spec["a"]["b"]


def test_batch_size_keyword_and_device():
    spec = Composite(x=Unbounded((2, 1)), batch_size=[2], device="cpu")
    assert spec.shape == (2,) and spec.batch_size == (2,)
    assert spec.device == torch.device("cpu")
    with pytest.raises(TypeError, match=re.escape(SHAPE_TWICE)):
        Composite(shape=(), batch_size=())


def test_seed_constructors():
    assert Composite(x_position=UnboundedContinuousTensorSpec(10), shape=[]).shape == ()
    done = CompositeSpec(done=DiscreteTensorSpec(2, shape=(2, 1), dtype=torch.bool), shape=[2])
    assert done.zero().batch_size == (2,)
    assert CompositeSpec is Composite


def test_keys_nested_and_leaves(spec):
    assert set(spec.keys()) == {"obs", "action", "next"}
    assert set(spec.keys(True)) == {"obs", "action", "next", ("next", "reward"), ("next", "done")}
    assert set(spec.keys(True, True)) == {"obs", "action", ("next", "reward"), ("next", "done")}
    assert ("next", "done") in spec.keys(True, True)
    assert ("next", "done") not in spec.keys()
    assert "next" not in spec.keys(True, leaves_only=True)
    assert len(spec.keys(True, True)) == 4
    assert ("next", "done") in spec
    assert list(spec) == ["obs", "action", "next"] and len(spec) == 3


def test_items_and_values(spec):
    items = dict(spec.items(True, True))
    assert items["next", "reward"] is spec["next", "reward"]
    assert len(list(spec.values())) == 3


def test_rand_zero_one_are_tensordicts_of_batch(spec, batch):
    for method in ("rand", "zero", "one"):
        td = getattr(spec, method)()
        assert isinstance(td, TensorDict)
        assert td.batch_size == batch
        assert td["next", "done"].shape == (*batch, 1)
        assert spec.is_in(td) or method != "rand"
    td = spec.rand((5,))
    assert td.batch_size == (5, *batch)
    assert spec.is_in(td)


def test_rand_device_follows_spec():
    spec = Composite(x=Unbounded(3), device="cpu")
    assert spec.rand().device == torch.device("cpu")
    assert Composite(x=Unbounded(3)).rand().device is None


def test_is_in_detects_missing_and_out_of_domain(spec):
    td = spec.rand()
    assert spec.is_in(td)
    td["action"] = torch.zeros_like(td["action"])
    assert not spec.is_in(td)
    assert not spec.is_in(td.exclude("obs"))
    assert not spec.is_in(3)


def test_is_in_ignores_missing_empty_composites():
    spec = Composite(x=Unbounded(3), empty=Composite())
    assert spec.is_in(TensorDict(x=torch.zeros(3)))


def test_project_and_encode(spec, batch):
    td = spec.zero()
    td["next", "reward"] = torch.full((*batch, 1), 5.0)
    projected = spec.project(td)
    assert (projected["next", "reward"] == 1).all()
    flat = Composite(obs=Unbounded(3), n=Categorical(3))
    encoded = flat.encode({"obs": [1.0, 2.0, 3.0], "n": 2})
    assert encoded["n"].dtype == torch.int64 and encoded["obs"].shape == (3,)


def test_set_creates_intermediate_composites(spec, batch):
    spec["a", "b", "c"] = Unbounded((*batch, 2))
    assert spec["a", "b"].shape == batch
    assert spec["a", "b", "c"].shape == (*batch, 2)
    assert spec.set("z", Unbounded((*batch, 1))) is spec


def test_set_checks_leading_dims():
    spec = Composite(shape=(2,))
    message = LEAF_SHAPE.format(key="x", spec_shape=torch.Size([3]), shape=torch.Size([2]))
    with pytest.raises(ValueError, match=re.escape(message)):
        spec["x"] = Unbounded(3)


def test_set_refuses_non_specs():
    with pytest.raises(TypeError, match=re.escape(NOT_A_SPEC.format(type="int", key="x"))):
        Composite()["x"] = 3


def test_unknown_key_names_it_and_the_existing_keys(spec):
    message = UNKNOWN_KEY.format(key="nope", keys=["obs", "action", "next"])
    with pytest.raises(KeyError, match=re.escape(message)):
        spec["nope"]
    with pytest.raises(KeyError, match=re.escape("'nope'")):
        spec["next", "nope"]
    assert spec.get("nope", None) is None
    assert spec.get(("next", "nope"), 1) == 1


def test_key_through_a_leaf_raises(spec):
    with pytest.raises(KeyError, match="leads through a Unbounded"):
        spec["obs", "x"]


def test_delete_and_pop(spec):
    del spec["next", "done"]
    assert ("next", "done") not in spec.keys(True)
    assert isinstance(spec.pop("obs"), Unbounded)
    assert spec.pop("obs", None) is None
    with pytest.raises(KeyError):
        del spec["obs"]


def test_update_merges_nested_composites(spec, batch):
    spec.update({"next": Composite(extra=Unbounded((*batch, 1)), shape=batch)})
    assert {"reward", "done", "extra"} <= set(spec["next"].keys())
    spec.update(Composite(obs=Unbounded((*batch, 7)), shape=batch))
    assert spec["obs"].shape == (*batch, 7)


def test_lock_refuses_every_mutation(spec, batch):
    spec.lock_()
    assert spec.is_locked and spec["next"].is_locked
    with pytest.raises(RuntimeError, match=re.escape(LOCKED.format(key="x"))):
        spec["x"] = Unbounded((*batch, 1))
    with pytest.raises(RuntimeError, match=re.escape("Cannot modify a locked Composite")):
        del spec["obs"]
    with pytest.raises(RuntimeError, match=re.escape("Cannot modify a locked Composite")):
        spec["next", "x"] = Unbounded((*batch, 1))
    with pytest.raises(RuntimeError, match=re.escape("Cannot modify a locked Composite")):
        spec.update({"obs": Unbounded((*batch, 1))})
    spec.unlock_()
    spec["x"] = Unbounded((*batch, 1))
    assert not spec["next"].is_locked


def test_leaf_attributes_stay_assignable_when_locked():
    spec = Composite(done=Categorical(2, dtype=torch.bool)).lock_()
    spec["done"].dtype = torch.int32
    assert spec["done"].dtype == torch.int32


def test_clone_deep_copies(spec):
    copy = spec.clone()
    assert copy == spec
    copy["next", "reward"].low.fill_(-5)
    assert spec["next", "reward"].low.min() == -1
    copy["new"] = Unbounded((*spec.shape, 1))
    assert "new" not in spec.keys()


def test_clone_of_locked_is_unlocked(spec):
    assert not spec.lock_().clone().is_locked


def test_eq_compares_keys_leaves_shape_and_device(spec, batch):
    assert spec == make(batch)
    other = make(batch)
    other["obs"] = Unbounded((*batch, 4))
    assert spec != other
    other = make(batch)
    del other["obs"]
    assert spec != other
    assert spec != spec.to("cpu")
    assert spec.to("cpu") == make(batch).to("cpu")
    assert spec != spec.expand(2, *batch)


def test_to_device_none_composite(spec):
    moved = spec.to("cpu")
    assert moved.device == torch.device("cpu")
    assert moved["next"].device == torch.device("cpu")
    assert moved.to("cpu") is moved


@CUDA
def test_cuda_moves_every_leaf(spec):
    moved = spec.cuda()
    assert all(leaf.device.type == "cuda" for leaf in moved.values(True, True))
    assert moved.rand().device.type == "cuda"
    assert moved.cpu() == spec.to("cpu")


def test_set_leaf_on_device_composite_moves_it():
    spec = Composite(device="cpu")
    spec["x"] = Unbounded(3)
    assert spec["x"].device == torch.device("cpu")


def test_shape_is_assignable_and_checked(spec, batch):
    spec.shape = ()
    assert spec.shape == ()
    if batch:
        spec.shape = batch[:1]
        assert spec.rand().batch_size == batch[:1]
    with pytest.raises(ValueError, match="must match the Composite's shape"):
        spec.shape = (9,)


def test_expand_adds_batch_dims_everywhere(spec, batch):
    expanded = spec.expand(5, *batch)
    assert expanded.shape == (5, *batch)
    assert expanded["next", "done"].shape == (5, *batch, 1)
    assert expanded.is_in(expanded.rand())
    assert spec.expand((5, *batch)) == expanded


def test_unsqueeze_and_squeeze(spec, batch):
    unsqueezed = spec.unsqueeze(0)
    assert unsqueezed.shape == (1, *batch)
    assert unsqueezed["obs"].shape == (1, *batch, 3)
    assert unsqueezed.squeeze(0) == spec
    assert unsqueezed.squeeze() == spec.squeeze()
    with pytest.raises(ValueError, match="cannot unsqueeze"):
        spec.unsqueeze(len(batch) + 2)


def test_index_batch_dims():
    spec = make((3, 2))
    assert spec[0].shape == (2,)
    assert spec[0]["obs"].shape == (2, 3)
    assert spec[:, 1]["action"].shape == (3, 4)
    assert spec[torch.tensor([0, 2])].shape == (2, 2)


def test_ellipsis_index_applies_to_batch_dims_only():
    spec = make((3, 2))
    sub = spec[..., 0]
    assert sub.shape == (3,)
    assert sub["obs"].shape == (3, 3)
    assert sub["action"].shape == (3, 4)
    assert spec.rand()[..., 0]["obs"].shape == sub["obs"].shape


def test_too_many_indices_raise():
    with pytest.raises(IndexError, match=re.escape("too many indices for a spec of shape (3,)")):
        make((3,))[0, 0]


def test_empty_and_is_empty(spec):
    empty = spec.empty()
    assert empty.shape == spec.shape and empty.device == spec.device
    assert empty.is_empty() and not spec.is_empty()
    assert Composite(a=Composite()).is_empty(recurse=True)


def test_select_and_exclude(spec):
    assert set(spec.select("obs", ("next", "done")).keys(True, True)) == {"obs", ("next", "done")}
    assert set(spec.exclude("obs").keys()) == {"action", "next"}
    assert "obs" in spec.keys()
    assert set(spec.select("obs", "nope", strict=False).keys()) == {"obs"}


def test_ndim_and_dtype(spec, batch):
    assert spec.ndim == len(batch)
    assert spec.dtype is None


def test_repr_shows_keys(spec):
    text = repr(spec)
    assert "obs:" in text and "reward:" in text and "shape=" in text
    assert repr(Composite()) == "Composite(\n, device=None, shape=torch.Size([]))"


def test_too_many_positional_arguments():
    with pytest.raises(TypeError, match="at most one positional argument"):
        Composite({}, {})


def test_unbind_composite():
    parts = make((3, 2)).unbind(1)
    assert len(parts) == 2 and parts[0] == make((3,))


def test_pickle_and_deepcopy_round_trip(spec):
    assert pickle.loads(pickle.dumps(spec)) == spec
    assert copy.deepcopy(spec) == spec


def test_to_none_forgets_the_composite_device(spec):
    assert spec.to(None) is spec
    on_cpu = spec.to("cpu")
    cleared = on_cpu.to(None)
    assert cleared.device is None
    assert cleared["obs"].device == torch.device("cpu")

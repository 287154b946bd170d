"""Composite.observe_: which changes call the callback, which do not, and what copies carry."""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from rlspecs import Bounded, Categorical, Composite, OneHot, StackedComposite, Unbounded


class Recorder:
    """A callback recording the specs it is called with."""

    def __init__(self) -> None:
        self.calls: list = []

    def __call__(self, spec) -> None:
        self.calls.append(spec)


def observed(spec: Composite) -> tuple[Composite, Recorder]:
    recorder = Recorder()
    spec.observe_(recorder)
    return spec, recorder


def tree() -> Composite:
    return Composite(obs=Unbounded(3), agent=Composite(pos=Unbounded(2), vel=Unbounded(2)))


@pytest.mark.parametrize(
    "mutate",
    [
        pytest.param(lambda s: s.__setitem__("new", Unbounded(1)), id="add-root"),
        pytest.param(lambda s: s.__setitem__("obs", Unbounded(4)), id="replace-root"),
        pytest.param(lambda s: s.__setitem__(("agent", "acc"), Unbounded(2)), id="add-nested"),
        pytest.param(lambda s: s["agent"].__setitem__("pos", Unbounded(5)), id="replace-inner"),
        pytest.param(lambda s: s.__setitem__(("x", "y", "z"), Unbounded(1)), id="intermediates"),
        pytest.param(lambda s: s.__delitem__("obs"), id="del-root"),
        pytest.param(lambda s: s.__delitem__(("agent", "vel")), id="del-nested"),
        pytest.param(lambda s: s["agent"].pop("vel"), id="pop-inner"),
        pytest.param(lambda s: s.update({"agent": {"acc": Unbounded(2)}}), id="update-nested"),
        pytest.param(lambda s: s.set("obs", None), id="set-none"),
        pytest.param(lambda s: setattr(s["obs"], "dtype", torch.float64), id="leaf-dtype"),
        pytest.param(
            lambda s: setattr(s["agent", "pos"], "shape", torch.Size([4])), id="leaf-shape"
        ),
        pytest.param(lambda s: setattr(s["obs"], "device", torch.device("cpu")), id="leaf-device"),
        pytest.param(lambda s: setattr(s["agent"], "device", "cpu"), id="composite-device"),
        pytest.param(lambda s: s["agent"].clear_device_(), id="clear-device"),
    ],
)
def test_every_change_in_the_tree_calls_the_callback(mutate):
    spec, recorder = observed(tree())
    mutate(spec)
    assert recorder.calls, "the callback was not called"


def test_composite_shape_change_calls_the_callback():
    spec, recorder = observed(Composite(agent=Composite(pos=Unbounded((3, 2)), shape=(3,))))
    spec["agent"].shape = ()
    assert recorder.calls and recorder.calls[-1] is spec["agent"]


def test_the_callback_gets_the_spec_that_changed():
    spec, recorder = observed(tree())
    spec["agent", "acc"] = Unbounded(2)
    assert recorder.calls == [spec["agent"]]
    spec["obs"].dtype = torch.float64
    assert recorder.calls[-1] is spec["obs"]


def test_specs_added_later_are_observed_at_any_depth():
    spec, recorder = observed(Composite())
    added = Composite(inner=Composite(leaf=Unbounded(1)))
    spec["group"] = added
    recorder.calls.clear()
    added["inner", "other"] = Unbounded(1)  # the object the user kept, mutated later
    assert recorder.calls == [added["inner"]]
    added["inner", "leaf"].dtype = torch.float16
    assert len(recorder.calls) == 2


def test_entries_replaced_by_a_device_move_stay_observed():
    spec, recorder = observed(tree())
    spec.device = "cpu"  # entries may be replaced by copies on the device
    recorder.calls.clear()
    spec["agent", "acc"] = Unbounded(2)
    assert recorder.calls


def test_not_called_for_reads_failed_writes_or_untracked_attributes():
    spec, recorder = observed(tree())
    _ = spec["agent", "pos"], list(spec.keys(True, True)), spec.rand(), spec.clone()
    spec.lock_(recurse=False)
    with pytest.raises(RuntimeError, match="locked"):
        spec["other"] = Unbounded(1)
    with pytest.raises(KeyError):
        del spec["agent", "missing"]
    action = OneHot(4, mask=torch.ones(4, dtype=torch.bool))
    spec["agent", "action"] = action
    recorder.calls.clear()
    action.update_mask(torch.tensor([True, False, True, True]))  # per-step: not a change
    spec["agent", "bounded"] = Bounded(-1, 1, shape=(2,))
    recorder.calls.clear()
    spec["agent", "bounded"].space.low.zero_()  # tensors of a spec: not tracked
    assert recorder.calls == []


def test_a_callback_is_attached_once_and_can_be_removed():
    spec = tree()
    recorder = Recorder()
    spec.observe_(recorder).observe_(recorder)
    assert spec.observers == (recorder,) and spec["agent"].observers == (recorder,)
    spec["obs"].dtype = torch.float64
    assert len(recorder.calls) == 1
    spec.unobserve_(recorder)
    assert spec.observers == () and spec["agent"].observers == ()
    spec["obs"].dtype = torch.float32
    spec["new"] = Unbounded(1)
    assert len(recorder.calls) == 1


def test_several_observers_are_all_called():
    spec = tree()
    first, second = Recorder(), Recorder()
    spec.observe_(first)
    spec["agent"].observe_(second)
    spec["agent", "acc"] = Unbounded(1)
    spec["new"] = Unbounded(1)
    assert len(first.calls) == 2 and len(second.calls) == 1


@pytest.mark.parametrize(
    "copy_of",
    [
        pytest.param(lambda s: s.clone(), id="clone"),
        pytest.param(lambda s: s.expand(2), id="expand"),
        pytest.param(lambda s: copy.deepcopy(s), id="deepcopy"),
        pytest.param(lambda s: pickle.loads(pickle.dumps(s)), id="pickle"),
    ],
)
def test_copies_are_not_observed(copy_of):
    spec, recorder = observed(tree().to("cpu"))
    out = copy_of(spec)
    assert out.observers == ()
    assert all(getattr(v, "observers", ()) == () for v in out.values(True))
    out["agent", "acc"] = Unbounded(2)
    out["agent", "pos"].dtype = torch.float64
    del out["obs"]
    assert recorder.calls == []


@pytest.mark.parametrize(
    "shallow",
    [
        pytest.param(lambda s: s.select("agent", "obs"), id="select"),
        pytest.param(lambda s: s.exclude("missing"), id="exclude"),
    ],
)
def test_shallow_copies_share_their_entries_and_so_their_observers(shallow):
    spec, recorder = observed(tree().to("cpu"))
    out = shallow(spec)
    assert out.observers == ()
    out["added"] = Unbounded(1)  # the copy's own container: not the observed tree
    assert recorder.calls == []
    out["agent", "acc"] = Unbounded(2)  # an entry shared with the observed tree
    assert "acc" in spec["agent"].keys() and recorder.calls == [spec["agent"]]


def test_leaf_copies_and_pickles_drop_the_callback():
    spec, recorder = observed(Composite(a=Bounded(-1, 1, shape=(2,))))
    leaf = spec["a"]
    for other in (leaf.clone(), copy.copy(leaf), pickle.loads(pickle.dumps(leaf))):
        assert "_on_change" not in other.__dict__
        other.dtype = torch.float64
    assert recorder.calls == []


def test_an_unpicklable_callback_does_not_block_pickling():
    spec = tree().observe_(lambda s: None)
    restored = pickle.loads(pickle.dumps(spec))
    assert restored == spec and restored.observers == ()


def test_lazy_stack_members_are_observed():
    stack = StackedComposite(
        Composite(a=Unbounded(3), b=Categorical(2)), Composite(a=Unbounded(2)), dim=0
    )
    spec, recorder = observed(Composite(group=stack, shape=(2,)))
    spec["group"].set("c", Unbounded((2, 1)))
    assert recorder.calls
    recorder.calls.clear()
    del spec["group"]["c"]
    assert recorder.calls
    recorder.calls.clear()
    stack.members[1]["a"].dtype = torch.float64
    assert recorder.calls


def test_nested_delete_needs_only_the_holding_composite_unlocked():
    # as `set`, and as torchrl 0.4's top-level lock: the locked root still refuses its own keys
    spec = tree().lock_(recurse=False)
    del spec["agent", "vel"]
    assert ("agent", "vel") not in spec.keys(True)
    with pytest.raises(RuntimeError, match="locked"):
        del spec["obs"]
    spec["agent"].lock_()
    with pytest.raises(RuntimeError, match="locked"):
        del spec["agent", "pos"]

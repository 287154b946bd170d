"""torchrl 0.4-era ``Composite`` behaviour: partial ("incomplete") composites, nested dicts,
shape changes, reserved keys, locks and device casting, probed as torchrl's spec tests do."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from tensordict import TensorDict, TensorDictBase

from rlspecs import (
    BinaryDiscreteTensorSpec,
    BoundedTensorSpec,
    CompositeSpec,
    DiscreteTensorSpec,
    MultiDiscreteTensorSpec,
    MultiOneHotDiscreteTensorSpec,
    OneHotDiscreteTensorSpec,
    SpecKeyTypeError,
    UnboundedContinuousTensorSpec,
    UnboundedDiscreteTensorSpec,
)


@pytest.mark.parametrize("shape", [(), (2,), (2, 3)])
@pytest.mark.parametrize("is_complete", [True, False])
@pytest.mark.parametrize("dtype", [None, torch.float64])
class TestComposite:
    @staticmethod
    def _composite_spec(shape, is_complete=True, device=None, dtype=None):
        torch.manual_seed(0)
        return CompositeSpec(
            obs=BoundedTensorSpec(
                torch.zeros(*shape, 3, 32, 32),
                torch.ones(*shape, 3, 32, 32),
                dtype=dtype,
                device=device,
            ),
            act=UnboundedContinuousTensorSpec((*shape, 7), dtype=dtype, device=device)
            if is_complete
            else None,
            shape=shape,
            device=device,
        )

    def test_getitem(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        assert isinstance(ts["obs"], BoundedTensorSpec)
        if is_complete:
            assert isinstance(ts["act"], UnboundedContinuousTensorSpec)
        else:
            assert ts["act"] is None
        with pytest.raises(KeyError):
            ts["UNK"]

    def test_setitem_forbidden_keys(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        for key in {"shape", "device", "dtype", "space"}:
            with pytest.raises(AttributeError, match="cannot be set"):
                ts[key] = UnboundedContinuousTensorSpec((*shape, 1))
            with pytest.raises(AttributeError, match="has no key"):
                ts[key]
            with pytest.raises(AttributeError, match="has no key"):
                del ts[key]

    def test_setitem_matches_device(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, device="cpu", dtype=dtype)
        ts["good"] = UnboundedContinuousTensorSpec(shape=shape, device="cpu", dtype=dtype)
        assert ts["good"].device == torch.device("cpu")
        assert ts.rand()["good"].device == torch.device("cpu")

    def test_del(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        assert "obs" in ts.keys()
        del ts["obs"]
        assert "obs" not in ts.keys()
        assert "act" in ts.keys()  # a None entry is still a key

    def test_encode(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        if dtype is None:
            dtype = torch.get_default_dtype()
        for _ in range(3):
            raw_vals = {"obs": np.random.randn(*shape, 3, 32, 32)}
            if is_complete:
                raw_vals["act"] = np.random.randn(*shape, 7)
            encoded_vals = ts.encode(raw_vals)
            assert encoded_vals["obs"].dtype == dtype
            assert (encoded_vals["obs"] == torch.tensor(raw_vals["obs"], dtype=dtype)).all()
            if is_complete:
                assert (encoded_vals["act"] == torch.tensor(raw_vals["act"], dtype=dtype)).all()
        if not is_complete:
            with pytest.raises(RuntimeError, match="missing values"):
                ts.encode({"act": np.zeros((*shape, 7))})
        with pytest.raises(RuntimeError, match="missing values"):
            ts.encode({"obs": None})

    def test_is_in(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        for _ in range(5):
            assert ts.is_in(ts.rand())
        assert not ts.is_in(TensorDict({"obs": torch.full((*shape, 3, 32, 32), 2.0)}, shape))

    def test_to_numpy(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        for _ in range(5):
            r = ts.rand()
            for key, value in ts.to_numpy(r).items():
                spec = ts[key]
                assert (spec.to_numpy(r[key]) == value).all()
        td_fail = TensorDict({"obs": torch.rand(*shape, 3, 32, 32) + 1}, batch_size=shape)
        with pytest.raises(AssertionError):
            ts.to_numpy(td_fail, safe=True)
        assert ts.to_numpy(td_fail, safe=False)["obs"].shape == (*shape, 3, 32, 32)

    def test_project(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        tensors = {"obs": torch.randn(*shape, 3, 32, 32, dtype=dtype)}
        if is_complete:
            tensors["act"] = torch.randn(*shape, 7, dtype=dtype)
        out_of_bounds_td = TensorDict(tensors, batch_size=shape)
        assert not ts.is_in(out_of_bounds_td)
        ts.project(out_of_bounds_td)
        assert ts.is_in(out_of_bounds_td)
        assert out_of_bounds_td["obs"].shape == (*shape, 3, 32, 32)

    def test_rand(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        td = ts.rand()
        assert isinstance(td, TensorDict)
        assert td["obs"].shape == (*shape, 3, 32, 32)
        assert ("act" in td.keys()) is is_complete
        td = ts.rand((5,))
        assert td.batch_size == (5, *shape)
        zero = ts.zero()
        assert ("act" in zero.keys()) is is_complete and (zero["obs"] == 0).all()
        assert ("act" in ts.one().keys()) is is_complete

    def test_repr(self, shape, is_complete, dtype):
        output = repr(self._composite_spec(shape, is_complete, dtype=dtype))
        assert output.startswith("Composite(")
        assert "obs: " in output
        assert "act: None" in output if not is_complete else "act: Unbounded" in output

    def test_device_cast_with_dtype_fails(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        with pytest.raises(ValueError, match="Only device casting is allowed"):
            ts.to(torch.float16)

    def test_device_cast(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        td_to = ts.to("cpu")
        cast_r = td_to.rand()
        assert td_to.device == torch.device("cpu")
        assert cast_r["obs"].device == torch.device("cpu")
        assert (td_to["act"] is None) is not is_complete

    def test_type_check(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        rand_td = ts.rand()
        ts.type_check(rand_td)
        ts.type_check(rand_td["obs"], "obs")
        if is_complete:
            ts.type_check(rand_td["act"], "act")
        with pytest.raises(TypeError, match="key 'obs'"):
            ts.type_check(rand_td["obs"].to(torch.float16), "obs")

    def test_nested_composite_spec(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        ts["nested_cp"] = self._composite_spec(shape, is_complete, dtype=dtype)
        td = ts.rand()
        assert isinstance(td["nested_cp"], TensorDictBase)
        for key in td.keys():
            if key != "nested_cp":
                assert key in td["nested_cp"].keys()

    def test_nested_composite_spec_index(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        ts["nested_cp"] = self._composite_spec(shape, is_complete, dtype=dtype)
        ts["nested_cp"]["nested_cp"] = self._composite_spec(shape, is_complete, dtype=dtype)
        assert ts["nested_cp"]["nested_cp"] is ts["nested_cp", "nested_cp"]
        assert ts["nested_cp"]["nested_cp"]["obs"] is ts["nested_cp", "nested_cp", "obs"]

    def test_nested_composite_spec_update(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        ts["nested_cp"] = self._composite_spec(shape, is_complete, dtype=dtype)
        ts.update(CompositeSpec(new=None, shape=shape))
        assert set(ts.keys()) == {"obs", "act", "nested_cp", "new"}

        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        ts["nested_cp"] = self._composite_spec(shape, is_complete, dtype=dtype)
        ts.update(CompositeSpec(nested_cp=CompositeSpec(new=None, shape=shape), shape=shape))
        assert set(ts.keys()) == {"obs", "act", "nested_cp"}
        assert set(ts["nested_cp"].keys()) == {"obs", "act", "new"}

        ts.update({"nested_cp": {"act": UnboundedContinuousTensorSpec((*shape, 2))}})
        assert ts["nested_cp", "act"].shape == (*shape, 2)

    def test_change_batch_size(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        ts["nested"] = CompositeSpec(leaf=UnboundedContinuousTensorSpec(shape), shape=shape)
        ts = ts.expand(3, *shape)
        assert ts["nested"].shape == (3, *shape)
        assert ts["nested", "leaf"].shape == (3, *shape)
        ts.shape = ()
        # this does not change
        assert ts["nested"].shape == (3, *shape)
        assert ts.shape == ()
        ts["nested"].shape = ()
        ts.shape = (3,)
        assert ts.shape == (3,)
        assert ts["nested"].shape == (3,)
        with pytest.raises(ValueError, match="must match"):
            ts.shape = (4,)
        ts.lock_()
        with pytest.raises(RuntimeError, match="locked"):
            ts.shape = ()

    def test_partial_composite_operations(self, shape, is_complete, dtype):
        ts = self._composite_spec(shape, is_complete, dtype=dtype)
        expanded = ts.expand(2, *shape)
        assert expanded["obs"].shape == (2, *shape, 3, 32, 32)
        assert (expanded["act"] is None) is not is_complete
        clone = ts.clone()
        assert clone == ts and clone is not ts
        assert (clone["act"] is None) is not is_complete
        if shape:
            assert ts[0].shape == shape[1:] and (ts[0]["act"] is None) is not is_complete
            assert len(ts.unbind(0)) == shape[0]
        assert ts.unsqueeze(0).squeeze(0) == ts
        assert ts.select("act")["act"] is ts["act"]
        if not is_complete:
            assert ts != self._composite_spec(shape, True, dtype=dtype)


def test_create_composite_nested():
    shape, device = [5], "cpu"
    specs = [
        {("a", "b"): UnboundedContinuousTensorSpec(shape=shape, device=device)},
        {"a": {"b": UnboundedContinuousTensorSpec(shape=shape, device=device)}},
    ]
    for spec in specs:
        c = CompositeSpec(spec, shape=shape)
        assert isinstance(c["a", "b"], UnboundedContinuousTensorSpec)
        assert c["a"].shape == torch.Size(shape)
        assert c.device is None  # device not explicitly passed
        assert c["a"].device is None  # device not explicitly passed
        assert c["a", "b"].device == torch.device(device)
        c = c.to(device)
        assert c.device == torch.device(device)
        assert c["a"].device == torch.device(device)
    nested = CompositeSpec(a={"b": {"c": None}}, shape=shape)
    assert nested["a", "b", "c"] is None and nested["a", "b"].shape == (5,)
    spec = CompositeSpec(shape=shape)
    spec["x"] = {"y": UnboundedContinuousTensorSpec(shape=shape)}
    assert isinstance(spec["x"], CompositeSpec)


@pytest.mark.parametrize("recurse", [True, False])
def test_lock(recurse):
    shape = [3, 4, 5]
    spec = CompositeSpec(
        a=CompositeSpec(b=CompositeSpec(shape=shape[:3], device="cpu"), shape=shape[:2]),
        shape=shape[:1],
    )
    spec["a"] = spec["a"].clone()
    spec["a", "b"] = spec["a", "b"].clone()
    assert not spec.locked
    spec.lock_(recurse=recurse)
    assert spec.locked
    with pytest.raises(RuntimeError, match="Cannot modify a locked CompositeSpec."):
        spec["a"] = spec["a"].clone()
    with pytest.raises(RuntimeError, match="Cannot modify a locked CompositeSpec."):
        spec.set("a", spec["a"].clone())
    with pytest.raises(RuntimeError, match="Cannot modify a locked CompositeSpec."):
        spec["z", "new"] = UnboundedContinuousTensorSpec(shape[:1])
    if recurse:
        assert spec["a"].locked
        with pytest.raises(RuntimeError, match="Cannot modify a locked CompositeSpec."):
            spec["a"].set("b", spec["a", "b"].clone())
        with pytest.raises(RuntimeError, match="Cannot modify a locked CompositeSpec."):
            spec["a", "b"] = spec["a", "b"].clone()
    else:
        assert not spec["a"].locked
        spec["a", "b"] = spec["a", "b"].clone()
        spec["a"].set("b", spec["a", "b"].clone())
    spec.unlock_(recurse=recurse)
    spec["a"] = spec["a"].clone()
    spec["a", "b"] = spec["a", "b"].clone()
    spec["a"].set("b", spec["a", "b"].clone())


def test_non_key_setitem_and_delitem_raise():
    spec = CompositeSpec(a=UnboundedContinuousTensorSpec(3))
    for exc in (TypeError, ValueError):
        with pytest.raises(exc, match="keys are str or tuples of str"):
            spec[0] = UnboundedContinuousTensorSpec(3)
        with pytest.raises(exc, match="keys are str or tuples of str"):
            del spec[0]
    with pytest.raises(SpecKeyTypeError):
        spec.set(1.5, UnboundedContinuousTensorSpec(3))


def test_get_with_default_and_none_entries():
    spec = CompositeSpec(a=None, b=UnboundedContinuousTensorSpec(3))
    assert spec.get("a", 1) is None
    assert spec.get("zz", 1) == 1
    assert "a" in spec.keys() and "a" in spec.keys(True, True)
    assert spec.is_in(TensorDict(b=torch.zeros(3)))
    assert list(spec.rand().keys()) == ["b"]
    assert repr(spec).count("a: None") == 1
    assert CompositeSpec(a=None) == CompositeSpec(a=None)
    assert CompositeSpec(a=None) != CompositeSpec(a=UnboundedContinuousTensorSpec(3))


def test_clear_device_recurses_into_composites():
    spec = CompositeSpec(
        a=UnboundedContinuousTensorSpec(3), nested=CompositeSpec(b=None), device="cpu"
    )
    assert spec["nested"].device == torch.device("cpu")
    assert spec.clear_device_() is spec
    assert spec.device is None and spec["nested"].device is None
    assert spec["a"].device == torch.device("cpu")
    assert spec.ndimension() == 0


class TestExpand:
    @pytest.mark.parametrize("shape1", [None, (4,), (5, 4)])
    @pytest.mark.parametrize("shape2", [(), (10,)])
    def test_binary(self, shape1, shape2):
        spec = BinaryDiscreteTensorSpec(n=4, shape=shape1, device="cpu", dtype=torch.bool)
        shape2_real = (*shape2, *shape1) if shape1 is not None else (*shape2, 4)
        for spec2 in (spec.expand(shape2_real), spec.expand(*shape2_real)):
            assert spec2 is not spec
            assert spec2.shape == shape2_real
            assert spec2.rand().shape == spec2.shape
            assert spec2.zero().shape == spec2.shape

    def test_composite(self):
        batch_size = (5,)
        ones = torch.ones([*batch_size, 10])
        spec = CompositeSpec(
            spec1=BoundedTensorSpec(-ones, ones, (*batch_size, 10), "cpu", torch.bool),
            spec2=BinaryDiscreteTensorSpec(4, (*batch_size, 4), "cpu", torch.bool),
            spec3=DiscreteTensorSpec(4, batch_size, "cpu", torch.long),
            spec4=MultiDiscreteTensorSpec((4, 5, 6), (*batch_size, 3), "cpu", torch.long),
            spec5=MultiOneHotDiscreteTensorSpec((4, 5, 6), (*batch_size, 15), "cpu", torch.long),
            spec6=OneHotDiscreteTensorSpec(15, (*batch_size, 15), "cpu", torch.long),
            spec7=UnboundedContinuousTensorSpec((*batch_size, 9), "cpu", torch.float64),
            spec8=UnboundedDiscreteTensorSpec((*batch_size, 9), "cpu", torch.long),
            shape=batch_size,
        )
        for new_spec in (spec.expand((4, *batch_size)), spec.expand(4, *batch_size)):
            assert new_spec is not spec
            assert new_spec.shape == (4, *batch_size)
            assert new_spec["spec1"].shape == (4, *batch_size, 10)
            assert new_spec["spec4"].shape == (4, *batch_size, 3)
            assert new_spec["spec6"].shape == (4, *batch_size, 15)
            assert new_spec.is_in(new_spec.rand())
        assert spec == torch.stack(spec.unbind(0), 0)
        assert spec == torch.stack(spec.unbind(-1), -1)

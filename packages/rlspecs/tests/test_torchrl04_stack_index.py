"""torchrl 0.4-era stacking, lazy stacks, indexing and unbinding, with seed-era names."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rlspecs_cases import CUDA
from tensordict import LazyStackedTensorDict, TensorDict

from rlspecs import (
    BinaryDiscreteTensorSpec,
    BoundedTensorSpec,
    CompositeSpec,
    DiscreteTensorSpec,
    LazyStackedCompositeSpec,
    LazyStackedTensorSpec,
    MultiDiscreteTensorSpec,
    MultiOneHotDiscreteTensorSpec,
    NonTensorSpec,
    OneHotDiscreteTensorSpec,
    SpecStackError,
    UnboundedContinuousTensorSpec,
    UnboundedDiscreteTensorSpec,
)

LEAVES = {
    "binary": lambda: BinaryDiscreteTensorSpec(n=5, shape=(3, 5)),
    "bounded": lambda: BoundedTensorSpec(-torch.ones(3, 5), torch.ones(3, 5), shape=(3, 5)),
    "discrete": lambda: DiscreteTensorSpec(4, shape=(3, 5)),
    "multidiscrete": lambda: MultiDiscreteTensorSpec([4, 5], shape=(3, 2)),
    "multionehot": lambda: MultiOneHotDiscreteTensorSpec([4, 5], shape=(3, 9)),
    "onehot": lambda: OneHotDiscreteTensorSpec(5, shape=(3, 5)),
    "unboundedcont": lambda: UnboundedContinuousTensorSpec(shape=(3, 5)),
    "unboundeddiscrete": lambda: UnboundedDiscreteTensorSpec(shape=(3, 5), dtype=torch.long),
}


@pytest.mark.parametrize("kind", sorted(LEAVES))
class TestStack:
    def test_stack(self, kind):
        c1 = LEAVES[kind]()
        c = torch.stack([c1, c1.clone()], 0)
        assert type(c) is type(c1)
        assert c.shape == (2, *c1.shape)

    def test_stack_expand(self, kind):
        c1 = LEAVES[kind]()
        c = torch.stack([c1, c1.clone()], 0)
        cexpand = c.expand(3, 2, *c1.shape)
        assert cexpand.shape == (3, 2, *c1.shape)

    def test_stack_rand_zero(self, kind):
        c1 = LEAVES[kind]()
        c = torch.stack([c1, c1.clone()], 0)
        assert c.rand().shape == c.shape
        assert c.zero().shape == c.shape
        assert c.is_in(c.rand())

    def test_clone_to_unbind(self, kind):
        spec = LEAVES[kind]()
        assert spec.clone() == spec and spec.clone() is not spec
        assert spec.to("cpu") == spec
        assert spec == torch.stack(spec.unbind(0), 0)

    def test_torch_squeeze_and_unsqueeze(self, kind):
        spec = LEAVES[kind]()
        assert torch.unsqueeze(spec, 0).shape == (1, *spec.shape)
        assert torch.squeeze(torch.unsqueeze(spec, 0), 0) == spec
        assert torch.squeeze(torch.unsqueeze(spec, 0)) == spec.squeeze()
        with pytest.raises(TypeError):
            torch.cat([spec, spec], 0)


@pytest.mark.parametrize("stack_dim", [0, 1, -1])
def test_malformed_stack(stack_dim):
    shape = (3,)
    c1 = BoundedTensorSpec(-1, 1, shape=shape, dtype=torch.float64)
    c2 = BoundedTensorSpec(-1, 1, shape=shape, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="Dtypes differ"):
        torch.stack([c1, c2], stack_dim)
    c1 = BoundedTensorSpec(-1, 1, shape=shape, dtype=torch.float32)
    c2 = UnboundedContinuousTensorSpec(shape=shape, dtype=torch.float32)
    with pytest.raises(
        RuntimeError,
        match="Stacking specs cannot occur: Found more than one type of specs in the list.",
    ):
        torch.stack([c1, c2], stack_dim)
    c2 = BoundedTensorSpec(-1, 1, shape=shape + (3,), dtype=torch.float32)
    with pytest.raises(RuntimeError, match="Ndims differ"):
        torch.stack([c1, c2], stack_dim)
    with pytest.raises(SpecStackError, match="Stacking specs cannot occur"):
        torch.stack([CompositeSpec(), c1], 0)
    with pytest.raises(RuntimeError, match="Shapes differ"):
        torch.stack([CompositeSpec(shape=(2,)), CompositeSpec(shape=(3,))], 0)
    with pytest.raises(NotImplementedError, match="out="):
        torch.stack([c1, c1], 0, out=c1)


def test_stack_of_leaves_on_different_devices_raises(monkeypatch):
    a = UnboundedContinuousTensorSpec(3)
    b = UnboundedContinuousTensorSpec(3)
    b.device = torch.device("meta")
    with pytest.raises(RuntimeError, match="Devices differ"):
        torch.stack([a, b], 0)
    c1 = CompositeSpec(device="cpu")
    c2 = CompositeSpec()
    c2._device = torch.device("meta")
    with pytest.raises(RuntimeError, match="Devices differ"):
        torch.stack([c1, c2], 0)
    # a composite without device stacks with one that has a device
    assert torch.stack([CompositeSpec(device="cpu"), CompositeSpec()], 0).shape == (2,)


def test_lazy_leaf_stack():
    c1 = UnboundedContinuousTensorSpec(shape=(1, 3))
    c2 = UnboundedContinuousTensorSpec(shape=(1, 4))
    c = torch.stack([c1, c2], 0)
    assert isinstance(c, LazyStackedTensorSpec)
    assert c.shape == (2, 1, -1) and c.stack_dim == 0 == c.dim
    assert len(c) == c.shape[0] == 2
    assert c[0] is c1 and c[1] is c2
    assert c == torch.stack([c1.clone(), c2.clone()], 0)
    assert c != torch.stack([c2, c1], 0)
    assert c.unbind(0) == (c1, c2)
    with pytest.raises(ValueError, match="cannot be unbound"):
        c.unbind(2)
    with pytest.raises(ValueError, match="cannot unbind"):
        c.unbind(3)
    with pytest.raises(NotImplementedError, match="Pending resolution"):
        c[[[0, 1]]]
    assert c[[1, 0]].unbind(0) == (c2, c1)
    sample = c.rand()
    assert c.to_numpy(sample, safe=True)[0].shape == (1, 3)
    c.type_check(sample)
    assert c.clear_device_() is c
    encoded = c.encode([np.zeros((1, 3)), np.ones((1, 4))])
    assert c.is_in(encoded)


def test_lazy_stacked_to_numpy_checks_members():
    c1 = BoundedTensorSpec(-1, 1, shape=(2, 3), dtype=torch.float64)
    c2 = BoundedTensorSpec(-2, 2, shape=(2, 3), dtype=torch.float64)
    c = torch.stack([c1, c2], 0)
    assert isinstance(c, LazyStackedTensorSpec)
    for _ in range(10):
        r = c.rand()
        assert (c.to_numpy(r) == r.numpy()).all()
    with pytest.raises(AssertionError, match="member 0"):
        c.to_numpy(torch.full((2, 2, 3), 1.5, dtype=torch.float64), safe=True)
    with pytest.raises(TypeError, match="value.dtype"):
        c.type_check(torch.zeros(2, 2, 3))
    assert c.encode(np.zeros((2, 2, 3))).shape == (2, 2, 3)


def _hetero(shape=(1, 3)):
    c1 = CompositeSpec(a=UnboundedContinuousTensorSpec(shape=shape), shape=shape)
    c2 = CompositeSpec(
        a=UnboundedContinuousTensorSpec(shape=shape),
        b=UnboundedDiscreteTensorSpec(shape=shape),
        shape=shape,
    )
    return c1, c2


class TestStackComposite:
    def test_stack(self):
        c1 = CompositeSpec(a=UnboundedContinuousTensorSpec())
        c = torch.stack([c1, c1.clone()], 0)
        assert isinstance(c, CompositeSpec) and not isinstance(c, LazyStackedCompositeSpec)

    def test_stack_index(self):
        c1, c2 = _hetero(())
        c = torch.stack([c1, c2], 0)
        assert c.shape == torch.Size([2])
        assert c[0] is c1 and c[1] is c2
        assert c[..., 0] is c1 and c[..., 1] is c2
        assert c[0, ...] is c1 and c[1, ...] is c2
        assert isinstance(c[:], LazyStackedCompositeSpec)

    @pytest.mark.parametrize("stack_dim", [0, 1, 2, -3, -2, -1])
    def test_stack_index_multdim(self, stack_dim):
        c1, c2 = _hetero()
        c = torch.stack([c1, c2], stack_dim)
        d = stack_dim % 3
        assert c.stack_dim == d
        index = (slice(None),) * d
        assert c[(*index, 0)] is c1 and c[(*index, 1)] is c2
        assert c[(*index, 0, ...)] is c1
        assert isinstance(c[(*index, slice(None))], LazyStackedCompositeSpec)

    def test_stack_keys_len_and_del(self):
        c1, c2 = _hetero(())
        c = torch.stack([c1, c2], 0)
        assert len(c.keys()) == 1 and "a" in c.keys() and "b" not in c.keys()
        assert len(c) == c.shape[0] == 2
        del c["b"]  # only the second member has it
        assert "b" not in c2.keys()
        with pytest.raises(KeyError, match="at least one of the stacked specs"):
            del c["b"]
        del c["a"]
        assert "a" not in c1.keys() and "a" not in c2.keys()
        for exc in (ValueError, TypeError):
            with pytest.raises(exc):
                c[0] = CompositeSpec()
            with pytest.raises(exc):
                del c[0]

    def test_stack_expand_one(self):
        c1 = CompositeSpec(a=UnboundedContinuousTensorSpec(shape=(1,)), shape=(1,))
        c = torch.stack([c1], 0)
        assert c.expand(4, 1, 1).shape == (4, 1, 1)

    def test_stack_expand_multi(self):
        c1, c2 = _hetero(())
        c = torch.stack([c1, c2], 0)
        c_expand = c.expand(4, 2)
        assert c_expand.shape == torch.Size([4, 2])
        assert c_expand.members[0].shape == torch.Size([4])

    def test_stack_rand(self):
        c1, c2 = _hetero(())
        c = torch.stack([c1, c2], 0)
        r = c.rand()
        assert isinstance(r, LazyStackedTensorDict)
        assert r.shape == c.shape
        assert "a" in r.keys() and "b" not in r.keys()
        assert "b" in r.tensordicts[1].keys()
        assert c.is_in(r)
        assert c.rand([3]).shape == (3, 2)

    def test_stack_squeeze_unsqueeze(self):
        c1, c2 = _hetero()
        c = torch.stack([c1, c2], 1)
        assert c.shape == torch.Size([1, 2, 3])
        assert c.squeeze().shape == torch.Size([2, 3])
        assert c.squeeze(0).shape == torch.Size([2, 3])
        assert c.squeeze(2) is c  # wider than 1: kept
        for unsq in range(-2, 3):
            cu = c.unsqueeze(unsq)
            shape = list(c.shape)
            shape.insert(unsq if unsq >= 0 else c.ndim + unsq + 1, 1)
            assert cu.shape == torch.Size(shape)
            assert cu.squeeze(unsq) == c

    def test_stack_zero(self):
        c1, c2 = _hetero(())
        r = torch.stack([c1, c2], 0).zero()
        assert (r["a"] == 0).all()

    def test_to_numpy(self):
        c1 = CompositeSpec(a=BoundedTensorSpec(-1, 1, shape=(1, 3)), shape=(1, 3))
        c2 = CompositeSpec(
            a=BoundedTensorSpec(-1, 1, shape=(1, 3)),
            b=UnboundedDiscreteTensorSpec(shape=(1, 3)),
            shape=(1, 3),
        )
        c = torch.stack([c1, c2], 0)
        for _ in range(5):
            r = c.rand()
            for key, value in c.to_numpy(r).items():
                assert (c[key].to_numpy(r[key]) == value).all()
        td_fail = TensorDict({"a": torch.rand((2, 1, 3)) + 1}, [2, 1, 3])
        with pytest.raises(AssertionError):
            c.to_numpy(td_fail, safe=True)

    def test_type_check_and_clear_device(self):
        c1, c2 = _hetero(())
        c = torch.stack([c1, c2], 0)
        r = c.rand()
        c.type_check(r)
        c.type_check(r["a"], "a")
        with pytest.raises(ValueError, match="tensordict"):
            c.type_check(r["a"])
        assert c.clear_device_() is c and c.device is None

    def test_eq(self):
        c1, c2 = _hetero(())
        c = torch.stack([c1, c2], 0)
        assert c == torch.stack([c1.clone(), c2.clone()], 0)
        assert c != torch.stack([c2, c1], 0)
        c1b, c2b = _hetero((2,))
        assert torch.stack([c1b, c2b], 0) != torch.stack([c1b, c2b], 1)


class TestIndex:
    def test_binary(self):
        spec = BinaryDiscreteTensorSpec(n=4, shape=(3, 4), device="cpu", dtype=torch.bool)
        assert spec[2] == BinaryDiscreteTensorSpec(n=4, shape=(4,), device="cpu", dtype=torch.bool)
        assert spec[1:].shape == (2, 4)

    def test_bounded_and_unbounded(self):
        spec = BoundedTensorSpec(-torch.arange(12.0).reshape(3, 4), 1.0, shape=(3, 4))
        assert torch.equal(spec[1].low, spec.low[1])
        assert spec[range(2)].shape == (2, 4)
        assert spec[[0, 2]].shape == (2, 4)
        assert spec[np.array([0, 2]), 1].shape == (2,)
        assert spec[None].shape == (1, 3, 4)
        assert UnboundedContinuousTensorSpec((3, 4, 5))[2:, :3, ...].shape == (1, 3, 5)

    def test_nested_list_index_is_ambiguous(self):
        for spec in (BoundedTensorSpec(0, 1, (3, 4)), MultiDiscreteTensorSpec([2] * 4, (3, 4))):
            with pytest.raises(NotImplementedError, match="Pending resolution"):
                spec[[[0, 1], [1, 2]]]
            with pytest.raises(NotImplementedError, match="Pending resolution"):
                spec[0, [[0, 1]]]

    def test_one_hot_and_multi_one_hot_keep_their_domain(self):
        spec = OneHotDiscreteTensorSpec(n=4, shape=(3, 4))
        assert spec[1] == OneHotDiscreteTensorSpec(n=4, shape=(4,))
        multi = MultiOneHotDiscreteTensorSpec(nvec=[4, 5], shape=(3, 9))
        assert multi[1] == MultiOneHotDiscreteTensorSpec(nvec=[4, 5], shape=(9,))
        assert multi[..., 0].shape == (9,)

    def test_multi_discrete_keeps_its_entry_dim(self):
        spec = MultiDiscreteTensorSpec([[4, 5], [5, 6]])
        assert spec.shape == (2, 2)
        assert spec[1].nvec.tolist() == [5, 6]
        with pytest.raises(IndexError, match="too many indices"):
            spec[0, 0]

    def test_non_tensor(self):
        assert NonTensorSpec(shape=(3, 4))[0].shape == (4,)

    @pytest.mark.parametrize(
        "idx",
        [
            5,
            (0, 1),
            range(10),
            np.array([[2, 10]]),
            (slice(None), slice(1, 2), 1),
            (1, ..., 2, ..., 3),
            (1, 1, 1, 1),
            torch.tensor([True, False]),
            torch.tensor([0.5]),
        ],
        ids=str,
    )
    @pytest.mark.parametrize(
        "spec_class",
        [
            BinaryDiscreteTensorSpec,
            OneHotDiscreteTensorSpec,
            MultiOneHotDiscreteTensorSpec,
            MultiDiscreteTensorSpec,
            CompositeSpec,
        ],
    )
    def test_invalid_indexing(self, spec_class, idx):
        if spec_class in [BinaryDiscreteTensorSpec, OneHotDiscreteTensorSpec]:
            spec = spec_class(n=4, shape=[3, 4])
        elif spec_class == MultiDiscreteTensorSpec:
            spec = spec_class([2, 2, 2], shape=[3, 3])
        elif spec_class == MultiOneHotDiscreteTensorSpec:
            spec = spec_class([4], shape=[3, 4])
        else:
            spec = spec_class(k=UnboundedDiscreteTensorSpec(shape=(3, 4)), shape=(3,))
        with pytest.raises(IndexError):
            spec[idx]


class TestUnbind:
    @pytest.mark.parametrize(
        "spec",
        [
            BinaryDiscreteTensorSpec(n=4, shape=(5, 4)),
            OneHotDiscreteTensorSpec(n=4, shape=(5, 4)),
            MultiOneHotDiscreteTensorSpec(nvec=[2, 2], shape=(5, 4)),
            MultiDiscreteTensorSpec(nvec=[2, 2], shape=(5, 2)),
        ],
        ids=lambda s: type(s).__name__,
    )
    def test_domain_dim_cannot_be_unbound(self, spec):
        assert spec == torch.stack(spec.unbind(0), 0)
        with pytest.raises(ValueError, match="domain dims cannot be unbound"):
            spec.unbind(-1)

    def test_bounded_unbinds_leading_dims_only(self):
        """As torchrl 0.4: ``unbind(-1)`` (and ``ndim``) raise, a positive last dim unbinds."""
        spec = BoundedTensorSpec(-torch.ones(5, 4), torch.ones(5, 4))
        assert spec == torch.stack(spec.unbind(0), 0)
        assert spec == torch.stack(spec.unbind(1), 1)
        with pytest.raises(ValueError, match="Final dimension of Bounded must remain unchanged"):
            spec.unbind(-1)
        with pytest.raises(ValueError, match="Final dimension of Bounded must remain unchanged"):
            spec.unbind(2)
        with pytest.raises(ValueError, match=r"Cannot unbind along dim -3 with shape \(5, 4\)"):
            spec.unbind(-3)

    def test_composite(self):
        spec = CompositeSpec(a=UnboundedContinuousTensorSpec((5, 3)), shape=(5,))
        assert spec == torch.stack(spec.unbind(0), 0)
        assert spec == torch.stack(spec.unbind(-1), -1)
        with pytest.raises(ValueError, match="cannot unbind"):
            spec.unbind(1)


class TestReshape:
    def test_leaf_reshape_view_flatten_unflatten(self):
        spec = BoundedTensorSpec(-torch.arange(6.0).reshape(2, 3), 1.0, shape=(2, 3))
        assert spec.reshape(3, 2).shape == (3, 2)
        assert torch.equal(spec.reshape(-1).low, spec.low.reshape(-1))
        assert spec.view(6) == spec.flatten(0, 1)
        assert spec.flatten(0, 1).unflatten(0, (2, 3)) == spec

    def test_domain_dims_must_stay_trailing(self):
        spec = OneHotDiscreteTensorSpec(4, shape=(2, 3, 4), mask=torch.rand(2, 3, 4) > 0.2)
        reshaped = spec.reshape(6, 4)
        assert reshaped.shape == (6, 4) and reshaped.mask.shape == (6, 4)
        with pytest.raises(ValueError, match="trailing domain dims"):
            spec.reshape(2, 12)

    def test_composite_reshape(self):
        spec = CompositeSpec(a=UnboundedContinuousTensorSpec((2, 3, 4)), shape=(2, 3))
        assert spec.reshape(6)["a"].shape == (6, 4)
        assert spec.view(3, 2).shape == (3, 2)


@CUDA
def test_cuda_devices_in_stacks_equality_and_numpy():
    cpu = BoundedTensorSpec(-1.0, 1.0, (3,))
    cuda = cpu.to("cuda")
    assert cpu != cuda and cuda == BoundedTensorSpec(-1.0, 1.0, (3,), device="cuda")
    with pytest.raises(RuntimeError, match="Devices differ"):
        torch.stack([cpu, cuda], 0)
    with pytest.raises(RuntimeError, match="Devices differ"):
        torch.stack([CompositeSpec(device="cpu"), CompositeSpec(device="cuda")], 0)
    sample = cuda.rand()
    assert cuda.to_numpy(sample, safe=True).shape == (3,)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        spec = BoundedTensorSpec(0.1, 0.30000001, (4096,), device="cuda", dtype=dtype)
        assert all(spec.is_in(spec.rand()) for _ in range(10))
    composite = CompositeSpec(a=cpu, shape=(), device="cuda")
    assert composite["a"].device.type == "cuda"
    composite["b"] = UnboundedContinuousTensorSpec(3)
    assert composite["b"].device.type == "cuda"
    assert composite.rand().device.type == "cuda"
    assert composite.clear_device_().device is None and composite["a"].device.type == "cuda"
    lazy = torch.stack(
        [UnboundedContinuousTensorSpec(3, "cuda"), UnboundedContinuousTensorSpec(2, "cuda")], 0
    )
    assert lazy.rand().device.type == "cuda" and lazy.to("cpu").device == torch.device("cpu")

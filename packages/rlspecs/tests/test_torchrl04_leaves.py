"""torchrl 0.4-era leaf behaviour, probed the way torchrl's own spec tests do (seed-era names)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from rlspecs_cases import chisquare_pvalue

from rlspecs import (
    DEVICE_TYPING,
    BinaryBox,
    BinaryDiscreteTensorSpec,
    BoundedTensorSpec,
    Box,
    BoxList,
    CategoricalBox,
    ContinuousBox,
    DiscreteBox,
    DiscreteTensorSpec,
    MultiDiscreteTensorSpec,
    MultiOneHotDiscreteTensorSpec,
    NonTensorSpec,
    OneHotDiscreteTensorSpec,
    UnboundedContinuousTensorSpec,
    UnboundedDiscreteTensorSpec,
)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, None])
def test_bounded(dtype):
    torch.manual_seed(0)
    for _ in range(100):
        bounds = torch.randn(2).sort()[0]
        ts = BoundedTensorSpec(bounds[0].item(), bounds[1].item(), torch.Size((1,)), dtype=dtype)
        _dtype = dtype or torch.get_default_dtype()
        r = ts.rand()
        assert ts.is_in(r)
        assert r.dtype is _dtype
        assert ts.is_in(ts.encode(bounds.mean().item()).to(_dtype))
        assert (ts.encode(ts.to_numpy(r)) == r).all()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64])
@pytest.mark.parametrize("shape", [[], [3]])
def test_ndbounded(dtype, shape):
    torch.manual_seed(0)
    for _ in range(20):
        lb = torch.rand(10) - 1
        ub = torch.rand(10) + 1
        ts = BoundedTensorSpec(lb, ub, dtype=dtype)
        r = ts.rand(shape)
        assert r.shape == (*shape, 10) and r.dtype is dtype
        assert ts.is_in(r)
        assert (ts._project(r) == r).all()
        if not shape:
            assert (ts.encode(ts.to_numpy(r)) == r).all()
        else:  # torchrl 0.4 refuses a batch of arrays: encode with the expanded spec
            with pytest.raises(RuntimeError, match="Shape mismatch"):
                ts.encode(ts.to_numpy(r))
            assert (ts.expand(*shape, *ts.shape).encode(ts.to_numpy(r)) == r).all()
        with pytest.raises(AssertionError):
            ts.to_numpy(torch.full((10,), 3.0, dtype=dtype), safe=True)
        # unsafe conversion does not check
        assert ts.to_numpy(torch.full((10,), 3.0, dtype=dtype), safe=False).shape == (10,)


def test_bounded_rand_stays_inside_in_low_precision():
    torch.manual_seed(0)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        spec = BoundedTensorSpec(0.1, 0.30000001, (4096,), dtype=dtype)
        for _ in range(20):
            assert spec.is_in(spec.rand())
        tensor_bounds = BoundedTensorSpec(torch.rand(4096) - 2, torch.rand(4096), dtype=dtype)
        assert tensor_bounds.is_in(tensor_bounds.rand((3,)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.float64, None])
def test_unbounded(dtype):
    torch.manual_seed(0)
    ts = UnboundedContinuousTensorSpec(dtype=dtype)
    dtype = dtype or torch.get_default_dtype()
    for _ in range(20):
        r = ts.rand()
        assert ts.is_in(r)
        assert r.dtype is dtype
        assert (ts.encode(ts.to_numpy(r)) == r).all()


@pytest.mark.parametrize("n", [1, 10])
@pytest.mark.parametrize("shape", [[], [3]])
def test_ndunbounded(n, shape):
    ts = UnboundedContinuousTensorSpec(shape=[n])
    r = ts.rand(shape)
    assert r.shape == (*shape, n)
    assert ts.is_in(r)
    if not shape:
        assert (ts.encode(ts.to_numpy(r)) == r).all()
    else:  # torchrl 0.4 refuses a batch of arrays: encode with the expanded spec
        with pytest.raises(RuntimeError, match="Shape mismatch"):
            ts.encode(ts.to_numpy(r))
        assert (ts.expand(*shape, *ts.shape).encode(ts.to_numpy(r)) == r).all()


@pytest.mark.parametrize("n", [3, 10])
def test_binary(n):
    torch.manual_seed(0)
    ts = BinaryDiscreteTensorSpec(n)
    for _ in range(20):
        r = ts.rand()
        assert ts.is_in(r)
        assert r.shape == (n,)
        assert ((r == 0) | (r == 1)).all()
        assert (ts.encode(r.numpy()) == r).all()
        assert (ts.encode(ts.to_numpy(r)) == r).all()
    assert BinaryDiscreteTensorSpec(n, shape=()).shape == (n,)
    assert ts.n == 2 and ts.space == BinaryBox(n)


@pytest.mark.parametrize("ns", [[5], [5, 2, 3], [4, 4, 1]])
@pytest.mark.parametrize("shape", [None, [], torch.Size([3]), torch.Size([4, 5])])
def test_mult_onehot(shape, ns):
    torch.manual_seed(0)
    ts = MultiOneHotDiscreteTensorSpec(nvec=ns)
    for _ in range(10):
        r = ts.rand(shape)
        assert r.shape == (*(shape or []), sum(ns))
        assert ts.is_in(r)
        assert ((r == 0) | (r == 1)).all()
        for _r, _n in zip(r.split(ns, dim=-1), ns):
            assert (_r.sum(-1) == 1).all() and _r.shape[-1] == _n
        categorical = ts.to_categorical(r)
        assert not ts.is_in(categorical)
        assert (ts.encode(categorical) == r).all()  # a tensor of labels may be batched
        np_r = ts.to_numpy(r)
        assert np_r.shape == (*(shape or []), len(ns))
        if not shape:
            assert (ts.encode(np_r) == r).all()
        else:  # torchrl 0.4 refuses a batch of array labels: encode with the expanded spec
            with pytest.raises(RuntimeError, match="Shape mismatch"):
                ts.encode(np_r)
            assert (ts.expand(*shape, *ts.shape).encode(np_r) == r).all()


@pytest.mark.parametrize(
    "ns",
    [5, [5], [5, 2, 3], [4, 5, 1, 3], [[1, 2], [3, 4]], [[[2, 4], [3, 5]], [[4, 5], [2, 3]]]],
)
@pytest.mark.parametrize("shape", [None, [], torch.Size([3]), torch.Size([4, 5])])
@pytest.mark.parametrize("dtype", [torch.float, torch.int, torch.long])
def test_multi_discrete(shape, ns, dtype):
    torch.manual_seed(0)
    ts = MultiDiscreteTensorSpec(ns, dtype=dtype)
    _real_shape = shape if shape is not None else []
    nvec_shape = torch.tensor(ns).size()
    if nvec_shape == torch.Size([1]):
        nvec_shape = []
    for _ in range(10):
        r = ts.rand(shape)
        assert r.shape == torch.Size([*_real_shape, *nvec_shape])
        assert ts.is_in(r), (r, r.shape, ns)
    rand = torch.rand(torch.Size([*_real_shape, *nvec_shape]))
    projection = ts._project(rand)
    assert rand.shape == projection.shape
    assert ts.is_in(projection)
    assert projection.dtype == dtype


def test_multi_discrete_scalar_nvec_keeps_its_dim_in_zero_and_encode():
    spec = MultiDiscreteTensorSpec(4)
    assert spec.shape == (1,) and spec.nvec.tolist() == [4]
    assert spec.zero().shape == (1,)
    assert spec.encode(3).shape == (1,)
    assert spec.is_in(torch.tensor(3)) and spec.is_in(torch.tensor([3]))
    assert not spec.is_in(torch.tensor(4))
    assert spec.project(torch.tensor([7, -2])).tolist() == [3, 0]


@pytest.mark.parametrize("n", [1, 4, 7, 99])
@pytest.mark.parametrize("device", ["cpu"])
@pytest.mark.parametrize("shape", [None, [], [1], [1, 2]])
def test_discrete_conversion(n, device, shape):
    categorical = DiscreteTensorSpec(n, device=device, shape=shape)
    shape_one_hot = [*shape, n] if shape else [n]
    one_hot = OneHotDiscreteTensorSpec(n, device=device, shape=shape_one_hot)
    assert categorical != one_hot
    assert categorical.to_one_hot_spec() == one_hot
    assert one_hot.to_categorical_spec() == categorical
    assert categorical.is_in(one_hot.to_categorical(one_hot.rand(shape)))
    assert one_hot.is_in(categorical.to_one_hot(categorical.rand(shape)))


@pytest.mark.parametrize("ns", [[5], [5, 2, 3], [4, 5, 1, 3]])
@pytest.mark.parametrize("shape", [torch.Size([3]), torch.Size([4, 5])])
def test_multi_discrete_conversion(ns, shape):
    categorical = MultiDiscreteTensorSpec(ns, device="cpu")
    one_hot = MultiOneHotDiscreteTensorSpec(ns, device="cpu")
    assert categorical != one_hot
    assert categorical.to_one_hot_spec() == one_hot
    assert one_hot.to_categorical_spec() == categorical
    assert categorical.is_in(one_hot.to_categorical(one_hot.rand(shape)))
    assert one_hot.is_in(categorical.to_one_hot(categorical.rand(shape)))


class TestEquality:
    """Equality across values, dtypes, devices and classes, as torchrl 0.4 defines it."""

    @staticmethod
    def _ts_make_all_fields_equal(ts_to, ts_from):
        ts_to.shape = ts_from.shape
        ts_to.space = ts_from.space
        ts_to.device = ts_from.device
        ts_to.dtype = ts_from.dtype
        ts_to.domain = ts_from.domain
        return ts_to

    def test_equality_bounded(self):
        ts = BoundedTensorSpec(10, 100, torch.Size((1,)), "cpu", torch.float16)
        assert ts == BoundedTensorSpec(10, 100, torch.Size((1,)), "cpu", torch.float16)
        assert ts != BoundedTensorSpec(11, 100, torch.Size((1,)), "cpu", torch.float16)
        assert ts != BoundedTensorSpec(10, 101, torch.Size((1,)), "cpu", torch.float16)
        assert ts != BoundedTensorSpec(10, 100, torch.Size((1,)), "cpu:0", torch.float16)
        assert ts != BoundedTensorSpec(10, 100, torch.Size((1,)), "cpu", torch.float64)
        other = self._ts_make_all_fields_equal(
            UnboundedContinuousTensorSpec(device="cpu", shape=(1,), dtype=torch.float16), ts
        )
        assert ts != other and other != ts
        assert other.space == ts.space and other.domain == ts.domain

    def test_equality_onehot(self):
        ts = OneHotDiscreteTensorSpec(5, device="cpu", dtype=torch.float16, use_register=False)
        assert ts == OneHotDiscreteTensorSpec(5, device="cpu", dtype=torch.float16)
        assert ts != OneHotDiscreteTensorSpec(6, device="cpu", dtype=torch.float16)
        assert ts != OneHotDiscreteTensorSpec(5, device="cpu:0", dtype=torch.float16)
        assert ts != OneHotDiscreteTensorSpec(5, device="cpu", dtype=torch.float64)
        assert ts != OneHotDiscreteTensorSpec(
            5, device="cpu", dtype=torch.float16, use_register=True
        )
        other = self._ts_make_all_fields_equal(
            BoundedTensorSpec(0, 1, torch.Size((5,)), "cpu", torch.float16), ts
        )
        assert ts != other

    def test_equality_unbounded(self):
        ts = UnboundedContinuousTensorSpec(device="cpu", dtype=torch.float16)
        assert ts == UnboundedContinuousTensorSpec(device="cpu", dtype=torch.float16)
        assert ts != UnboundedContinuousTensorSpec(device="cpu:0", dtype=torch.float16)
        assert ts != UnboundedContinuousTensorSpec(device="cpu", dtype=torch.float64)
        other = self._ts_make_all_fields_equal(
            BoundedTensorSpec(0, 1, torch.Size((1,)), "cpu", torch.float16), ts
        )
        assert ts != other

    def test_unbounded_equals_a_bounded_spanning_its_dtype(self):
        for dtype in (torch.float32, torch.int8, torch.bool):
            info = torch.finfo(dtype) if dtype.is_floating_point else None
            if dtype == torch.bool:
                low, high = False, True
            elif info is not None:
                low, high = info.min, info.max
            else:
                low, high = torch.iinfo(dtype).min, torch.iinfo(dtype).max
            bounded = BoundedTensorSpec(low, high, (3,), dtype=dtype)
            unbounded = UnboundedDiscreteTensorSpec((3,), dtype=dtype)
            assert unbounded == bounded and bounded == unbounded
            assert unbounded != BoundedTensorSpec(low, high, (4,), dtype=dtype)
        assert UnboundedContinuousTensorSpec(3) != BoundedTensorSpec(-1.0, 1.0, (3,))

    @pytest.mark.parametrize("shape", [(), (1,), (5, 2)])
    def test_equality_ndunbounded(self, shape):
        ts = UnboundedContinuousTensorSpec(shape=shape, device="cpu", dtype=torch.float16)
        assert ts == UnboundedContinuousTensorSpec(shape=shape, device="cpu", dtype=torch.float16)
        assert ts != UnboundedContinuousTensorSpec(shape=(7,), device="cpu", dtype=torch.float16)
        other = self._ts_make_all_fields_equal(
            BoundedTensorSpec(0, 1, torch.Size((1,)), "cpu", torch.float16), ts
        )
        # as torchrl 0.4: a Bounded given the space of an n-d Unbounded (the dtype's range) equals
        # it; the (1,)-shaped float Unbounded's space is [-inf, inf], which spans no dtype
        assert (ts == other) is (tuple(shape) != (1,))
        assert (other == ts) is (tuple(shape) != (1,))

    def test_equality_discrete(self):
        ts = DiscreteTensorSpec(5, shape=(1,), device="cpu", dtype=torch.float16)
        assert ts == DiscreteTensorSpec(5, shape=(1,), device="cpu", dtype=torch.float16)
        assert ts != DiscreteTensorSpec(6, shape=(1,), device="cpu", dtype=torch.float16)
        assert ts != DiscreteTensorSpec(5, shape=(1,), device="cpu:0", dtype=torch.float16)
        assert ts != DiscreteTensorSpec(5, shape=(1,), device="cpu", dtype=torch.float64)
        other = self._ts_make_all_fields_equal(
            BoundedTensorSpec(0, 1, torch.Size((1,)), "cpu", torch.float16), ts
        )
        assert ts != other

    def test_equality_binary(self):
        ts = BinaryDiscreteTensorSpec(n=5, device="cpu", dtype=torch.float16)
        assert ts == BinaryDiscreteTensorSpec(n=5, device="cpu", dtype=torch.float16)
        assert ts != BinaryDiscreteTensorSpec(n=10, device="cpu", dtype=torch.float16)
        assert ts != BinaryDiscreteTensorSpec(n=5, device="cpu", dtype=torch.float64)
        categorical = DiscreteTensorSpec(2, shape=(5,), device="cpu", dtype=torch.float16)
        assert ts == categorical and categorical == ts
        assert ts != DiscreteTensorSpec(3, shape=(5,), device="cpu", dtype=torch.float16)
        other = self._ts_make_all_fields_equal(
            BoundedTensorSpec(0, 1, torch.Size((5,)), "cpu", torch.float16), ts
        )
        assert ts != other

    @pytest.mark.parametrize("nvec", [[3], [3, 4], [5, 2, 3, 2]])
    def test_equality_multi_onehot(self, nvec):
        ts = MultiOneHotDiscreteTensorSpec(nvec=nvec, device="cpu", dtype=torch.float16)
        assert ts == MultiOneHotDiscreteTensorSpec(nvec=nvec, device="cpu", dtype=torch.float16)
        for i in range(len(nvec)):
            other_nvec = list(nvec)
            other_nvec[i] += 1
            assert ts != MultiOneHotDiscreteTensorSpec(
                other_nvec, device="cpu", dtype=torch.float16
            )
        assert ts != MultiOneHotDiscreteTensorSpec(nvec, device="cpu", dtype=torch.float64)
        other = self._ts_make_all_fields_equal(
            BoundedTensorSpec(0, 1, torch.Size((sum(nvec),)), "cpu", torch.float16), ts
        )
        assert ts != other

    @pytest.mark.parametrize("nvec", [[3], [3, 4], [5, 2, 3, 2]])
    def test_equality_multi_discrete(self, nvec):
        ts = MultiDiscreteTensorSpec(nvec=nvec, device="cpu", dtype=torch.float16)
        assert ts == MultiDiscreteTensorSpec(nvec=nvec, device="cpu", dtype=torch.float16)
        for i in range(len(nvec)):
            other_nvec = list(nvec)
            other_nvec[i] += 1
            assert ts != MultiDiscreteTensorSpec(other_nvec, device="cpu", dtype=torch.float16)
        assert ts != MultiDiscreteTensorSpec(nvec, device="cpu", dtype=torch.float64)
        other = self._ts_make_all_fields_equal(
            BoundedTensorSpec(0, 1, torch.Size((len(nvec),)), "cpu", torch.float16), ts
        )
        assert ts != other


class TestSpec:
    @pytest.mark.parametrize("action_spec_cls", [OneHotDiscreteTensorSpec, DiscreteTensorSpec])
    def test_discrete_action_spec_reconstruct(self, action_spec_cls):
        torch.manual_seed(0)
        action_spec = action_spec_cls(10)
        actions_tensors = [action_spec.rand() for _ in range(10)]
        actions_numpy = [action_spec.to_numpy(a) for a in actions_tensors]
        actions_tensors_2 = [action_spec.encode(a) for a in actions_numpy]
        assert all((a1 == a2).all() for a1, a2 in zip(actions_tensors, actions_tensors_2))
        actions_numpy = [int(np.random.randint(0, 10, (1,))[0]) for _ in actions_tensors]
        actions_tensors = [action_spec.encode(a) for a in actions_numpy]
        actions_numpy_2 = [action_spec.to_numpy(a) for a in actions_tensors]
        assert all(a1 == a2 for a1, a2 in zip(actions_numpy, actions_numpy_2))

    def test_mult_discrete_action_spec_reconstruct(self):
        torch.manual_seed(0)
        action_spec = MultiOneHotDiscreteTensorSpec((10, 5))
        actions_tensors = [action_spec.rand() for _ in range(10)]
        actions_categorical = [action_spec.to_categorical(a) for a in actions_tensors]
        actions_tensors_2 = [action_spec.encode(a) for a in actions_categorical]
        assert all((a1 == a2).all() for a1, a2 in zip(actions_tensors, actions_tensors_2))
        actions_categorical_2 = [action_spec.to_categorical(a) for a in actions_tensors_2]
        assert all((a1 == a2).all() for a1, a2 in zip(actions_categorical, actions_categorical_2))

    def test_one_hot_discrete_action_spec_rand(self):
        torch.manual_seed(0)
        action_spec = OneHotDiscreteTensorSpec(10)
        sample = action_spec.rand((100000,))
        counts = torch.bincount(sample.long().argmax(-1), minlength=10).tolist()
        assert chisquare_pvalue(counts) > 0.1
        labels = action_spec.to_numpy(sample)
        assert chisquare_pvalue([int((labels == i).sum()) for i in range(10)]) > 0.1

    def test_categorical_action_spec_rand(self):
        torch.manual_seed(1)
        action_spec = DiscreteTensorSpec(10)
        sample = action_spec.rand((10000,))
        assert chisquare_pvalue(torch.bincount(sample, minlength=10).tolist()) > 0.1
        labels = action_spec.to_numpy(sample)
        assert chisquare_pvalue([int((labels == i).sum()) for i in range(10)]) > 0.1

    def test_mult_discrete_action_spec_rand(self):
        torch.manual_seed(0)
        ns = (10, 5)
        action_spec = MultiOneHotDiscreteTensorSpec(ns)
        sample = action_spec.to_numpy(action_spec.rand((20000,)))
        assert sample.shape == (20000, 2)
        for column, n in enumerate(ns):
            counts = [int((sample[:, column] == i).sum()) for i in range(n)]
            assert chisquare_pvalue(counts) > 0.001, counts

    def test_categorical_action_spec_encode(self):
        action_spec = DiscreteTensorSpec(10)
        projected = action_spec.project(torch.tensor([-100, -1, 0, 1, 9, 10, 100]))
        assert (projected == torch.tensor([0, 0, 0, 1, 9, 9, 9])).all()
        projected = action_spec.project(torch.tensor([-100.0, -1.0, 0.0, 1.0, 9.0, 10.0, 100.0]))
        assert (projected == torch.tensor([0, 0, 0, 1, 9, 9, 9])).all()

    def test_bounded_rand(self):
        spec = BoundedTensorSpec(-3, 3, torch.Size((1,)))
        sample = torch.stack([spec.rand() for _ in range(100)])
        assert (-3 <= sample).all() and (3 >= sample).all()

    def test_ndbounded_shape(self):
        spec = BoundedTensorSpec(-3, 3 * torch.ones(10, 5), shape=[10, 5])
        sample = torch.stack([spec.rand() for _ in range(100)], 0)
        assert (-3 <= sample).all() and (3 >= sample).all()
        assert sample.shape == torch.Size([100, 10, 5])


def test_rand_is_reproducible_under_manual_seed():
    specs = [
        BoundedTensorSpec(-1.0, 2.0, (64, 3)),
        BoundedTensorSpec(torch.zeros(3), torch.arange(1.0, 4.0)).expand(64, 3),
        DiscreteTensorSpec(5, shape=(64,)),
        DiscreteTensorSpec(2, shape=(64,), dtype=torch.bool),
        OneHotDiscreteTensorSpec(4, shape=(64, 4)),
        BinaryDiscreteTensorSpec(3, shape=(64, 3)),
        MultiDiscreteTensorSpec([2, 3], shape=(64, 2)),
        MultiDiscreteTensorSpec([3, 3], shape=(64, 2), dtype=torch.int32),
    ]
    for spec in specs:
        torch.manual_seed(3)
        first = spec.rand((2,))
        torch.manual_seed(3)
        assert torch.equal(first, spec.rand((2,)))
        assert spec.is_in(first)


@pytest.mark.parametrize(
    "spec, labels",
    [
        (BoundedTensorSpec(-1.0, 2.0, (4096,)), None),
        (DiscreteTensorSpec(5, shape=(4096,)), 5),
        (OneHotDiscreteTensorSpec(5, shape=(4096, 5)), 5),
        (BinaryDiscreteTensorSpec(4, shape=(1024, 4)), 2),
        (MultiDiscreteTensorSpec([2, 5], shape=(4096, 2)), 5),
    ],
    ids=["bounded", "categorical", "one_hot", "binary", "multi_categorical"],
)
def test_rand_is_uniform(spec, labels):
    torch.manual_seed(0)
    sample = spec.rand()
    if labels is None:  # uniform on [-1, 2]: ten equal bins
        counts = torch.histc(sample, bins=10, min=-1.0, max=2.0).tolist()
    elif isinstance(spec, OneHotDiscreteTensorSpec):
        counts = torch.bincount(spec.to_categorical(sample), minlength=labels).tolist()
    else:
        counts = torch.bincount(sample[..., -1].reshape(-1).long(), minlength=labels).tolist()
    assert chisquare_pvalue(counts) > 0.001, counts


def test_box_names():
    assert DiscreteBox is CategoricalBox
    for box in (CategoricalBox(3), BinaryBox(2), ContinuousBox(torch.zeros(2), torch.ones(2))):
        assert isinstance(box, Box)
        assert box.clone() == box and box.to("cpu") == box
    low, high = ContinuousBox(torch.zeros(2), torch.ones(2))
    assert torch.equal(high, torch.ones(2))
    assert ContinuousBox(torch.zeros(2), torch.ones(2)).to(torch.float64).low.dtype == torch.float64
    boxes = BoxList([CategoricalBox(2), CategoricalBox(3)])
    assert len(boxes) == 2 and list(boxes) == [CategoricalBox(2), CategoricalBox(3)]
    assert boxes == BoxList((CategoricalBox(2), CategoricalBox(3))) == boxes.to("cpu")
    assert BoxList.from_nvec(torch.tensor(4)) == CategoricalBox(4)
    assert BoxList.from_nvec([2, 3]) == boxes
    assert MultiDiscreteTensorSpec([[2, 3], [2, 3]]).space == BoxList(
        [BoxList([CategoricalBox(2), CategoricalBox(2)]), BoxList([CategoricalBox(3)] * 2)]
    )
    assert ContinuousBox(torch.zeros(2), torch.ones(2)) != ContinuousBox(
        torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    )


def test_device_typing_names_the_accepted_device_types():
    for device in ("cpu", torch.device("cpu")):
        assert isinstance(device, DEVICE_TYPING)
    assert isinstance(0, DEVICE_TYPING)


def test_ndimension_and_ndim():
    for spec in (
        UnboundedContinuousTensorSpec((2, 3)),
        OneHotDiscreteTensorSpec(4, shape=(2, 4)),
        NonTensorSpec(shape=(2, 3)),
    ):
        assert spec.ndimension() == spec.ndim == 2


def test_type_check_names_the_key():
    spec = DiscreteTensorSpec(3)
    spec.type_check(torch.zeros((), dtype=torch.int64))
    with pytest.raises(TypeError, match=r"value.dtype=torch.float32 but .*key 'action'"):
        spec.type_check(torch.zeros(()), "action")


def test_clear_device_is_a_no_op_on_leaves():
    spec = UnboundedContinuousTensorSpec(3, device="cpu")
    assert spec.clear_device_() is spec and spec.device == torch.device("cpu")


def test_space_and_domain_are_assignable():
    spec = BoundedTensorSpec(0.0, 1.0, (2,))
    assert spec.domain == "continuous"
    spec.space = CategoricalBox(3)
    spec.domain = "discrete"
    assert spec.space == CategoricalBox(3) and spec.domain == "discrete"
    assert spec.is_in(torch.tensor([0.5, 0.5]))  # bounds are untouched
    assert BoundedTensorSpec(0, 1, (2,), domain="discrete").domain == "discrete"
    assert UnboundedContinuousTensorSpec(domain="discrete").domain == "discrete"
    assert DiscreteTensorSpec(3, dtype=torch.float16).domain == "discrete"
    assert NonTensorSpec().domain == ""

"""Action masks on ``OneHot``, ``Categorical``, ``MultiOneHot``, ``MultiCategorical`` and stacks."""

from __future__ import annotations

import re

import pytest
import torch
from rlspecs_cases import CUDA

from rlspecs import (
    Binary,
    Categorical,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    SpecShapeError,
    Stacked,
)
from rlspecs._masks import MASK_DTYPE


def _labels(spec, sample):
    if isinstance(spec, (OneHot, MultiOneHot)):
        return spec.to_categorical(sample)
    return sample


MASKED = {
    # spec, allowed labels of each variable
    "categorical": (
        lambda m: Categorical(4, shape=(3,), mask=m),
        torch.tensor([0, 1, 0, 1]).bool(),
    ),
    "one_hot": (lambda m: OneHot(4, shape=(3, 4), mask=m), torch.tensor([0, 1, 0, 1]).bool()),
    "multi_one_hot": (
        lambda m: MultiOneHot([2, 3], shape=(3, 5), mask=m),
        torch.tensor([1, 0, 0, 1, 1]).bool(),
    ),
    "multi_categorical": (
        lambda m: MultiCategorical([2, 3], shape=(3, 2), mask=m),
        torch.tensor([1, 0, 0, 1, 1]).bool(),
    ),
}


@pytest.fixture(params=sorted(MASKED))
def masked(request):
    factory, mask = MASKED[request.param]
    return factory(mask), mask


def _allowed(spec, labels):
    """Whether each label is allowed by ``spec.mask`` (per block for the multi specs)."""
    if isinstance(spec, (MultiOneHot, MultiCategorical)):
        sizes = [2, 3]
        blocks = spec.mask.split(sizes, -1)
        return torch.stack(
            [
                b.expand(*labels.shape[:-1], b.shape[-1]).gather(-1, labels[..., i : i + 1].long())
                for i, b in enumerate(blocks)
            ],
            -1,
        ).all()
    return (
        spec.mask.expand(*labels.shape, spec.mask.shape[-1])
        .gather(-1, labels.long().unsqueeze(-1))
        .all()
    )


def test_masked_rand_samples_only_allowed_actions(masked):
    spec, _ = masked
    torch.manual_seed(0)
    sample = spec.rand((200,))
    assert spec.is_in(sample)
    assert _allowed(spec, _labels(spec, sample))


def test_masked_rand_covers_every_allowed_action():
    spec = Categorical(5, mask=torch.tensor([True, False, True, True, False]))
    assert set(spec.rand((2000,)).tolist()) == {0, 2, 3}


def test_masked_is_in_rejects_forbidden_actions():
    spec = Categorical(3, mask=torch.tensor([True, False, True]))
    assert spec.is_in(torch.tensor(2)) and not spec.is_in(torch.tensor(1))
    one_hot = OneHot(3, mask=torch.tensor([True, False, True]))
    assert not one_hot.is_in(torch.tensor([False, True, False]))
    assert one_hot.is_in(torch.tensor([True, False, False]))
    multi = MultiCategorical([2, 2], mask=torch.tensor([True, False, False, True]))
    assert multi.is_in(torch.tensor([0, 1])) and not multi.is_in(torch.tensor([1, 1]))
    multi_one_hot = MultiOneHot([2, 2], mask=torch.tensor([True, False, False, True]))
    assert not multi_one_hot.is_in(torch.tensor([True, False, True, False]))


def test_masked_project_replaces_forbidden_actions(masked):
    spec, _ = masked
    torch.manual_seed(1)
    value = spec.rand()
    unmasked = spec.clone()
    unmasked.update_mask(None)
    bad = unmasked.rand((64,))
    projected = spec.project(bad)
    assert spec.is_in(projected)
    assert spec.project(value) is value


def test_all_masked_rows_raise_on_rand():
    mask = torch.tensor([[True, False], [False, False]])
    spec = Categorical(2, shape=(2,), mask=mask)
    with pytest.raises(ValueError, match=re.escape("(first at position (1,))")):
        spec.rand()
    with pytest.raises(ValueError, match="allow no category"):
        OneHot(2, shape=(2, 2), mask=mask).rand()
    with pytest.raises(ValueError, match="allow no category"):
        MultiCategorical([2], shape=(2, 1), mask=mask).rand()


def test_update_mask_checks_dtype_and_shape():
    spec = OneHot(3, shape=(2, 3))
    with pytest.raises(
        ValueError, match=re.escape(MASK_DTYPE.format(dtype=torch.int64, cls="OneHot"))
    ):
        spec.update_mask(torch.ones(3, dtype=torch.int64))
    for exc in (RuntimeError, ValueError, SpecShapeError):
        with pytest.raises(exc, match="Cannot expand mask to the desired shape"):
            spec.update_mask(torch.ones(4, dtype=torch.bool))
    spec.update_mask(torch.tensor([True, False, True]))
    assert spec.mask.shape == (2, 3)
    spec.update_mask(None)
    assert spec.mask is None
    with pytest.raises(TypeError, match="take no mask"):
        Binary(3).update_mask(torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="same nvec"):
        MultiCategorical(torch.tensor([[2, 3], [3, 2]])).update_mask(
            torch.ones(5, dtype=torch.bool)
        )


def test_mask_survives_shape_operations(masked):
    spec, _ = masked
    for other in (
        spec.expand(2, *spec.shape),
        spec.clone(),
        spec.to("cpu"),
        spec.unsqueeze(0),
        spec.unsqueeze(0).squeeze(0),
        spec[0],
        spec[1:],
        spec.reshape(3, 1, *spec.shape[1:]),
        *spec.unbind(0),
    ):
        assert other.mask is not None
        assert torch.equal(other.mask.reshape(-1, spec.mask.shape[-1])[0], spec.mask[0])
        assert other.is_in(other.rand())
    assert spec.clone().mask.data_ptr() != spec.mask.data_ptr()
    assert spec == spec.clone()


def test_mask_takes_part_in_equality(masked):
    spec, mask = masked
    other = spec.clone()
    other.update_mask(~mask | mask)  # everything allowed
    assert spec != other
    other.update_mask(None)
    assert spec != other


def test_stack_of_masked_specs():
    a = OneHot(3, mask=torch.tensor([True, False, False]))
    b = OneHot(3, mask=torch.tensor([False, False, True]))
    dense = torch.stack([a, a.clone()], 0)
    assert type(dense) is OneHot and dense.mask.shape == (2, 3)
    lazy = torch.stack([a, b], 0)
    assert isinstance(lazy, Stacked)
    sample = lazy.rand((10,))
    assert (sample[:, 0, 0]).all() and (sample[:, 1, 2]).all()
    lazy.update_mask(torch.tensor([[False, True, False], [True, False, False]]))
    sample = lazy.rand()
    assert sample[0, 1] and sample[1, 0]
    lazy.update_mask(None)
    assert all(m.mask is None for m in lazy.members)


def test_conversions_carry_the_mask():
    mask = torch.tensor([True, False, True])
    assert torch.equal(Categorical(3, mask=mask).to_one_hot_spec().mask, mask)
    assert torch.equal(OneHot(3, mask=mask).to_categorical_spec().mask, mask)
    block_mask = torch.tensor([True, False, False, True, True])
    multi = MultiCategorical([2, 3], mask=block_mask)
    assert torch.equal(multi.to_one_hot_spec().mask, block_mask)
    assert torch.equal(multi.to_one_hot_spec().to_categorical_spec().mask, block_mask)


def test_index_picks_entries():
    values = torch.arange(12.0).reshape(3, 4)
    assert Categorical(4, shape=(3,)).index(torch.tensor([0, 3, 1]), values).tolist() == [
        [0.0],
        [7.0],
        [9.0],
    ]
    one_hot = OneHot(4, shape=(3, 4))
    labels = torch.tensor([2, 0, 1])
    assert torch.equal(
        one_hot.index(one_hot.encode(labels), values), values.gather(-1, labels.unsqueeze(-1))
    )
    multi = MultiOneHot([2, 2])
    assert multi.index(multi.encode([1, 0]), torch.tensor([5, 6, 7, 8])).tolist() == [6, 7]
    multi_cat = MultiCategorical([2, 2], shape=(3, 2))
    picks = multi_cat.index(torch.tensor([[0, 1]] * 3), values)
    assert picks.tolist() == [[0.0, 3.0], [4.0, 7.0], [8.0, 11.0]]


def test_masked_rand_with_leading_shape_and_no_mask_cost():
    spec = Categorical(4, shape=(2,))
    assert spec.mask is None and "mask=" not in repr(spec)
    spec.update_mask(torch.tensor([[True, False, False, False], [False, False, False, True]]))
    sample = spec.rand((5, 3))
    assert sample.shape == (5, 3, 2)
    assert (sample[..., 0] == 0).all() and (sample[..., 1] == 3).all()
    assert "mask=Tensor(shape=torch.Size([2, 4])" in repr(spec)


@CUDA
def test_masks_move_with_the_spec_to_cuda(masked):
    spec, _ = masked
    moved = spec.cuda()
    assert moved.mask.device.type == "cuda"
    sample = moved.rand((50,))
    assert sample.device.type == "cuda" and moved.is_in(sample)
    assert moved.project(sample) is sample
    assert moved.cpu() == spec
    assert moved.expand(2, *spec.shape)[1].mask.device.type == "cuda"
    cuda_spec = spec.clone()
    cuda_spec.device = torch.device("cuda", 0)
    cuda_spec.update_mask(spec.mask)  # a CPU mask follows the spec to its device
    assert cuda_spec.mask.device.type == "cuda"


@pytest.mark.parametrize("shape", [(), (3,), (2, 3)])
@pytest.mark.parametrize("rand_shape", [(), (4,), (2, 2)])
@pytest.mark.parametrize("spectype", ["one_hot", "categorical", "mult_one_hot", "mult_discrete"])
class TestSpecMasking:
    """torchrl 0.4's masking tests: equality, membership and projection under flipped masks."""

    @staticmethod
    def _make_mask(shape):
        torch.manual_seed(0)
        mask = torch.zeros(shape, dtype=torch.bool).bernoulli_()
        view = mask.view(-1, shape[-1])
        for row in view:
            while not row.any() or row.all():
                row.copy_(torch.zeros_like(row).bernoulli_())
        return mask

    def _spec(self, spectype, shape, n=5):
        shape = torch.Size(shape)
        if spectype == "one_hot":
            return OneHot(n, (*shape, n), "cpu", mask=self._make_mask((*shape, n)))
        if spectype == "categorical":
            return Categorical(n, shape, "cpu", mask=self._make_mask((*shape, n)))
        masks = [self._make_mask((*shape, k)) for k in (n, n, 2)]
        if spectype == "mult_one_hot":
            return MultiOneHot([n, n, 2], (*shape, 2 * n + 2), "cpu", mask=torch.cat(masks, -1))
        return MultiCategorical([n, n, 2], (*shape, 3), "cpu", mask=torch.cat(masks, -1))

    def test_equal(self, shape, spectype, rand_shape):
        spec = self._spec(spectype, shape)
        spec_clone = spec.clone()
        assert spec == spec_clone
        assert spec.unsqueeze(0).squeeze(0) == spec
        spec.update_mask(~spec.mask)
        assert (spec.mask != spec_clone.mask).any()
        assert spec != spec_clone

    def test_is_in(self, shape, spectype, rand_shape):
        spec = self._spec(spectype, shape)
        s = spec.rand(rand_shape)
        assert spec.is_in(s)
        spec.update_mask(~spec.mask)
        assert not spec.is_in(s)

    def test_project(self, shape, spectype, rand_shape):
        spec = self._spec(spectype, shape)
        s = spec.rand(rand_shape)
        assert (spec.project(s) == s).all()
        spec.update_mask(~spec.mask)
        sp = spec.project(s)
        assert sp.shape == s.shape
        assert spec.is_in(sp)
        if spectype == "one_hot":
            assert (sp != s).any(-1).all() and sp.any(-1).all()
        elif spectype == "mult_one_hot":
            assert (sp != s).any(-1).all() and (sp.sum(-1) == 3).all()
        else:
            assert (sp != s).all()

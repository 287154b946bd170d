"""``OneHot`` and ``MultiOneHot``."""

from __future__ import annotations

import re

import pytest
import torch

from rlspecs import (
    BoxList,
    Categorical,
    CategoricalBox,
    MultiCategorical,
    MultiOneHot,
    MultiOneHotDiscreteTensorSpec,
    OneHot,
    OneHotDiscreteTensorSpec,
)
from rlspecs._one_hot import BAD_N, ONE_HOT_SHAPE


def test_defaults():
    spec = OneHotDiscreteTensorSpec(3)
    assert spec.shape == (3,) and spec.dtype == torch.bool and spec.n == 3
    assert spec.space == CategoricalBox(3)


def test_samples_have_exactly_one_hot_entry():
    sample = OneHot(5, shape=(10, 5)).rand()
    assert (sample.sum(-1) == 1).all()


@pytest.mark.parametrize("dtype", [torch.bool, torch.int64, torch.float32])
def test_samples_cover_every_category_with_the_spec_dtype(dtype):
    sample = OneHot(4, shape=(2, 500, 4), dtype=dtype).rand((3,))
    assert sample.shape == (3, 2, 500, 4) and sample.dtype == dtype
    assert (sample.sum(-1) == 1).all()
    counts = sample.reshape(-1, 4).sum(0)
    assert (counts > 600).all(), counts  # 750 expected per category
    multi = MultiOneHot([2, 3], dtype=dtype).rand((1000,))
    assert multi.dtype == dtype and multi[:, :2].sum(0).min() > 400
    assert (multi[:, :2].sum(-1) == 1).all() and (multi[:, 2:].sum(-1) == 1).all()


def test_is_in_rejects_zero_or_two_hot():
    spec = OneHot(3)
    assert not spec.is_in(torch.tensor([False, False, False]))
    assert not spec.is_in(torch.tensor([True, True, False]))
    assert not OneHot(3, dtype=torch.int64).is_in(torch.tensor([2, 0, 0]))


def test_shape_must_end_with_n():
    message = ONE_HOT_SHAPE.format(cls="OneHot", n=3, shape=torch.Size([2, 4]))
    with pytest.raises(ValueError, match=re.escape(message)):
        OneHot(3, shape=(2, 4))
    with pytest.raises(ValueError, match=re.escape(BAD_N.format(cls="OneHot", n=0))):
        OneHot(0)


def test_project_takes_argmax():
    assert OneHot(3).project(torch.tensor([0.1, 0.8, 0.3])).tolist() == [False, True, False]


def test_encode_accepts_labels():
    assert OneHot(3).encode(2).tolist() == [False, False, True]
    assert OneHot(3, shape=(2, 3)).encode([0, 1]).tolist() == [
        [True, False, False],
        [False, True, False],
    ]


def test_to_categorical_and_spec():
    spec = OneHot(4, shape=(2, 4))
    sample = spec.rand()
    labels = spec.to_categorical(sample)
    assert labels.shape == (2,)
    assert spec.to_categorical_spec() == Categorical(4, shape=(2,))
    assert torch.equal(spec.to_categorical_spec().to_one_hot(labels), sample)


def test_indexing_never_touches_the_one_hot_dim():
    spec = OneHot(4, shape=(3, 4))
    assert spec[0].shape == (4,)
    with pytest.raises(IndexError):
        spec[0, 1]


def test_multi_one_hot_defaults_and_space():
    spec = MultiOneHotDiscreteTensorSpec([2, 3])
    assert spec.shape == (5,) and spec.nvec == [2, 3] and spec.dtype == torch.bool
    assert spec.space == BoxList((CategoricalBox(2), CategoricalBox(3)))


def test_multi_one_hot_is_in_checks_each_block():
    spec = MultiOneHot([2, 3])
    assert spec.is_in(torch.tensor([1, 0, 0, 0, 1]).bool())
    assert not spec.is_in(torch.tensor([1, 1, 0, 0, 1]).bool())
    assert not spec.is_in(torch.tensor([1, 0, 0, 0, 0]).bool())


def test_multi_one_hot_project_and_to_categorical():
    spec = MultiOneHot([2, 3], shape=(4, 5))
    projected = spec.project(torch.randn(4, 5))
    assert spec.is_in(projected)
    labels = spec.to_categorical(projected)
    assert labels.shape == (4, 2)
    assert spec.to_categorical_spec() == MultiCategorical([2, 3], shape=(4, 2))


def test_multi_one_hot_shape_must_end_with_sum():
    message = ONE_HOT_SHAPE.format(cls="MultiOneHot", n=5, shape=torch.Size([4]))
    with pytest.raises(ValueError, match=re.escape(message)):
        MultiOneHot([2, 3], shape=(4,))


def test_multi_one_hot_clone_copies_nvec():
    spec = MultiOneHot([2, 3])
    copy = spec.clone()
    copy.nvec.append(4)
    assert spec.nvec == [2, 3]

"""``Categorical``, ``MultiCategorical`` and ``Binary``."""

from __future__ import annotations

import re

import pytest
import torch

from rlspecs import (
    Binary,
    BinaryDiscreteTensorSpec,
    BoxList,
    Categorical,
    CategoricalBox,
    DiscreteTensorSpec,
    MultiCategorical,
    MultiDiscreteTensorSpec,
    MultiOneHot,
    OneHot,
)
from rlspecs._categorical import BAD_N, BAD_NVEC, BINARY_N_SHAPE, BINARY_NO_SIZE, NVEC_SHAPE


def test_defaults():
    spec = Categorical(4)
    assert spec.shape == () and spec.dtype == torch.int64 and spec.n == 4
    assert spec.space == CategoricalBox(4)


def test_seed_bool_done_spec():
    spec = DiscreteTensorSpec(2, shape=(2, 1), dtype=torch.bool)
    assert spec.zero().shape == (2, 1) and spec.zero().dtype == torch.bool
    assert spec.is_in(spec.rand())
    assert spec.is_in(torch.ones(2, 1, dtype=torch.bool))


@pytest.mark.parametrize("n", [0, -2])
def test_fewer_than_one_category_raises(n):
    with pytest.raises(ValueError, match=re.escape(BAD_N.format(cls="Categorical", n=n))):
        Categorical(n)


def test_is_in_checks_range():
    spec = Categorical(3, shape=(2,))
    assert spec.is_in(torch.tensor([0, 2]))
    assert not spec.is_in(torch.tensor([0, 3]))
    assert not spec.is_in(torch.tensor([-1, 0]))


def test_samples_cover_all_categories():
    assert set(Categorical(3, shape=(500,)).rand().tolist()) == {0, 1, 2}


def test_to_one_hot_and_back():
    spec = Categorical(4, shape=(3,))
    sample = spec.rand()
    one_hot = spec.to_one_hot(sample)
    assert one_hot.shape == (3, 4) and one_hot.dtype == torch.bool
    one_hot_spec = spec.to_one_hot_spec()
    assert one_hot_spec == OneHot(4, shape=(3, 4))
    assert torch.equal(one_hot_spec.to_categorical(one_hot), sample)


def test_project_rounds_and_clamps():
    assert Categorical(3).project(torch.tensor(7)).item() == 2
    assert Categorical(3, shape=(2,)).project(torch.tensor([1.4, -3.0])).tolist() == [1, 0]


def test_multi_categorical_defaults_and_space():
    spec = MultiDiscreteTensorSpec([2, 3])
    assert spec.shape == (2,) and spec.dtype == torch.int64
    assert spec.nvec.tolist() == [2, 3]
    assert spec.space == BoxList((CategoricalBox(2), CategoricalBox(3)))


def test_multi_categorical_is_in_per_entry():
    spec = MultiCategorical([2, 3])
    assert spec.is_in(torch.tensor([1, 2]))
    assert not spec.is_in(torch.tensor([2, 0]))


def test_multi_categorical_bad_nvec_raises():
    with pytest.raises(
        ValueError, match=re.escape(BAD_NVEC.format(cls="MultiCategorical", nvec=[2, 0]))
    ):
        MultiCategorical([2, 0])
    message = NVEC_SHAPE.format(cls="MultiCategorical", nvec=torch.Size([2]), shape=torch.Size([3]))
    with pytest.raises(ValueError, match=re.escape(message)):
        MultiCategorical([2, 3], shape=(3,))


def test_multi_categorical_to_one_hot():
    spec = MultiCategorical([2, 3], shape=(4, 2))
    sample = spec.rand()
    one_hot = spec.to_one_hot(sample)
    assert one_hot.shape == (4, 5)
    target = spec.to_one_hot_spec()
    assert target == MultiOneHot([2, 3], shape=(4, 5))
    assert torch.equal(target.to_categorical(one_hot), sample)


def test_binary_defaults():
    spec = BinaryDiscreteTensorSpec(4)
    assert spec.shape == (4,) and spec.dtype == torch.int8 and spec.n == 2
    assert isinstance(spec, Categorical)
    assert set(spec.rand((100,)).unique().tolist()) == {0, 1}


def test_binary_is_in_and_project():
    spec = Binary(shape=(2,), dtype=torch.float32)
    assert spec.is_in(torch.tensor([0.0, 1.0]))
    assert not spec.is_in(torch.tensor([0.5, 1.0]))
    assert spec.project(torch.tensor([0.7, 0.2])).tolist() == [1.0, 0.0]


def test_binary_bad_sizes_raise():
    with pytest.raises(TypeError, match=re.escape(BINARY_NO_SIZE)):
        Binary()
    with pytest.raises(ValueError, match=re.escape(BINARY_N_SHAPE.format(n=3, shape=(2,)))):
        Binary(3, shape=(2,))

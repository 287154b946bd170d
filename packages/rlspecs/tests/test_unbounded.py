"""``Unbounded``: continuous or discrete by dtype."""

from __future__ import annotations

import torch

from rlspecs import Unbounded, UnboundedContinuousTensorSpec, UnboundedDiscreteTensorSpec


def test_default_shape_and_dtype():
    spec = Unbounded()
    assert spec.shape == (1,)
    assert spec.dtype == torch.get_default_dtype()


def test_domain_follows_dtype():
    assert Unbounded(3).domain == "continuous"
    assert Unbounded(3, dtype=torch.int64).domain == "discrete"


def test_integer_samples_are_integers_of_dtype():
    sample = Unbounded((100,), dtype=torch.int16).rand()
    assert sample.dtype == torch.int16
    assert sample.abs().max() <= 100


def test_bool_samples_take_both_values():
    sample = Unbounded((1000,), dtype=torch.bool).rand()
    assert sample.any() and not sample.all()


def test_space_spans_dtype_range():
    space = Unbounded(2, dtype=torch.int8).space
    assert space.low.tolist() == [-128, -128]
    assert space.high.tolist() == [127, 127]
    assert Unbounded(2, dtype=torch.bool).space.high.all()
    assert Unbounded(2).space.high[0] == torch.finfo(torch.float32).max


def test_seed_constructor_with_device():
    spec = UnboundedContinuousTensorSpec(3, device="cpu")
    assert spec.shape == (3,) and spec.device == torch.device("cpu")
    assert UnboundedDiscreteTensorSpec is Unbounded

"""``Binary.unsqueeze(-1)`` appends a dim of one flag, as current torchrl allows (torchrl 0.4
raised ``ValueError``); the other domain-dim rules of ``Binary`` stay."""

from __future__ import annotations

import pytest
import torch

from rlspecs import Binary


@pytest.mark.parametrize("dim", [-1, 1])
def test_unsqueeze_at_the_end_appends_a_flag_dim(dim):
    spec = Binary(4).unsqueeze(dim)
    assert spec == Binary(1, shape=(4, 1))
    assert spec.space.n == 1
    sample = spec.rand((2,))
    assert sample.shape == (2, 4, 1) and spec.is_in(sample)


def test_unsqueeze_of_a_batched_binary_at_the_end():
    spec = Binary(shape=(3, 4)).unsqueeze(-1)
    assert spec.shape == (3, 4, 1)
    assert spec.squeeze(0) is spec  # a wider dim is kept
    assert spec[1].shape == (4, 1)  # the former flags are now a batch dim


def test_unsqueeze_before_the_flags_still_works():
    assert Binary(4).unsqueeze(0).shape == (1, 4)
    assert Binary(4).unsqueeze(-2).shape == (1, 4)


def test_stacking_equal_binaries_along_the_last_dim():
    stacked = torch.stack([Binary(3), Binary(3)], -1)
    assert stacked == Binary(2, shape=(3, 2))


def test_the_flag_dim_still_cannot_be_squeezed_or_unbound():
    spec = Binary(4).unsqueeze(-1)
    with pytest.raises(ValueError, match="domain dim"):
        spec.squeeze(-1)
    with pytest.raises(ValueError, match="domain dims cannot be unbound"):
        spec.unbind(-1)

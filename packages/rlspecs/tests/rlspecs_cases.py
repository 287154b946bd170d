"""Spec factories shared by the rlspecs tests: every leaf kind, built with leading batch dims."""

from __future__ import annotations

import pytest
import torch

from rlspecs import (
    Binary,
    Bounded,
    Categorical,
    MultiCategorical,
    MultiOneHot,
    OneHot,
    Unbounded,
)

BATCHES = [(), (3,), (3, 2)]

LEAF_FACTORIES = {
    "unbounded_float": lambda b: Unbounded((*b, 4)),
    "unbounded_int": lambda b: Unbounded((*b, 4), dtype=torch.int64),
    "bounded_float": lambda b: Bounded(-1.0, 2.0, (*b, 4)),
    "bounded_int": lambda b: Bounded(0, 5, (*b, 4), dtype=torch.int32),
    "categorical": lambda b: Categorical(4, shape=b),
    "categorical_bool": lambda b: Categorical(2, shape=(*b, 1), dtype=torch.bool),
    "one_hot": lambda b: OneHot(4, shape=(*b, 4)),
    "multi_one_hot": lambda b: MultiOneHot([2, 3], shape=(*b, 5)),
    "multi_categorical": lambda b: MultiCategorical([2, 3], shape=(*b, 2)),
    "binary": lambda b: Binary(shape=(*b, 3)),
}

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def chisquare_pvalue(counts) -> float:
    """P-value of Pearson's chi-square test that ``counts`` come from a uniform distribution.

    ``Q(k / 2, x / 2)`` (torch's regularized upper incomplete gamma) for ``k = len - 1`` degrees
    of freedom, so the tests need no scipy.
    """
    observed = torch.as_tensor(list(counts), dtype=torch.float64)
    expected = observed.sum() / observed.numel()
    statistic = ((observed - expected) ** 2 / expected).sum()
    dof = torch.tensor((observed.numel() - 1) / 2, dtype=torch.float64)
    return float(torch.special.gammaincc(dof, statistic / 2))

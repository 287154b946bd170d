"""Seed-era names are the very same class objects as the modern ones."""

from __future__ import annotations

import pytest

import rlspecs

ALIASES = {
    "CompositeSpec": "Composite",
    "UnboundedContinuousTensorSpec": "Unbounded",
    "UnboundedDiscreteTensorSpec": "Unbounded",
    "BoundedTensorSpec": "Bounded",
    "DiscreteTensorSpec": "Categorical",
    "OneHotDiscreteTensorSpec": "OneHot",
    "MultiOneHotDiscreteTensorSpec": "MultiOneHot",
    "MultiDiscreteTensorSpec": "MultiCategorical",
    "BinaryDiscreteTensorSpec": "Binary",
    "LazyStackedTensorSpec": "Stacked",
    "LazyStackedCompositeSpec": "StackedComposite",
    "NonTensorSpec": "NonTensor",
}


@pytest.mark.parametrize("alias, name", sorted(ALIASES.items()))
def test_alias_is_same_class(alias, name):
    assert getattr(rlspecs, alias) is getattr(rlspecs, name)
    assert alias in rlspecs.__all__ and name in rlspecs.__all__


def test_every_exported_name_exists():
    for name in rlspecs.__all__:
        assert hasattr(rlspecs, name), name


def test_isinstance_works_with_either_name():
    spec = rlspecs.DiscreteTensorSpec(3)
    assert isinstance(spec, rlspecs.Categorical)
    assert isinstance(rlspecs.Composite(), rlspecs.CompositeSpec)

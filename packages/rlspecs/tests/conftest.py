"""Fixtures over every leaf kind and the batch dims (), (3,), (3, 2)."""

from __future__ import annotations

import pytest
from rlspecs_cases import BATCHES, LEAF_FACTORIES


@pytest.fixture(params=BATCHES, ids=lambda b: f"batch{b}")
def batch(request):
    return request.param


@pytest.fixture(params=sorted(LEAF_FACTORIES))
def kind(request):
    return request.param


@pytest.fixture
def leaf(kind, batch):
    return LEAF_FACTORIES[kind](batch)

"""``set_spec_api``: rlspecs follows torchrl 0.4 by default and current torchrl on request."""

from __future__ import annotations

import re

import pytest
import torch

from rlspecs import Binary, Bounded, Composite, Unbounded, set_spec_api, spec_api
from rlspecs._api import BAD_API
from rlspecs._categorical import BINARY_EMPTY_SHAPE


def test_the_default_is_torchrl_04():
    assert spec_api() == "0.4"


def test_a_with_block_switches_back_on_exit():
    with set_spec_api("current"):
        assert spec_api() == "current"
        with set_spec_api("0.4"):
            assert spec_api() == "0.4"
        assert spec_api() == "current"
    assert spec_api() == "0.4"


def test_a_call_switches_for_the_process():
    try:
        set_spec_api("current")
        assert spec_api() == "current"
    finally:
        set_spec_api("0.4")
    assert spec_api() == "0.4"


def test_an_unknown_version_raises_and_changes_nothing():
    with pytest.raises(
        ValueError, match=re.escape(BAD_API.format(version="0.9", versions=("0.4", "current")))
    ):
        set_spec_api("0.9")
    assert spec_api() == "0.4"


def test_binary_with_n_and_an_empty_shape():
    assert Binary(3, shape=()).shape == (3,)  # torchrl 0.4
    with set_spec_api("current"):
        with pytest.raises(ValueError, match=re.escape(BINARY_EMPTY_SHAPE.format(n=3))):
            Binary(3, shape=())


def test_switched_behaviours_follow_the_current_setting():
    spec = Unbounded(1)
    bounded = Bounded(0.0, 1.0, (2,))
    with set_spec_api("current"):
        assert torch.isfinite(spec.space.low).all()
        assert repr(Composite()).endswith("data_cls=None)")
        with pytest.raises(RuntimeError):
            bounded.is_in(torch.zeros(3))
    assert torch.isinf(spec.space.low).all()
    assert repr(Composite()).endswith("shape=torch.Size([]))")
    with pytest.warns(UserWarning):
        assert not bounded.is_in(torch.zeros(3))

"""CatFrames' refused padding and TensorDictPrimer's random/default_value pairs, as in torchrl
0.4."""

from __future__ import annotations

import re

import pytest
import torch
from _transform_envs import CountEnv
from tensordict import TensorDict

from rlspecs import Bounded, Unbounded
from rltransforms import CatFrames, TensorDictPrimer, TransformedEnv
from rltransforms._frames import ZEROS_PADDING_ERROR
from rltransforms._primers import RANDOM_AND_DEFAULT_ERROR

pytestmark = pytest.mark.filterwarnings("error")


# --------------------------------------------------------------------------------- CatFrames
def test_catframes_zeros_padding_raises_as_in_torchrl_04():
    # torchrl 0.4.0 (and current torchrl) raise RuntimeError: no warning-and-accept path
    with pytest.raises(RuntimeError, match="Padding option 'zeros' will is deprecated"):
        CatFrames(N=2, dim=-1, in_keys=["obs"], padding="zeros")
    with pytest.raises(RuntimeError, match=re.escape(ZEROS_PADDING_ERROR)):
        CatFrames(N=2, dim=-1, in_keys=["obs"], padding="zeros")


def test_catframes_constant_padding_with_zero_replaces_zeros_padding():
    t = CatFrames(N=3, dim=-1, in_keys=["obs"], padding="constant", padding_value=0)
    out = t._call(TensorDict(obs=torch.ones(1)))
    assert out["obs"].tolist() == [0.0, 0.0, 1.0]


# -------------------------------------------------------------------------- TensorDictPrimer
@pytest.mark.parametrize("default_value", [0, 0.0, {}, False, None])
def test_primer_random_takes_a_default_value_that_tests_false(default_value):
    torch.manual_seed(0)
    spec = Bounded(1.0, 2.0, (100,))
    t = TensorDictPrimer(mykey=spec, random=True, default_value=default_value)
    value = t(TensorDict())["mykey"]
    assert spec.is_in(value) and value.unique().numel() > 1  # drawn, not filled
    env = TransformedEnv(CountEnv(), TensorDictPrimer(mykey=spec, random=True, default_value=0))
    assert spec.is_in(env.reset()["mykey"])


@pytest.mark.parametrize("default_value", [0, {}, False])
def test_primer_default_value_that_tests_false_fills_zeros(default_value):
    t = TensorDictPrimer(mykey=Unbounded(3), default_value=default_value)
    assert t(TensorDict())["mykey"].tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("default_value", [1.0, -2, lambda: torch.ones(3), {"mykey": 1.0}])
def test_primer_random_with_a_default_value_raises(default_value):
    with pytest.raises(ValueError, match=re.escape(RANDOM_AND_DEFAULT_ERROR)):
        TensorDictPrimer(mykey=Unbounded(3), random=True, default_value=default_value)


def test_primer_not_random_with_a_default_value_fills_it():
    t = TensorDictPrimer(mykey=Unbounded(3), random=False, default_value=2.0)
    assert t(TensorDict())["mykey"].tolist() == [2.0, 2.0, 2.0]

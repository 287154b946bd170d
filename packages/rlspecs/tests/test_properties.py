"""Properties that hold for every leaf kind and batch: rand ∈ spec, project(x) ∈ spec, encode round trip."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from rlspecs_cases import BATCHES, LEAF_FACTORIES

from rlspecs import Composite

kinds = st.sampled_from(sorted(LEAF_FACTORIES))
batches = st.sampled_from(BATCHES)
seeds = st.integers(0, 2**31 - 1)
SETTINGS = settings(max_examples=60, deadline=None)


@pytest.fixture(scope="module", autouse=True)
def _torch_generator_restored():
    """The examples seed torch's global generator with seeds Hypothesis draws at random, a new
    set each run: restored after the module, the later tests' unseeded draws stay the same
    from run to run (a failure there can be reproduced)."""
    with torch.random.fork_rng(devices=[]):
        yield


@SETTINGS
@given(kind=kinds, batch=batches, seed=seeds)
def test_rand_is_in_spec(kind, batch, seed):
    torch.manual_seed(seed)
    spec = LEAF_FACTORIES[kind](batch)
    assert spec.is_in(spec.rand())


@SETTINGS
@given(kind=kinds, batch=batches, data=st.data())
def test_project_of_any_value_is_in_spec(kind, batch, data):
    spec = LEAF_FACTORIES[kind](batch)
    values = data.draw(
        st.lists(
            st.floats(-1e4, 1e4, allow_nan=False, width=32),
            min_size=spec.numel(),
            max_size=spec.numel(),
        )
    )
    value = torch.tensor(values, dtype=torch.float32).reshape(spec.shape)
    assert spec.is_in(spec.project(value))


@SETTINGS
@given(kind=kinds, batch=batches, seed=seeds)
def test_encode_of_numpy_sample_equals_sample(kind, batch, seed):
    torch.manual_seed(seed)
    spec = LEAF_FACTORIES[kind](batch)
    sample = spec.rand()
    assert torch.equal(spec.encode(np.asarray(sample.numpy())), sample)


@SETTINGS
@given(kind=kinds, batch=batches, lead=st.lists(st.integers(1, 3), max_size=2))
def test_expand_then_rand_is_in_spec(kind, batch, lead):
    spec = LEAF_FACTORIES[kind](batch)
    expanded = spec.expand(*lead, *spec.shape)
    assert expanded.shape == (*lead, *spec.shape)
    assert expanded.is_in(expanded.rand())


@st.composite
def composites(draw):
    """A random nested Composite of leaves of every kind, with one of the batch shapes."""
    batch = draw(batches)
    paths = draw(
        st.lists(st.lists(st.sampled_from("abc"), min_size=1, max_size=3), min_size=1, max_size=6)
    )
    spec = Composite(shape=batch)
    for path in map(tuple, paths):
        if path in spec.keys(True):
            continue
        try:
            spec[path] = LEAF_FACTORIES[draw(kinds)](batch)
        except KeyError:  # a prefix of the path is already a leaf
            continue
    return spec


@SETTINGS
@given(spec=composites(), seed=seeds, lead=st.lists(st.integers(1, 2), max_size=2))
def test_composite_samples_clones_and_expansions_agree(spec, seed, lead):
    torch.manual_seed(seed)
    td = spec.rand(lead)
    assert td.batch_size == (*lead, *spec.shape)
    assert spec.is_in(td)
    assert spec.clone() == spec
    assert pickle.loads(pickle.dumps(spec)) == spec
    expanded = spec.expand(*lead, *spec.shape)
    assert expanded.is_in(td)
    assert set(expanded.keys(True, True)) == set(spec.keys(True, True))

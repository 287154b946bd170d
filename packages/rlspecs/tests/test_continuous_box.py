"""``ContinuousBox``: assignable ``low``/``high`` with torchrl 0.4's ``minimum``/``maximum``
aliases; the box a ``Bounded`` reports is that spec's bounds (edits reach the spec)."""

from __future__ import annotations

import copy
import pickle

import torch

from rlspecs import Bounded, ContinuousBox


def test_minimum_and_maximum_read_low_and_high():
    box = ContinuousBox(torch.zeros(2), torch.ones(2))
    assert box.minimum is box.low and box.maximum is box.high


def test_minimum_and_maximum_are_assignable():
    box = ContinuousBox(torch.zeros(2), torch.ones(2))
    box.minimum = torch.full((2,), -1.0)
    box.maximum = torch.full((2,), 3.0)
    assert box.low.tolist() == [-1.0, -1.0] and box.high.tolist() == [3.0, 3.0]
    box.low = torch.zeros(2)
    assert box.minimum.tolist() == [0.0, 0.0]


def test_a_bounded_specs_box_writes_through_to_the_spec():
    spec = Bounded(0.0, 1.0, (2,))
    spec.space.maximum = torch.full((2,), 4.0)
    assert spec.high.tolist() == [4.0, 4.0] and spec.maximum.tolist() == [4.0, 4.0]
    spec.space.low += 1  # in place, then assigned: the spec forgets its cached sampling range
    assert spec.low.tolist() == [1.0, 1.0]
    samples = spec.rand((1000,))
    assert bool((samples >= 1.0).all() and (samples <= 4.0).all()) and float(samples.max()) > 1.0


def test_a_box_reads_the_spec_bounds_live():
    spec = Bounded(0.0, 1.0, (2,))
    box = spec.space
    spec.high = torch.full((2,), 2.0)
    assert box.high.tolist() == [2.0, 2.0]


def test_copies_of_a_box_are_detached_from_the_spec():
    spec = Bounded(0.0, 1.0, (2,))
    for copied in (spec.space.clone(), spec.space.to(torch.float64)):
        copied.low = torch.full((2,), -5.0)
        assert spec.low.tolist() == [0.0, 0.0]
    assert spec.space.clone() == spec.space


def test_box_iterates_as_low_then_high_and_pickles():
    box = ContinuousBox(torch.zeros(2), torch.ones(2))
    low, high = box
    assert low is box.low and high is box.high
    assert pickle.loads(pickle.dumps(box)) == box == copy.deepcopy(box)

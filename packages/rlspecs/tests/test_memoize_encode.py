"""``memoize_encode`` (current torchrl): ``encode`` replays the conversion steps of the first
value; ``erase_memoize_cache`` forgets them; composites and lazy stacks pass the mode on."""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pytest
import torch

from rlspecs import Bounded, Composite, OneHot, Unbounded
from rlspecs._memo import MEMO_KEY, MEMO_SHAPE, MEMO_WARNING


def memoized(spec):
    with pytest.warns(UserWarning, match=re.escape(MEMO_WARNING)):
        spec.memoize_encode()
    return spec


def test_memoize_encode_warns_that_it_is_experimental():
    with pytest.warns(UserWarning, match=re.escape(MEMO_WARNING)):
        Unbounded(3).memoize_encode()


def test_memoized_encode_gives_what_eager_encode_gives():
    eager, memo = Bounded(0.0, 1.0, (2, 2)), memoized(Bounded(0.0, 1.0, (2, 2)))
    for value in (np.full(4, 0.5), np.full(4, 0.25)):
        assert torch.equal(memo.encode(value), eager.encode(value))


def test_memoized_encode_replays_the_first_values_steps():
    spec = memoized(Unbounded(3))
    spec.encode(np.zeros((1, 3)))  # needs a reshape: the plan keeps it
    plan = spec.__dict__[MEMO_KEY][False]
    assert spec.encode(np.ones((3, 1))).shape == (3,)
    assert spec.__dict__[MEMO_KEY][False] is plan
    spec.encode(np.zeros(3), ignore_device=True)
    assert set(spec.__dict__[MEMO_KEY]) == {False, True}  # one plan per ignore_device


def test_memoized_encode_of_a_value_that_cannot_fit_raises():
    spec = memoized(Unbounded(3))
    spec.encode(np.zeros((1, 3)))
    message = MEMO_SHAPE.format(got=torch.Size([4]), expected=torch.Size([3]), cls="Unbounded")
    with pytest.raises(RuntimeError, match=re.escape(message)):
        spec.encode(np.zeros(4))


def test_erase_memoize_cache_forgets_the_plans():
    spec = memoized(Unbounded(3))
    spec.encode(np.zeros(3))
    spec.erase_memoize_cache()
    assert spec.__dict__[MEMO_KEY] == {}
    assert spec.encode(np.zeros(3)).shape == (3,)


def test_memoize_encode_false_goes_back_to_eager():
    spec = memoized(Unbounded(3))
    with pytest.warns(UserWarning):
        spec.memoize_encode(False)
    assert MEMO_KEY not in spec.__dict__
    assert spec.encode(np.zeros(3)).shape == (3,)


def test_specs_with_their_own_conversion_stay_correct_when_memoized():
    spec = memoized(OneHot(3))
    assert spec.encode(2).tolist() == [False, False, True]
    assert spec.encode(0).tolist() == [True, False, False]


def test_composites_and_lazy_stacks_memoize_their_entries():
    spec = Composite(a=Unbounded(3), b=None, c=Composite(d=Bounded(0.0, 1.0, (1,))))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        spec.memoize_encode()
    assert MEMO_KEY in spec["a"].__dict__ and MEMO_KEY in spec["c", "d"].__dict__
    td = spec.encode({"a": np.zeros(3), "c": {"d": [0.5]}})
    assert td["a"].shape == (3,) and td["c", "d"].shape == (1,)
    spec.erase_memoize_cache()
    assert spec["a"].__dict__[MEMO_KEY] == {}
    lazy = torch.stack([Unbounded(3), Unbounded(2)], 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        lazy.memoize_encode()
    assert all(MEMO_KEY in m.__dict__ for m in lazy.members)


def test_copies_encode_eagerly_and_pickles_forget_the_plans():
    spec = memoized(Unbounded(3))
    spec.encode(np.zeros(3))
    assert MEMO_KEY not in spec.clone().__dict__ and MEMO_KEY not in spec[None].__dict__
    restored = pickle.loads(pickle.dumps(spec))
    assert restored.__dict__[MEMO_KEY] == {}

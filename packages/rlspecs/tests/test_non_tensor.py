"""``NonTensor``: entries holding Python objects."""

from __future__ import annotations

import torch
from tensordict import NonTensorData

from rlspecs import Composite, NonTensor, NonTensorSpec


def test_samples_hold_example_data():
    spec = NonTensorSpec(example_data="hi")
    sample = spec.rand()
    assert isinstance(sample, NonTensorData) and sample.data == "hi"
    assert spec.zero((2,)).batch_size == (2,)
    assert spec.one().data == "hi"


def test_is_in_accepts_non_tensors_only():
    spec = NonTensor()
    assert spec.is_in("anything") and spec.is_in(spec.rand())
    assert not spec.is_in(torch.zeros(1))


def test_encode_and_project():
    spec = NonTensor(shape=(2,))
    assert spec.encode("x").batch_size == (2,)
    assert spec.project("x") == "x"


def test_inside_a_composite():
    spec = Composite(text=NonTensor(example_data="a"), shape=())
    assert spec.rand()["text"] == "a"
    assert spec == spec.clone()


def test_clone_deep_copies_example_data():
    spec = NonTensor(example_data={"a": [1]})
    copy = spec.clone()
    copy.example_data["a"].append(2)
    assert spec.example_data == {"a": [1]}

"""``make_composite_from_td``: current torchrl's signature, ``dynamic_shape`` included (issue 30).

rlspecs' leaf specs have no dynamic (``-1``) dims, so ``dynamic_shape=True`` describes what has
no dim to make dynamic and refuses, naming the entry, what would need one.
"""

from __future__ import annotations

import inspect
import re

import pytest
import torch
from tensordict import NonTensorData, TensorDict

from rlspecs import NonTensor, Unbounded, make_composite_from_td
from rlspecs._utils import DYNAMIC_BATCH_DIM, NO_DYNAMIC_DIMS
from rlspecs.errors import SpecShapeError


def test_signature_is_current_torchrls():
    params = inspect.signature(make_composite_from_td).parameters
    assert list(params) == ["data", "unsqueeze_null_shapes", "dynamic_shape"]
    assert params["unsqueeze_null_shapes"].default is True
    assert params["dynamic_shape"].default is False
    assert params["dynamic_shape"].kind is inspect.Parameter.KEYWORD_ONLY


def test_data_may_be_passed_by_name():
    data = TensorDict({"obs": torch.zeros(3)}, [])
    assert make_composite_from_td(data=data)["obs"].shape == torch.Size([3])


def test_dynamic_shape_off_keeps_every_dim():
    data = TensorDict({"obs": torch.zeros(2, 4, 5)}, [2])
    assert make_composite_from_td(data, dynamic_shape=False)["obs"].shape == torch.Size([2, 4, 5])


@pytest.mark.parametrize(("unsqueeze", "shape"), [(True, (1,)), (False, ())])
def test_dynamic_shape_leaves_scalars_as_they_are(unsqueeze, shape):
    data = TensorDict({"reward": torch.tensor(1.5), "nested": {"done": torch.tensor(True)}}, [])
    spec = make_composite_from_td(data, unsqueeze_null_shapes=unsqueeze, dynamic_shape=True)
    assert spec["reward"].shape == torch.Size(shape)
    assert spec["nested", "done"].shape == torch.Size(shape)
    assert spec["nested", "done"].dtype is torch.bool
    assert isinstance(spec["reward"], Unbounded)


def test_dynamic_shape_leaves_non_tensors_as_they_are():
    data = TensorDict({"text": NonTensorData("hi", batch_size=[2])}, [2])
    spec = make_composite_from_td(data, dynamic_shape=True)
    assert isinstance(spec["text"], NonTensor) and spec["text"].shape == torch.Size([2])


def test_dynamic_shape_refuses_a_feature_dim_naming_the_entry():
    data = TensorDict({"obs": torch.zeros(2, 4, 5)}, [2])
    message = NO_DYNAMIC_DIMS.format(key="obs", shape=torch.Size([2, 4, -1]))
    with pytest.raises(NotImplementedError, match=re.escape(message)):
        make_composite_from_td(data, dynamic_shape=True)


def test_dynamic_shape_names_a_nested_entry_by_its_path():
    data = TensorDict({"next": {"obs": torch.zeros(3)}}, [])
    message = NO_DYNAMIC_DIMS.format(key=("next", "obs"), shape=torch.Size([-1]))
    with pytest.raises(NotImplementedError, match=re.escape(message)):
        make_composite_from_td(data, dynamic_shape=True)


def test_dynamic_shape_refuses_an_entry_whose_last_dim_is_a_batch_dim():
    data = TensorDict({"reward": torch.zeros(2)}, [2])
    message = DYNAMIC_BATCH_DIM.format(key="reward", shape=torch.Size([2]), batch=torch.Size([2]))
    with pytest.raises(ValueError, match=re.escape(message)) as info:
        make_composite_from_td(data, dynamic_shape=True)
    assert isinstance(info.value, SpecShapeError)


def test_dynamic_shape_is_passed_to_nested_tensordicts():
    data = TensorDict({"a": torch.tensor(0.0), "nested": {"obs": torch.zeros(2, 3)}}, [])
    assert make_composite_from_td(data)["nested", "obs"].shape == torch.Size([2, 3])
    with pytest.raises(NotImplementedError, match=re.escape("('nested', 'obs')")):
        make_composite_from_td(data, dynamic_shape=True)


def test_batched_non_tensor_example_is_the_first_elements_data():
    data = TensorDict({"text": NonTensorData("hi", batch_size=[3])}, [3])
    spec = make_composite_from_td(data)
    assert spec["text"].example_data == "hi"
    assert spec.zero()["text"] == "hi"


def test_stacked_non_tensor_example_is_the_first_elements_data():
    stack = torch.stack([NonTensorData("a"), NonTensorData("b")])
    spec = make_composite_from_td(TensorDict({"text": stack}, [2]))
    assert spec["text"].example_data == "a" and spec["text"].shape == torch.Size([2])

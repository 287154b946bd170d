"""MLP: layer layout, lazy input size, input concatenation and configuration errors."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from rlmodules import MLP

pytestmark = pytest.mark.filterwarnings("error")


def _linears(mlp):
    return [layer for layer in mlp if isinstance(layer, nn.Linear)]


def test_empty_num_cells_gives_a_single_layer():
    mlp = MLP(in_features=3, out_features=2, num_cells=[])
    assert len(mlp) == 1
    assert mlp(torch.zeros(4, 3)).shape == (4, 2)


def test_missing_in_features_builds_a_lazy_first_layer():
    mlp = MLP(out_features=1, num_cells=[])
    assert isinstance(mlp[0], nn.LazyLinear)
    assert mlp(torch.zeros(5, 7)).shape == (5, 1)
    assert mlp[0].in_features == 7


def test_num_cells_list_sets_hidden_sizes_and_activations():
    mlp = MLP(in_features=3, out_features=2, num_cells=[8, 5], activation_class=nn.ReLU)
    assert [(layer.in_features, layer.out_features) for layer in _linears(mlp)] == [
        (3, 8),
        (8, 5),
        (5, 2),
    ]
    assert sum(isinstance(layer, nn.ReLU) for layer in mlp) == 2
    assert not isinstance(mlp[-1], nn.ReLU)


def test_int_num_cells_is_repeated_depth_times():
    mlp = MLP(in_features=3, out_features=2, depth=3, num_cells=4)
    assert [layer.out_features for layer in _linears(mlp)] == [4, 4, 4, 2]


def test_depth_alone_uses_32_cells():
    mlp = MLP(in_features=3, out_features=2, depth=2)
    assert [layer.out_features for layer in _linears(mlp)] == [32, 32, 2]


def test_several_inputs_are_concatenated_on_last_dim():
    mlp = MLP(in_features=5, out_features=1, num_cells=[])
    a, b = torch.randn(4, 3), torch.randn(4, 2)
    torch.testing.assert_close(mlp(a, b), mlp(torch.cat([a, b], -1)))


def test_shape_out_features_reshapes_output():
    mlp = MLP(in_features=3, out_features=(2, 4), num_cells=[6])
    assert mlp(torch.zeros(5, 3)).shape == (5, 2, 4)


def test_activate_last_layer_and_no_last_bias():
    mlp = MLP(
        in_features=3, out_features=2, num_cells=[], activate_last_layer=True, bias_last_layer=False
    )
    assert isinstance(mlp[-1], nn.Tanh)
    assert mlp[0].bias is None


def test_norm_and_dropout_follow_hidden_activations():
    mlp = MLP(
        in_features=3,
        out_features=2,
        num_cells=[4],
        norm_class=nn.LayerNorm,
        norm_kwargs={"normalized_shape": 4},
        dropout=0.5,
    )
    assert [type(layer) for layer in mlp] == [
        nn.Linear,
        nn.Tanh,
        nn.LayerNorm,
        nn.Dropout,
        nn.Linear,
    ]


def test_missing_out_features_raises():
    with pytest.raises(ValueError, match=re.escape("MLP needs out_features")):
        MLP(in_features=3, num_cells=[])


def test_int_num_cells_without_depth_raises():
    with pytest.raises(RuntimeError, match=re.escape("MLP got num_cells=8 (an int) without depth")):
        MLP(in_features=3, out_features=2, num_cells=8)


def test_depth_conflicting_with_num_cells_raises():
    with pytest.raises(RuntimeError, match=re.escape("MLP got depth=3 but 2 num_cells [4, 4]")):
        MLP(in_features=3, out_features=2, depth=3, num_cells=[4, 4])


def test_lazy_input_needs_a_layer_with_a_lazy_version():
    with pytest.raises(KeyError, match=re.escape("MLP has no lazy version of Bilinear")):
        MLP(out_features=2, num_cells=[], layer_class=nn.Bilinear)

"""MLP: a multi-layer perceptron with a lazy input size."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

_NO_OUT_FEATURES = "MLP needs out_features (an int or a shape), got None."
_INT_CELLS_NEED_DEPTH = (
    "MLP got num_cells={num_cells} (an int) without depth; pass depth=... or a list of cells."
)
_DEPTH_CONFLICT = (
    "MLP got depth={depth} but {n} num_cells {num_cells}; make them agree or pass an int num_cells."
)
_NO_LAZY_LAYER = "MLP has no lazy version of {layer}; pass in_features=... to build it eagerly."
_LAZY_LAYERS: dict[type, type] = {nn.Linear: nn.LazyLinear}
_DEFAULT_CELLS = 32


class MLP(nn.Sequential):
    """A stack of ``layer_class`` layers separated by activations.

    Several inputs are concatenated along the last dimension, so an MLP can read
    ``["hidden", "action"]`` inside a ``ValueOperator``.

    Args:
        in_features: input size; ``None`` builds a lazy first layer.
        out_features: output size, an int or a shape (the output is reshaped to it).
        depth: number of hidden layers.
        num_cells: sizes of the hidden layers (``[]`` gives a single layer), or an
            int repeated ``depth`` times. ``None``: 32 cells per hidden layer if
            ``depth`` is given, else a single layer.
        activation_class: activation after each hidden layer.
        activation_kwargs: keyword arguments for the activations.
        norm_class: optional normalisation layer after each activation.
        norm_kwargs: keyword arguments for the normalisation layers.
        dropout: optional dropout probability after each hidden layer.
        bias_last_layer: whether the output layer has a bias.
        layer_class: the layer type (``nn.Linear`` by default).
        layer_kwargs: keyword arguments for every layer.
        activate_last_layer: apply the activation (and norm) after the last layer too.
        device: device of the parameters.

    Examples:
        >>> from rlmodules import MLP
        >>> import torch
        >>> mlp = MLP(out_features=2, num_cells=[8, 8])
        >>> mlp(torch.zeros(5, 3), torch.zeros(5, 1)).shape
        torch.Size([5, 2])
        >>> len(MLP(in_features=3, out_features=1, num_cells=[]))
        1
    """

    def __init__(
        self,
        in_features: int | None = None,
        out_features: int | Sequence[int] | None = None,
        depth: int | None = None,
        num_cells: Sequence[int] | int | None = None,
        activation_class: Callable[..., nn.Module] = nn.Tanh,
        activation_kwargs: dict[str, Any] | None = None,
        norm_class: Callable[..., nn.Module] | None = None,
        norm_kwargs: dict[str, Any] | None = None,
        dropout: float | None = None,
        bias_last_layer: bool = True,
        layer_class: Callable[..., nn.Module] = nn.Linear,
        layer_kwargs: dict[str, Any] | None = None,
        activate_last_layer: bool = False,
        device: torch.device | str | None = None,
    ) -> None:
        if out_features is None:
            raise ValueError(_NO_OUT_FEATURES)
        if num_cells is None:
            num_cells = [_DEFAULT_CELLS] * depth if depth is not None else []
        elif isinstance(num_cells, int):
            if depth is None:
                raise RuntimeError(_INT_CELLS_NEED_DEPTH.format(num_cells=num_cells))
            num_cells = [num_cells] * depth
        num_cells = list(num_cells)
        if depth is not None and depth != len(num_cells):
            raise RuntimeError(
                _DEPTH_CONFLICT.format(depth=depth, n=len(num_cells), num_cells=num_cells)
            )
        self.in_features = in_features
        self.out_features = out_features
        self.num_cells = num_cells
        self.depth = len(num_cells)
        out_shape = None if isinstance(out_features, int) else torch.Size(out_features)
        n_out = out_features if out_shape is None else math.prod(out_shape)

        layer_kwargs = dict(layer_kwargs or {})
        if device is not None:
            layer_kwargs["device"] = device
        sizes_in = [in_features, *num_cells]
        sizes_out = [*num_cells, n_out]
        layers: list[nn.Module] = []
        for i, (n_in, n_next) in enumerate(zip(sizes_in, sizes_out)):
            last = i == self.depth
            bias = bias_last_layer if last else True
            if n_in is None:
                lazy = _LAZY_LAYERS.get(layer_class)
                if lazy is None:
                    raise KeyError(
                        _NO_LAZY_LAYER.format(layer=getattr(layer_class, "__name__", layer_class))
                    )
                layers.append(lazy(n_next, bias=bias, **layer_kwargs))
            else:
                layers.append(layer_class(n_in, n_next, bias=bias, **layer_kwargs))
            if not last or activate_last_layer:
                layers.append(activation_class(**(activation_kwargs or {})))
                if norm_class is not None:
                    layers.append(norm_class(**(norm_kwargs or {})))
                if dropout is not None and not last:
                    layers.append(nn.Dropout(dropout))
        super().__init__(*layers)
        self._out_shape = out_shape

    def forward(self, *inputs: torch.Tensor) -> torch.Tensor:
        """Concatenates the inputs on the last dim and runs the layers."""
        x = inputs[0] if len(inputs) == 1 else torch.cat(inputs, dim=-1)
        out = super().forward(x)
        if self._out_shape is not None:
            out = out.reshape(*out.shape[:-1], *self._out_shape)
        return out

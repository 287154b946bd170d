"""LSTM and GRU layers computed step by step in Python (``python_based=True``).

They are ``nn.LSTM`` / ``nn.GRU`` with the same parameters and results, but their forward is
plain tensor code (no cuDNN kernel), so ``torch.vmap`` and ``torch.compile`` can trace it, and
it takes a ``mask`` that freezes the state of rows whose sequence has ended.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

_NO_BIDIRECTIONAL = "python_based=True does not support bidirectional {kind}s."
_NO_PROJ = "python_based=True does not support LSTMs with proj_size > 0."
_NOT_3D = "{kind}: expected a 3D input (batch, time, features), got {ndim}D instead."


class _PythonRNN:
    """Shared time loop; subclasses give the cell and the state layout."""

    num_layers: int
    dropout: float
    training: bool
    batch_first: bool
    bias: bool

    def _weights(self, layer: int) -> tuple[torch.Tensor, ...]:
        get = getattr
        weights = (get(self, f"weight_ih_l{layer}"), get(self, f"weight_hh_l{layer}"))
        if self.bias:
            return (*weights, get(self, f"bias_ih_l{layer}"), get(self, f"bias_hh_l{layer}"))
        return (*weights, None, None)

    def _loop(
        self, x: torch.Tensor, states: list[list[torch.Tensor]], mask: torch.Tensor | None
    ) -> torch.Tensor:
        """Runs every layer at every step; ``states[i][layer]`` is updated in place."""
        weights = [self._weights(layer) for layer in range(self.num_layers)]
        outputs = []
        for t in range(x.shape[1]):
            layer_in = x[:, t]
            keep = None if mask is None else mask[:, t, None]
            for layer in range(self.num_layers):
                prev = [state[layer] for state in states]
                new = self._cell(layer_in, prev, *weights[layer])
                if keep is not None:
                    new = [torch.where(keep, n, p) for n, p in zip(new, prev)]
                for state, value in zip(states, new):
                    state[layer] = value
                layer_in = new[0]
                if layer < self.num_layers - 1 and self.dropout:
                    layer_in = F.dropout(layer_in, p=self.dropout, training=self.training)
            outputs.append(layer_in)
        return torch.stack(outputs, 1)

    def _check_input(self, kind: str, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 3:
            raise ValueError(_NOT_3D.format(kind=kind, ndim=x.dim()))
        return x if self.batch_first else x.transpose(0, 1)


class PythonLSTM(_PythonRNN, nn.LSTM):
    """``nn.LSTM`` computed in Python, taking an optional ``mask`` of shape (batch, time)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.bidirectional:
            raise ValueError(_NO_BIDIRECTIONAL.format(kind="LSTM"))
        if self.proj_size:
            raise ValueError(_NO_PROJ)

    @staticmethod
    def _cell(x, prev, w_ih, w_hh, b_ih, b_hh) -> list[torch.Tensor]:
        h, c = prev
        gates = F.linear(x, w_ih, b_ih) + F.linear(h, w_hh, b_hh)
        i, f, g, o = gates.chunk(4, -1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        return [o.sigmoid() * c.tanh(), c]

    def forward(self, input, hx=None, mask=None):
        x = self._check_input("LSTM", input)
        if hx is None:
            zeros = x.new_zeros(self.num_layers, x.shape[0], self.hidden_size)
            hx = (zeros, zeros)
        states = [list(hx[0].unbind(0)), list(hx[1].unbind(0))]
        y = self._loop(x, states, mask)
        y = y if self.batch_first else y.transpose(0, 1)
        return y, (torch.stack(states[0]), torch.stack(states[1]))


class PythonGRU(_PythonRNN, nn.GRU):
    """``nn.GRU`` computed in Python, taking an optional ``mask`` of shape (batch, time)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if self.bidirectional:
            raise ValueError(_NO_BIDIRECTIONAL.format(kind="GRU"))

    @staticmethod
    def _cell(x, prev, w_ih, w_hh, b_ih, b_hh) -> list[torch.Tensor]:
        (h,) = prev
        i_r, i_z, i_n = F.linear(x, w_ih, b_ih).chunk(3, -1)
        h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
        r = (i_r + h_r).sigmoid()
        z = (i_z + h_z).sigmoid()
        n = (i_n + r * h_n).tanh()
        return [(1 - z) * n + z * h]

    def forward(self, input, hx=None, mask=None):
        x = self._check_input("GRU", input)
        if hx is None:
            hx = x.new_zeros(self.num_layers, x.shape[0], self.hidden_size)
        states = [list(hx.unbind(0))]
        y = self._loop(x, states, mask)
        y = y if self.batch_first else y.transpose(0, 1)
        return y, torch.stack(states[0])

"""GRUModule: an ``nn.GRU`` reading and writing its state in a tensordict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from tensordict.utils import NestedKey
from torch import nn

from ._python_rnn import PythonGRU
from ._rnn_base import RecurrentModuleBase

__all__ = ["GRUModule"]

_GRU_AND_ARGS = "A GRU instance cannot be passed along with class argument."
_NOT_BATCH_FIRST = "The input gru must have batch_first=True."
_NO_HIDDEN_SIZE = "hidden_size must be passed."
_NOT_A_GRU = "gru must be a torch.nn.GRU, got {type}."


class GRUModule(RecurrentModuleBase):
    """An ``nn.GRU`` that reads its input and state from a tensordict and writes the next one.

    It reads ``in_keys = [value, h, "is_init"]`` and writes ``out_keys = [output, ("next",
    h)]``; the state has shape ``(*batch, num_layers, hidden_size)``. Modes, ``is_init`` and
    primers work as in ``LSTMModule``.

    Args:
        input_size: features of the input (``gru`` excluded).
        hidden_size: features of the state (``gru`` excluded).
        num_layers: stacked layers (1).
        bias: use biases (``True``).
        batch_first: must be ``True`` (torch's argument, kept for its position).
        dropout: dropout between layers (0).
        bidirectional: run both directions (``False``).
        python_based: use the Python implementation of the layer (vmap / compile friendly).
        recurrent_backend: ``"pad"`` (or ``"auto"``): trajectories are padded and packed.

    Keyword Args:
        in_key: the input key; the state is then ``"recurrent_state"``. Exclusive with
            ``in_keys``.
        in_keys: ``[value, h]`` (``"is_init"`` is appended).
        out_key: the output key; the next state goes to ``("next", "recurrent_state")``.
            Exclusive with ``out_keys``.
        out_keys: ``[output, next_h]``.
        device: device of the layer.
        gru: an ``nn.GRU`` (``batch_first=True``) to wrap instead of building one.
        default_recurrent_mode: the mode when ``set_recurrent_mode`` sets none (``False``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlmodules import GRUModule
        >>> gru = GRUModule(3, 5, num_layers=2, in_keys=["obs", "h"], out_keys=["out", ("next", "h")])
        >>> td = TensorDict(obs=torch.randn(2, 3), is_init=torch.ones(2, 1, dtype=torch.bool), batch_size=[2])
        >>> gru(td)["next", "h"].shape
        torch.Size([2, 2, 5])
        >>> gru.set_recurrent_mode(True).recurrent_mode, gru.recurrent_mode
        (True, False)
    """

    DEFAULT_IN_KEYS = ["recurrent_state"]
    DEFAULT_OUT_KEYS = [("next", "recurrent_state")]
    _IN_KEYS_ERROR = (
        "GRUModule expects 2 inputs: a value and a hidden state (and potentially an 'is_init' "
        "marker). Got in_keys {in_keys} instead."
    )
    _OUT_KEYS_ERROR = (
        "GRUModule expects 2 outputs: a value and a hidden state. Got out_keys {out_keys} instead."
    )
    _rnn_attr = "gru"
    _python_class = PythonGRU
    _cudnn_class = nn.GRU

    def __init__(
        self,
        input_size: int | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0,
        bidirectional: bool = False,
        python_based: bool = False,
        recurrent_backend: Literal["pad", "auto"] = "pad",
        *,
        in_key: NestedKey | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        device: torch.device | str | None = None,
        gru: nn.GRU | None = None,
        default_recurrent_mode: bool | None = None,
    ) -> None:
        super().__init__()
        self._check_backend(recurrent_backend)
        if gru is not None:
            if not isinstance(gru, nn.GRU):
                raise TypeError(_NOT_A_GRU.format(type=type(gru).__name__))
            if not gru.batch_first:
                raise ValueError(_NOT_BATCH_FIRST)
            if input_size is not None or hidden_size is not None:
                raise ValueError(_GRU_AND_ARGS)
        else:
            if not batch_first:
                raise ValueError(_NOT_BATCH_FIRST)
            if not hidden_size:
                raise ValueError(_NO_HIDDEN_SIZE)
            gru = (PythonGRU if python_based else nn.GRU)(
                input_size=input_size,
                hidden_size=hidden_size,
                num_layers=num_layers,
                bias=bias,
                dropout=dropout,
                device=device,
                batch_first=True,
                bidirectional=bidirectional,
            )
        self._set_keys(in_key, in_keys, out_key, out_keys)
        self.gru = gru
        self._recurrent_mode = default_recurrent_mode
        self.recurrent_backend = recurrent_backend

    def _state_sizes(self) -> list[int]:
        return [self.gru.hidden_size]

    def _to_hx(self, states: list[torch.Tensor]) -> torch.Tensor:
        return states[0]

    def _from_hx(self, hx: torch.Tensor) -> list[torch.Tensor]:
        return [hx]

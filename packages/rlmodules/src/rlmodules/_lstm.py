"""LSTMModule: an ``nn.LSTM`` reading and writing its states in a tensordict."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import torch
from tensordict.utils import NestedKey
from torch import nn

from ._python_rnn import PythonLSTM
from ._rnn_base import RecurrentModuleBase

__all__ = ["LSTMModule"]

_LSTM_AND_ARGS = "An LSTM instance cannot be passed along with class argument."
_NOT_BATCH_FIRST = "The input lstm must have batch_first=True."
_NO_HIDDEN_SIZE = "hidden_size must be passed."
_NOT_AN_LSTM = "lstm must be a torch.nn.LSTM, got {type}."


class LSTMModule(RecurrentModuleBase):
    """An ``nn.LSTM`` that reads its input and states from a tensordict and writes the next ones.

    It reads ``in_keys = [value, h, c, "is_init"]`` and writes ``out_keys = [output,
    ("next", h), ("next", c)]``; the states have shape ``(*batch, num_layers, hidden_size)``.
    Out of recurrent mode (the default) each element of the tensordict is one step and the
    states are zeroed where ``is_init`` is set (a new trajectory). In recurrent mode
    (``set_recurrent_mode(True)``, or ``default_recurrent_mode=True``) the last batch dim is
    time and whole trajectories are processed at once, cut at ``is_init`` marks: the
    next-state entries then hold each trajectory's final state at its last step and zeros
    elsewhere. Missing states are read as zeros; ``is_init`` is required.

    The env must carry the states from step to step: ``make_tensordict_primer()`` builds the
    ``TensorDictPrimer`` for that (``make_primer_spec()`` gives its specs).

    Args:
        input_size: features of the input (``lstm`` excluded).
        hidden_size: features of the state (``lstm`` excluded).
        num_layers: stacked layers (1).
        bias: use biases (``True``).
        batch_first: must be ``True`` (torch's argument, kept for its position).
        dropout: dropout between layers (0).
        proj_size: ``nn.LSTM``'s projection size (0).
        bidirectional: run both directions (``False``).
        python_based: use the Python implementation of the layer (vmap / compile friendly).
        recurrent_backend: ``"pad"`` (or ``"auto"``): trajectories are padded and packed.

    Keyword Args:
        in_key: the input key; the states are then ``"recurrent_state_h"`` and
            ``"recurrent_state_c"``. Exclusive with ``in_keys``.
        in_keys: ``[value, h, c]`` (``"is_init"`` is appended).
        out_key: the output key; next states go to ``("next", "recurrent_state_h")`` and
            ``("next", "recurrent_state_c")``. Exclusive with ``out_keys``.
        out_keys: ``[output, next_h, next_c]``.
        device: device of the layer.
        lstm: an ``nn.LSTM`` (``batch_first=True``) to wrap instead of building one.
        default_recurrent_mode: the mode when ``set_recurrent_mode`` sets none (``False``).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlmodules import LSTMModule, set_recurrent_mode
        >>> lstm = LSTMModule(input_size=3, hidden_size=8, in_key="obs", out_key="features")
        >>> step = TensorDict(obs=torch.randn(4, 3), is_init=torch.ones(4, 1, dtype=torch.bool), batch_size=[4])
        >>> out = lstm(step)
        >>> out["features"].shape, out["next", "recurrent_state_h"].shape
        (torch.Size([4, 8]), torch.Size([4, 1, 8]))
        >>> trajs = TensorDict(obs=torch.randn(4, 10, 3), is_init=torch.zeros(4, 10, 1, dtype=torch.bool), batch_size=[4, 10])
        >>> with set_recurrent_mode(True):
        ...     lstm(trajs)["features"].shape
        torch.Size([4, 10, 8])
        >>> lstm.make_primer_spec()["recurrent_state_c"].shape
        torch.Size([1, 8])
    """

    DEFAULT_IN_KEYS = ["recurrent_state_h", "recurrent_state_c"]
    DEFAULT_OUT_KEYS = [("next", "recurrent_state_h"), ("next", "recurrent_state_c")]
    _IN_KEYS_ERROR = (
        "LSTMModule expects 3 inputs: a value, and two hidden states (and potentially an "
        "'is_init' marker). Got in_keys {in_keys} instead."
    )
    _OUT_KEYS_ERROR = (
        "LSTMModule expects 3 outputs: a value, and two hidden states. Got out_keys {out_keys} "
        "instead."
    )
    _rnn_attr = "lstm"
    _python_class = PythonLSTM
    _cudnn_class = nn.LSTM

    def __init__(
        self,
        input_size: int | None = None,
        hidden_size: int | None = None,
        num_layers: int = 1,
        bias: bool = True,
        batch_first: bool = True,
        dropout: float = 0,
        proj_size: int = 0,
        bidirectional: bool = False,
        python_based: bool = False,
        recurrent_backend: Literal["pad", "auto"] = "pad",
        *,
        in_key: NestedKey | None = None,
        in_keys: Sequence[NestedKey] | None = None,
        out_key: NestedKey | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        device: torch.device | str | None = None,
        lstm: nn.LSTM | None = None,
        default_recurrent_mode: bool | None = None,
    ) -> None:
        super().__init__()
        self._check_backend(recurrent_backend)
        if lstm is not None:
            if not isinstance(lstm, nn.LSTM):
                raise TypeError(_NOT_AN_LSTM.format(type=type(lstm).__name__))
            if not lstm.batch_first:
                raise ValueError(_NOT_BATCH_FIRST)
            if input_size is not None or hidden_size is not None:
                raise ValueError(_LSTM_AND_ARGS)
        else:
            if not batch_first:
                raise ValueError(_NOT_BATCH_FIRST)
            if not hidden_size:
                raise ValueError(_NO_HIDDEN_SIZE)
            lstm = (PythonLSTM if python_based else nn.LSTM)(
                input_size=input_size,
                hidden_size=hidden_size,
                num_layers=num_layers,
                bias=bias,
                dropout=dropout,
                proj_size=proj_size,
                device=device,
                batch_first=True,
                bidirectional=bidirectional,
            )
        self._set_keys(in_key, in_keys, out_key, out_keys)
        self.lstm = lstm
        self._recurrent_mode = default_recurrent_mode
        self.recurrent_backend = recurrent_backend

    def _state_sizes(self) -> list[int]:
        lstm = self.lstm
        return [lstm.proj_size or lstm.hidden_size, lstm.hidden_size]

    def _to_hx(self, states: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return states[0], states[1]

    def _from_hx(self, hx: tuple[torch.Tensor, torch.Tensor]) -> list[torch.Tensor]:
        return list(hx)

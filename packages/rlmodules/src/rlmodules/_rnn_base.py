"""What LSTMModule and GRUModule share: keys, modes, shapes, trajectory splitting, primers.

A recurrent module reads ``[value, *states, "is_init"]`` and writes ``[output, *next_states]``.
In sequential mode each element of the tensordict is one step: states are zeroed where
``is_init`` is set, the layer runs one step, the new states are written. In recurrent mode
the last batch dim is time: each row is cut into trajectories at ``is_init`` marks, each
trajectory starts from the state stored at its first step, the layer runs over them at once
(padded and packed), and the final state of each trajectory is written at its last step
(zeros at the other steps, as torchrl does).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase, dispatch
from tensordict.utils import NestedKey, unravel_key, unravel_key_list
from torch import nn

from rlspecs import Composite, Unbounded

from ._primers import _from_rltransforms
from ._recurrent_mode import recurrent_mode

_KEY_XOR = (
    "Either {plural} or {single} must be specified but not both or none. "
    "Got {many} and {one} respectively."
)
_MODE_READ_ONLY = (
    "recurrent_mode cannot be changed in-place. Please use the set_recurrent_mode context "
    "manager, module.set_recurrent_mode(mode) (a copy sharing the layer) or "
    "default_recurrent_mode= at construction."
)
_TEMPORAL_MODE = "temporal_mode is deprecated, use recurrent_mode instead."
_PRIMER_KEYS = (
    "make_tensordict_primer is supposed to work with in_keys/out_keys that have compatible "
    "names, ie. the out_keys should be named after ('next', <in_key>). Got in_keys={in_keys} "
    "and out_keys={out_keys} instead."
)
_MISSING_VALUE = (
    "{cls} could not find its input {key!r} in the tensordict; keys present: {present}."
)
_MISSING_IS_INIT = (
    "{cls} needs the {key!r} entry marking the first step of each trajectory (written by "
    "the InitTracker transform) and the tensordict has none; keys present: {present}."
)
_PARTIAL_STATES = (
    "{cls} found the recurrent state(s) {found} but not {missing}; give all of them or none "
    "(zeros are then used)."
)
_STATE_SHAPE = (
    "{cls} expects the recurrent state {key!r} of shape (*batch, {expected}) with batch "
    "{batch}, got {shape}."
)
_VALUE_SHAPE = "{cls} expects {key!r} of shape (*batch, {size}) with batch {batch}, got {shape}."
_NO_TIME_DIM = (
    "{cls}(recurrent_mode=True) requires the input tensordict to have at least one batch "
    "dim (time). Got a 0-d tensordict."
)
_BACKEND = (
    "recurrent_backend must be 'pad' or 'auto' in rlmodules (torchrl's 'scan' and 'triton' "
    "backends are not available); got {backend!r}."
)


class RecurrentModuleBase(TensorDictModuleBase):
    """Base of ``LSTMModule`` and ``GRUModule``; subclasses set the class attributes below."""

    DEFAULT_IN_KEYS: list[NestedKey]
    DEFAULT_OUT_KEYS: list[NestedKey]
    _rnn_attr: str  # name of the attribute holding the layer ("lstm" / "gru")
    _python_class: type[nn.RNNBase]
    _cudnn_class: type[nn.RNNBase]

    def _set_keys(
        self,
        in_key: NestedKey | None,
        in_keys: Sequence[NestedKey] | None,
        out_key: NestedKey | None,
        out_keys: Sequence[NestedKey] | None,
    ) -> None:
        if (in_key is None) == (in_keys is None):
            raise ValueError(
                _KEY_XOR.format(plural="in_keys", single="in_key", many=in_keys, one=in_key)
            )
        if in_key is not None:
            in_keys = [in_key, *self.DEFAULT_IN_KEYS]
        if (out_key is None) == (out_keys is None):
            raise ValueError(
                _KEY_XOR.format(plural="out_keys", single="out_key", many=out_keys, one=out_key)
            )
        if out_key is not None:
            out_keys = [out_key, *self.DEFAULT_OUT_KEYS]
        n = 1 + len(self.DEFAULT_IN_KEYS)
        in_keys = unravel_key_list(list(in_keys))
        out_keys = unravel_key_list(list(out_keys))
        if len(in_keys) != n and not (len(in_keys) == n + 1 and in_keys[-1] == "is_init"):
            raise ValueError(self._IN_KEYS_ERROR.format(in_keys=in_keys))
        if len(out_keys) != n:
            raise ValueError(self._OUT_KEYS_ERROR.format(out_keys=out_keys))
        if "is_init" not in in_keys:
            in_keys = [*in_keys, "is_init"]
        self.in_keys = in_keys
        self.out_keys = out_keys

    @staticmethod
    def _check_backend(backend: str) -> None:
        if backend not in ("pad", "auto"):
            raise ValueError(_BACKEND.format(backend=backend))

    @property
    def rnn(self) -> nn.RNNBase:
        """The wrapped ``nn.LSTM`` / ``nn.GRU`` layer."""
        return getattr(self, self._rnn_attr)

    # ---- modes

    @property
    def recurrent_mode(self) -> bool:
        """Whether the module runs over sequences (``set_recurrent_mode`` first, else its default)."""
        mode = recurrent_mode()
        return bool(self._recurrent_mode) if mode is None else mode

    @recurrent_mode.setter
    def recurrent_mode(self, value: bool) -> None:
        raise RuntimeError(_MODE_READ_ONLY)

    @property
    def temporal_mode(self) -> bool:
        """Removed name of ``recurrent_mode`` (raises, as in torchrl)."""
        raise RuntimeError(_TEMPORAL_MODE)

    def set_recurrent_mode(self, mode: bool = True) -> Any:
        """A copy sharing this module's layer, with ``default_recurrent_mode=mode`` (torchrl 0.4).

        Returns ``self`` when the mode is already ``mode``. The ``set_recurrent_mode``
        context manager still overrides the copy's default.
        """
        if mode is self._recurrent_mode:
            return self
        return type(self)(
            **{self._rnn_attr: self.rnn},
            in_keys=self.in_keys,
            out_keys=self.out_keys,
            default_recurrent_mode=mode,
            recurrent_backend=self.recurrent_backend,
        )

    # ---- layer flavour

    def make_python_based(self) -> Any:
        """Swaps the layer for its Python implementation (same parameters); returns ``self``."""
        return self._swap_layer(self._python_class)

    def make_cudnn_based(self) -> Any:
        """Swaps the layer for torch's (cuDNN) implementation (same parameters); returns ``self``."""
        return self._swap_layer(self._cudnn_class)

    def _swap_layer(self, cls: type[nn.RNNBase]) -> Any:
        old = self.rnn
        if type(old) is cls:
            return self
        kwargs = {
            "input_size": old.input_size,
            "hidden_size": old.hidden_size,
            "num_layers": old.num_layers,
            "bias": old.bias,
            "batch_first": old.batch_first,
            "dropout": old.dropout,
            "bidirectional": old.bidirectional,
        }
        if getattr(old, "proj_size", 0):
            kwargs["proj_size"] = old.proj_size
        param = next(old.parameters())
        new = cls(**kwargs, device=param.device, dtype=param.dtype)
        new.load_state_dict(old.state_dict())
        new.train(old.training)
        setattr(self, self._rnn_attr, new)
        return self

    # ---- primers

    def _state_sizes(self) -> list[int]:
        """The last dim of each recurrent state."""
        raise NotImplementedError

    def _num_states(self) -> int:
        return self.rnn.num_layers * (2 if self.rnn.bidirectional else 1)

    def make_primer_spec(self) -> Composite:
        """The specs of the recurrent states the env must prime: what the primer holds.

        One ``Unbounded`` entry per state key (the in_keys after the value), of shape
        ``(num_layers * num_directions, size)`` and the layer's dtype.

        Raises:
            RuntimeError: when the out state keys are not ``("next", <in state key>)``.
        """
        state_in = self.in_keys[1 : len(self.out_keys)]
        state_out = self.out_keys[1:]
        if any(unravel_key(("next", i)) != unravel_key(o) for i, o in zip(state_in, state_out)):
            raise RuntimeError(_PRIMER_KEYS.format(in_keys=self.in_keys, out_keys=self.out_keys))
        dtype = next(self.rnn.parameters()).dtype
        return Composite(
            {
                key: Unbounded(shape=(self._num_states(), size), dtype=dtype)
                for key, size in zip(state_in, self._state_sizes())
            }
        )

    def make_tensordict_primer(self) -> Any:
        """A ``rltransforms.TensorDictPrimer`` priming the recurrent states (zeros at reset).

        Append it to the env (``env.append_transform(module.make_tensordict_primer())``) so
        that the states travel from step to step. Its specs are ``make_primer_spec()``.

        Raises:
            ImportError: when rltransforms is not installed (``rlmodules[transforms]``).
        """
        spec = self.make_primer_spec()
        what = f"{type(self).__name__}.make_tensordict_primer()"
        primer_class = _from_rltransforms(what, "TensorDictPrimer")
        return primer_class(spec, expand_specs=True)

    # ---- forward

    def _run(
        self, x: torch.Tensor, states: list[torch.Tensor], lengths: torch.Tensor | None
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Runs the layer on ``x`` (n, T, F) from ``states`` (each (n, L, H)).

        ``lengths`` (n,) marks padded sequences. Returns the output (n, T, H') and the
        final states (each (n, L, H)).
        """
        rnn = self.rnn
        hx = self._to_hx([s.transpose(0, 1).contiguous() for s in states])
        if lengths is None:
            y, hx = rnn(x, hx)
        elif hasattr(rnn, "_loop"):  # python-based: freeze rows past their length
            mask = torch.arange(x.shape[1], device=x.device) < lengths.unsqueeze(1)
            y, hx = rnn(x, hx, mask=mask)
        else:
            packed = nn.utils.rnn.pack_padded_sequence(
                x, lengths.cpu(), batch_first=True, enforce_sorted=False
            )
            y, hx = rnn(packed, hx)
            y, _ = nn.utils.rnn.pad_packed_sequence(y, batch_first=True, total_length=x.shape[1])
        return y, [h.transpose(0, 1) for h in self._from_hx(hx)]

    def _to_hx(self, states: list[torch.Tensor]) -> Any:
        raise NotImplementedError

    def _from_hx(self, hx: Any) -> list[torch.Tensor]:
        raise NotImplementedError

    def _read_inputs(self, tensordict: TensorDictBase):
        cls = type(self).__name__
        value_key, *state_keys, init_key = self.in_keys
        value = tensordict.get(value_key, None)
        if value is None:
            present = list(tensordict.keys(True, True))
            raise KeyError(_MISSING_VALUE.format(cls=cls, key=value_key, present=present))
        is_init = tensordict.get(init_key, None)
        if is_init is None:
            present = list(tensordict.keys(True, True))
            raise KeyError(_MISSING_IS_INIT.format(cls=cls, key=init_key, present=present))
        states = [tensordict.get(key, None) for key in state_keys]
        found = [key for key, s in zip(state_keys, states) if s is not None]
        if found and len(found) != len(states):
            missing = [key for key in state_keys if key not in found]
            raise RuntimeError(_PARTIAL_STATES.format(cls=cls, found=found, missing=missing))
        batch = tuple(tensordict.batch_size)
        if value.shape[:-1] != batch or value.shape[-1] != self.rnn.input_size:
            raise ValueError(
                _VALUE_SHAPE.format(
                    cls=cls,
                    key=value_key,
                    size=self.rnn.input_size,
                    batch=batch,
                    shape=tuple(value.shape),
                )
            )
        expected = [(self._num_states(), size) for size in self._state_sizes()]
        for key, state, shape in zip(state_keys, states, expected):
            if state is not None and tuple(state.shape) != (*batch, *shape):
                raise ValueError(
                    _STATE_SHAPE.format(
                        cls=cls, key=key, expected=shape, batch=batch, shape=tuple(state.shape)
                    )
                )
        return value, states if found else None, is_init, expected

    @dispatch
    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Runs one step per element, or whole sequences in recurrent mode (see the module doc)."""
        value, states, is_init, shapes = self._read_inputs(tensordict)
        batch = tuple(tensordict.batch_size)
        recurrent = self.recurrent_mode
        if recurrent:
            if not batch:
                raise ValueError(_NO_TIME_DIM.format(cls=type(self).__name__))
            rows, steps = math.prod(batch[:-1]), batch[-1]
        else:
            rows, steps = math.prod(batch), 1
        x = value.reshape(rows, steps, value.shape[-1])
        is_init = is_init.reshape(rows, steps)
        if states is None:
            states = [x.new_zeros(rows, steps, *shape) for shape in shapes]
        else:
            states = [s.reshape(rows, steps, *s.shape[len(batch) :]) for s in states]
        if not recurrent:
            # a new trajectory must not inherit the state of the one before it
            reset = is_init[:, 0, None, None]
            states = [torch.where(reset, torch.zeros_like(s[:, 0]), s[:, 0]) for s in states]
            y, finals = self._run(x, states, None)
            outs = [f.unsqueeze(1) for f in finals]
        elif steps > 1 and bool(is_init[:, 1:].any()):
            y, outs = self._run_trajectories(x, states, is_init)
        else:
            y, finals = self._run(x, [s[:, 0] for s in states], None)
            outs = [
                torch.cat([torch.zeros_like(s[:, 1:]), f.unsqueeze(1)], 1)
                for s, f in zip(states, finals)
            ]
        tensordict.set(self.out_keys[0], y.reshape(*batch, y.shape[-1]))
        for key, out in zip(self.out_keys[1:], outs):
            tensordict.set(key, out.reshape(*batch, *out.shape[2:]))
        return tensordict

    def _run_trajectories(
        self, x: torch.Tensor, states: list[torch.Tensor], is_init: torch.Tensor
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """Recurrent mode with trajectories starting inside rows: split, pad, run, unpad."""
        rows, steps = is_init.shape
        starts = is_init.clone()
        starts[:, 0] = True
        starts = starts.reshape(-1)
        traj = starts.long().cumsum(0) - 1  # trajectory of each flat step
        first = starts.nonzero().squeeze(-1)  # flat index of each trajectory's first step
        lengths = torch.diff(first, append=first.new_tensor([rows * steps]))
        pos = torch.arange(rows * steps, device=x.device) - first[traj]
        flat_x = x.reshape(rows * steps, -1)
        padded = flat_x.new_zeros(len(first), int(lengths.max()), flat_x.shape[-1])
        padded = padded.index_put((traj, pos), flat_x)
        initial = [s.reshape(rows * steps, *s.shape[2:])[first] for s in states]
        y, finals = self._run(padded, initial, lengths)
        y = y[traj, pos].reshape(rows, steps, -1)
        last = first + lengths - 1
        outs = []
        for state, final in zip(states, finals):
            out = state.new_zeros(rows * steps, *state.shape[2:]).index_put((last,), final)
            outs.append(out.reshape(rows, steps, *state.shape[2:]))
        return y, outs

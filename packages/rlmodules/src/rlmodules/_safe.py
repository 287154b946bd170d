"""SafeModule: a TensorDictModule that knows (and may enforce) the spec of its outputs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from tensordict import TensorDictBase
from tensordict.nn import TensorDictModule, skip_existing
from tensordict.utils import NestedKey, unravel_key
from torch import nn

from rlspecs import Composite, TensorSpec
from rlspecs.private_apis import parse_to_device

_MISSING_IN_KEY = (
    "{cls} could not find the in_key(s) {missing} in the input tensordict; "
    "keys present: {present}. Write these entries before calling the module, "
    "or change its in_keys."
)
_SPEC_TYPE = "spec must be a TensorSpec (a leaf or a Composite) or None, got {type}."
_LEAF_SPEC_MANY_KEYS = (
    "A single leaf spec was given for out_keys {out_keys}; pass a Composite whose "
    "keys are the out_keys, or no spec."
)
_SPEC_KEY_NOT_OUT = (
    "spec has key {key!r} which is not among out_keys {out_keys}; spec keys must be out_keys."
)
_SAFE_WITHOUT_SPEC = (
    "safe=True needs a spec to project the outputs into, but spec is None or empty; "
    "pass spec=... or set safe=False."
)


def _missing_in_key_error(module: TensorDictModule, tensordict: TensorDictBase) -> KeyError | None:
    """Builds the KeyError naming the in_keys absent from ``tensordict``, or None if none is."""
    present = list(tensordict.keys(include_nested=True, leaves_only=True))
    present_set = {unravel_key(key) for key in present}
    missing = [key for key in module.in_keys if unravel_key(key) not in present_set]
    if not missing:
        return None
    return KeyError(
        _MISSING_IN_KEY.format(cls=type(module).__name__, missing=missing, present=present)
    )


def _project_outputs(module: SafeModule, args: Any, tensordict_out: Any) -> None:
    """Forward hook of safe modules: projects each produced out_key into its spec."""
    if not isinstance(tensordict_out, TensorDictBase):
        return
    for key, spec in module._projected:
        value = tensordict_out.get(key, None)
        if value is not None:
            tensordict_out.set(key, spec.project(value))


class _OutputSpecMixin:
    """The output spec of a tensordict module, and its projection when ``safe``.

    Shared by ``SafeModule`` and ``SafeProbabilisticModule``: the host class sets its keys,
    then calls ``_init_output_spec``. ``_spec_keys`` lists the outputs a spec may describe.
    """

    _spec: Composite
    _projected: list[tuple[NestedKey, TensorSpec]]
    safe: bool

    @property
    def _spec_keys(self) -> list[NestedKey]:
        return list(self.out_keys)  # type: ignore[attr-defined]

    def _init_output_spec(self, spec: TensorSpec | None, safe: bool) -> None:
        self._set_spec(spec)
        self.safe = safe
        if safe:
            if not self._projected:
                raise RuntimeError(_SAFE_WITHOUT_SPEC)
            self.register_forward_hook(_project_outputs)  # type: ignore[attr-defined]

    def _as_composite(self, spec: TensorSpec | None) -> Composite:
        if spec is None:
            return Composite()
        if not isinstance(spec, TensorSpec):
            raise TypeError(_SPEC_TYPE.format(type=type(spec).__name__))
        keys = self._spec_keys
        if not isinstance(spec, Composite):
            if len(keys) != 1:
                raise RuntimeError(_LEAF_SPEC_MANY_KEYS.format(out_keys=keys))
            return Composite({keys[0]: spec.clone()})
        spec = spec.clone()
        allowed = {unravel_key(key) for key in keys}
        for key in spec.keys(include_nested=True, leaves_only=True):
            if unravel_key(key) not in allowed:
                raise RuntimeError(_SPEC_KEY_NOT_OUT.format(key=key, out_keys=keys))
        return spec

    @property
    def spec(self) -> Composite:
        """The spec of the outputs, as a Composite keyed by out_keys."""
        return self._spec

    @spec.setter
    def spec(self, spec: TensorSpec | None) -> None:
        self._set_spec(spec)

    def _set_spec(self, spec: TensorSpec | None) -> None:
        self._spec = self._as_composite(spec)
        # (key, leaf) pairs looked up once here, not at every safe call
        self._projected = [
            (key, leaf)
            for key, leaf in self._spec.items(include_nested=True, leaves_only=True)
            if leaf is not None
        ]

    def random(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes a random sample of each output spec in ``tensordict``."""
        return tensordict.update(self._spec.rand(tensordict.batch_size))

    def random_sample(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Same as ``random`` (torchrl's other name for it)."""
        return self.random(tensordict)

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """Moves parameters, buffers and the spec (when a device is given)."""
        device = parse_to_device(*args, **kwargs)
        if device is not None:
            self._set_spec(self._spec.to(device))
        return super().to(*args, **kwargs)  # type: ignore[misc]

    def cpu(self) -> Any:
        """Moves parameters, buffers and the spec to the CPU."""
        return self.to("cpu")

    def cuda(self, device: int | torch.device | None = None) -> Any:
        """Moves parameters, buffers and the spec to a CUDA device."""
        if isinstance(device, int):
            device = torch.device("cuda", device)
        return self.to(device if device is not None else "cuda")


class SafeModule(_OutputSpecMixin, TensorDictModule):
    """A ``tensordict.nn.TensorDictModule`` with an output spec, projected into when ``safe``.

    Args:
        module: the ``nn.Module`` reading the ``in_keys`` tensors (in order) and
            returning one tensor per out_key.
        in_keys: keys read from the input tensordict.
        out_keys: keys written to the tensordict.
        spec: the spec of the outputs: a leaf (when there is a single out_key)
            or a ``Composite`` keyed by out_keys. Optional.
        safe: if ``True``, every output with a spec is projected into it.

    Raises:
        KeyError: at call time, naming the missing in_keys and the keys present.

    Examples:
        >>> from rlmodules import SafeModule
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlspecs import Bounded
        >>> module = SafeModule(
        ...     torch.nn.Linear(3, 2), in_keys=["obs"], out_keys=["action"],
        ...     spec=Bounded(-0.1, 0.1, shape=(2,)), safe=True,
        ... )
        >>> td = module(TensorDict(obs=torch.full((4, 3), 100.0), batch_size=[4]))
        >>> bool(td["action"].abs().max() <= 0.1)
        True
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: Sequence[NestedKey],
        out_keys: Sequence[NestedKey],
        spec: TensorSpec | None = None,
        safe: bool = False,
        inplace: bool = True,
    ) -> None:
        super().__init__(module, in_keys=in_keys, out_keys=out_keys, inplace=inplace)
        self._init_output_spec(spec, safe)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """Runs the module, turning a missing in_key into a KeyError that names it."""
        if len(args) == 1 and not kwargs and self._plain_call and not skip_existing():
            tensordict = args[0]
            if isinstance(tensordict, TensorDictBase):
                return self._forward_plain(tensordict)
        try:
            return super().forward(*args, **kwargs)
        except KeyError as err:
            tensordict = args[0] if args else kwargs.get("tensordict")
            if isinstance(tensordict, TensorDictBase):
                error = _missing_in_key_error(self, tensordict)
                if error is not None:
                    raise error from err
            raise

    @property
    def _plain_call(self) -> bool:
        """Whether a call is just: read in_keys, run the module, write out_keys in place."""
        return (
            self.inplace is True
            and self._kwargs is None
            and self.method is None
            and not self.method_kwargs
        )

    def _forward_plain(self, tensordict: TensorDictBase) -> TensorDictBase:
        # TensorDictModule's general path costs ~200 us per call (its output conversion
        # probes for pandas on every write); policies run at every env step.
        tensors = [tensordict.get(key, None) for key in self.in_keys]
        if any(tensor is None for tensor in tensors):
            raise _missing_in_key_error(self, tensordict)
        out = self.module(*tensors)
        if isinstance(out, (dict, TensorDictBase)):
            out = tuple(out[key] for key in self.out_keys)
        elif not isinstance(out, tuple):
            out = (out,)
        if len(out) != len(self.out_keys) or not all(isinstance(t, torch.Tensor) for t in out):
            return self._write_to_tensordict(tensordict, out)
        for key, value in zip(self.out_keys, out):
            if key != "_":
                tensordict.set(key, value)
        return tensordict

"""`TensorDictPrimer`: entries written at reset (and carried from step to step) from specs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Composite, TensorSpec

from ._base import Transform, _get
from ._resets import ResetKeyMixin, expand_right, get_reset

__all__ = ["TensorDictPrimer"]

DefaultValue = float | Callable[[], torch.Tensor] | Mapping[NestedKey, Any]

PRIMERS_AND_KWARGS_ERROR = (
    "providing the primers as a dictionary is incompatible with extra keys provided as kwargs "
    "(got primers and {kwargs})."
)
NOT_A_SPEC_ERROR = (
    "The values of the primers must be a subtype of the TensorSpec class. Got {type} instead "
    "for {key!r}."
)
RANDOM_AND_DEFAULT_ERROR = "Setting random to True and providing a default_value are incompatible."
DEFAULT_KEYS_ERROR = (
    "If a default_value dictionary is provided, it must match the primers keys: got {got}, "
    "expected {expected}."
)
NOT_IN_SPEC_ERROR = (
    "TensorDictPrimer: the default value of {key!r} ({value}) is not in its spec ({spec})."
)
STEP_MISSING_ERROR = (
    "TensorDictPrimer: {key!r} not found in the step input; reset the env first (primed "
    "entries are written at reset and carried from step to step)"
)
PRIMER_BATCH_ERROR = (
    "TensorDictPrimer: the spec of {key!r} has shape {shape}, whose leading dims are not the "
    "env batch size {batch}, and expand_specs=False; give specs with the batch dims or pass "
    "expand_specs=True (specs of one env, expanded to the batch)"
)
OBS_SPEC_ERROR = "observation_spec was expected to be of type Composite. Got {type} instead."


class TensorDictPrimer(ResetKeyMixin, Transform):
    """Writes entries described by specs at reset, then carries them from step to step.

    Typical use: recurrent states or exploration noise that a policy reads and rewrites. The
    values are drawn from each spec (`random=True`) or set to `default_value` (0 by default).
    At a partial reset only the restarting sub-envs get new values. At each step the current
    value is copied into `"next"` unless the step (or the policy, under `"next"`) wrote it.

    In an env, a spec whose leading dims are not the env's batch size is expanded to it (the
    primers are then stored expanded). Called on a tensordict (`t(td)`, a model, stored data)
    the transform writes the values, expanded to the tensordict's batch size when needed.

    Args:
        primers: a dict or `Composite` of key -> spec (or pass them as keyword arguments).
        random: draw the values from the specs (`rand`) instead of `default_value`.
        default_value: a number for every entry, a callable returning a tensor, or a dict of
            either per key (its keys must be exactly the primers' leaves). As in torchrl 0.4,
            a value that tests False (0, 0.0, an empty dict) is the same as none: it may go with
            `random=True` (then ignored), else the entries are 0. A true value with
            `random=True` raises ValueError.
        reset_key: the reset entry to follow (default: the parent env's only reset key).
        expand_specs: later torchrl releases' flag. True: the specs describe one env and are
            always expanded to the batch size (also when their leading dims happen to equal
            it); False: the specs must start with the batch dims; None (default, torchrl 0.4):
            expanded when their leading dims are not the batch size.
        **kwargs: primers given as `key=spec`; `device=` sets the device of the values.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlspecs import Unbounded
        >>> from rltransforms import TransformedEnv
        >>> env = TransformedEnv(base_env, TensorDictPrimer(hidden=Unbounded(2), default_value=1.0))
        >>> env.reset()["hidden"]
        tensor([1., 1.])
        >>> TensorDictPrimer(hidden=Unbounded(2))(TensorDict(batch_size=[3]))["hidden"].shape
        torch.Size([3, 2])
    """

    def __init__(
        self,
        primers: Mapping[NestedKey, TensorSpec] | Composite | None = None,
        random: bool | None = None,
        default_value: DefaultValue | None = None,
        reset_key: NestedKey | None = None,
        expand_specs: bool | None = None,
        **kwargs: Any,
    ) -> None:
        device = kwargs.pop("device", None)
        if primers is not None:
            if kwargs:
                raise RuntimeError(PRIMERS_AND_KWARGS_ERROR.format(kwargs=sorted(kwargs)))
            kwargs = primers
        if not isinstance(kwargs, Composite):
            for key, spec in kwargs.items():
                if not isinstance(spec, TensorSpec):
                    raise ValueError(NOT_A_SPEC_ERROR.format(type=type(spec).__name__, key=key))
            kwargs = Composite(dict(kwargs))
        # torchrl 0.4 tests the value's truth: a zero (or empty) default_value goes with
        # random=True, and stands for 0.0 otherwise
        if not _is_set(default_value):
            default_value = None
        elif random:
            raise ValueError(RANDOM_AND_DEFAULT_ERROR)
        super().__init__()
        self.primers = kwargs
        self.expand_specs = expand_specs
        # the specs as given: each spec build expands these, never the already expanded ones
        self.__dict__["_given_primers"] = kwargs.clone()
        self.__dict__["_env_batch"] = None  # the batch size the primers were expanded to
        self.random = random
        leaves = [unravel_key(key) for key in self.primers.keys(True, True)]
        if isinstance(default_value, Mapping):
            default_value = {unravel_key(key): value for key, value in default_value.items()}
            if set(default_value) != set(leaves):
                raise ValueError(
                    DEFAULT_KEYS_ERROR.format(
                        got=sorted(map(str, default_value)), expected=sorted(map(str, leaves))
                    )
                )
        else:
            value = 0.0 if default_value is None else default_value
            default_value = dict.fromkeys(leaves, value)
        self.default_value = default_value
        self._validated = False
        self.reset_key = reset_key
        self.device = device

    # ------------------------------------------------------------------ device
    @property
    def device(self) -> torch.device | None:
        """The device of the values (default: the parent env's)."""
        device = self.__dict__.get("_device")
        if device is None:
            parent = self.parent
            if parent is not None:
                return parent.device
        return device

    @device.setter
    def device(self, value: torch.device | str | None) -> None:
        self.__dict__["_device"] = None if value is None else torch.device(value)

    def to(self, *args: Any, **kwargs: Any) -> TensorDictPrimer:
        device = _device_of(*args, **kwargs)
        if device is not None:
            self.device = device
            self.primers = self.primers.to(device)
            self.__dict__["_given_primers"] = self.__dict__["_given_primers"].to(device)
        return super().to(*args, **kwargs)

    # ------------------------------------------------------------------ specs
    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        if not isinstance(observation_spec, Composite):
            raise ValueError(OBS_SPEC_ERROR.format(type=type(observation_spec).__name__))
        batch = observation_spec.shape
        device = observation_spec.device or self.device
        for key, spec in list(self.__dict__["_given_primers"].items()):
            spec = self._batched(key, spec, batch)
            if device is not None:
                spec = spec.to(device)
            self.primers[key] = spec
        self.__dict__["_env_batch"] = batch
        # leaf by leaf: a nested primer joins the env's sub-composite instead of replacing it
        for key in self.primers.keys(True, True):
            observation_spec[key] = self.primers[key].clone()
        return observation_spec

    def _batched(self, key: NestedKey, spec: TensorSpec, batch: torch.Size) -> TensorSpec:
        """`spec` with the leading dims `batch` (see `expand_specs`)."""
        if self.expand_specs is True:
            return spec.expand(*batch, *spec.shape)
        if spec.shape[: len(batch)] == batch:
            return spec
        if self.expand_specs is False:
            raise ValueError(
                PRIMER_BATCH_ERROR.format(key=key, shape=tuple(spec.shape), batch=tuple(batch))
            )
        return spec.expand(*batch, *spec.shape)

    def transform_input_spec(self, input_spec: Composite) -> Composite:
        input_spec["full_state_spec"] = self.transform_observation_spec(
            input_spec["full_state_spec"]
        )
        return input_spec

    # ------------------------------------------------------------------ values
    def _value(self, key: NestedKey, spec: TensorSpec, shape: torch.Size) -> torch.Tensor:
        """A fresh value for `key`: `(*shape, *spec.shape)`."""
        if self.random:
            return spec.rand(shape)
        default = self.default_value[key]
        full_shape = (*shape, *spec.shape)
        if callable(default):
            value = default()
            if not self._validated and not spec.is_in(value):
                raise RuntimeError(NOT_IN_SPEC_ERROR.format(key=key, value=value, spec=spec))
            return value.to(spec.device).expand(full_shape) if value.shape != full_shape else value
        return torch.full(full_shape, default, dtype=spec.dtype, device=spec.device)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Write a value for every primer (expanded to the tensordict's batch size if needed)."""
        batch = tensordict.batch_size
        per_env = self.expand_specs is True and self.__dict__["_env_batch"] is None
        for key, spec in self.primers.items(True, True):
            key = unravel_key(key)
            if per_env or spec.shape[: len(batch)] != batch:
                shape = batch
            else:
                shape = torch.Size(())
            tensordict.set(key, self._value(key, spec, shape))
        self._validated = True
        return tensordict

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        for key in self.primers.keys(True, True):
            key = unravel_key(key)
            if _get(next_tensordict, key) is not None:
                continue
            path = (key,) if isinstance(key, str) else key
            value = tensordict.get(("next", *path), None)
            if value is None:
                value = tensordict.get(key, None)
                if value is None:
                    raise KeyError(STEP_MISSING_ERROR.format(key=key))
            next_tensordict.set(key, value)
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        parent = self.parent
        batch = tensordict.batch_size
        reset = get_reset(self.reset_key, tensordict)
        if not bool(reset.any()):
            return tensordict_reset
        partial = not bool(reset.all())
        per_env = self.expand_specs is True and self.__dict__["_env_batch"] is None
        for key, spec in self.primers.items(True, True):
            key = unravel_key(key)
            if parent is not None and parent.batch_locked:
                shape = torch.Size(())  # the specs hold the env's batch dims
            elif parent is None and not per_env and spec.shape[: len(batch)] == batch:
                shape = torch.Size(())
            else:
                shape = batch  # a batch-unlocked env, or data without env: the data's batch
            value = self._value(key, spec, shape)
            previous = tensordict.get(key, None) if partial else None
            if previous is not None and previous.shape == value.shape:
                mask = expand_right(reset.to(value.device), value)
                value = torch.where(mask, value, previous)
            tensordict_reset.set(key, value)
        self._validated = True
        return tensordict_reset

    def __repr__(self) -> str:
        default = {
            key: value if isinstance(value, (int, float)) else "Callable"
            for key, value in self.default_value.items()
        }
        return (
            f"TensorDictPrimer(primers={list(self.primers.keys(True, True))}, "
            f"default_value={default}, random={self.random})"
        )


def _is_set(default_value: DefaultValue | None) -> bool:
    """Whether `default_value` counts as given: torchrl 0.4's `bool(default_value)` (a tensor
    counts when any entry is non-zero)."""
    if isinstance(default_value, torch.Tensor):
        return bool(default_value.any())
    return bool(default_value)


def _device_of(*args: Any, **kwargs: Any) -> torch.device | None:
    """The device in `Module.to`'s arguments, if any."""
    device = kwargs.get("device")
    for arg in args:
        if isinstance(arg, (str, torch.device, int)) and not isinstance(arg, bool):
            device = arg
    return None if device is None else torch.device(device)

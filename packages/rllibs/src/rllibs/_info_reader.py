"""Reading entries of a library's info dict into the step's tensordict."""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from tensordict import TensorDictBase

from rlspecs import Categorical, Composite, TensorSpec, Unbounded

__all__ = ["BaseInfoDictReader", "default_info_dict_reader"]

SPEC_COUNT = (
    "default_info_dict_reader got {n_specs} specs for {n_keys} keys {keys}; give one spec per key"
)
SPEC_TYPE = "default_info_dict_reader: spec must be a dict, a Composite, a list of specs or None, got {type}"
INFO_SHAPE = (
    "info entry {key!r} has shape {got}, which does not fit the declared shape {expected} "
    "(batch dims first); fix the spec given to default_info_dict_reader"
)


def _is_numeric(value: Any) -> bool:
    if isinstance(value, (bool, int, float, np.number, np.bool_, torch.Tensor)):
        return True
    return isinstance(value, np.ndarray) and value.dtype.kind in "biuf"


def _spec_of(value: Any, batch_ndim: int) -> TensorSpec:
    tensor = torch.as_tensor(value)
    shape = tensor.shape[batch_ndim:]
    if tensor.dtype == torch.bool:
        return Categorical(2, shape=shape, dtype=torch.bool)
    return Unbounded(shape=shape, dtype=tensor.dtype)


class BaseInfoDictReader(abc.ABC):
    """Base of info dict readers (torchrl 0.4's): called on each info dict, declaring its specs.

    A reader writes entries of the library's info dict into the step's tensordict (in place)
    and returns it; ``info_spec`` (unbatched, or None while unknown) is what
    ``set_info_dict_reader`` adds to the observation spec.

    Examples:
        >>> from rlspecs import Composite, Unbounded
        >>> class Speed(BaseInfoDictReader):
        ...     info_spec = Composite(speed=Unbounded(()))
        ...     def __call__(self, info_dict, tensordict):
        ...         return tensordict.set("speed", torch.as_tensor(info_dict["v"], dtype=torch.float32))
        >>> from tensordict import TensorDict
        >>> Speed()({"v": 2.0}, TensorDict({}, []))["speed"]
        tensor(2.)
    """

    @abc.abstractmethod
    def __call__(self, info_dict: Mapping[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        """Write the entries of ``info_dict`` into ``tensordict`` and return it."""

    @property
    @abc.abstractmethod
    def info_spec(self) -> Composite | None:
        """The unbatched specs of the entries read, or None while they are unknown."""


class default_info_dict_reader(BaseInfoDictReader):  # noqa: N801 (the seed-era public name)
    """Read entries of the info dict into the tensordict and declare their specs.

    Args:
        keys: the info keys to read; None reads every key holding numbers (private keys,
            starting with ``"_"``, are skipped when ``ignore_private``).
        spec: the specs of the entries, unbatched: a dict or ``Composite`` keyed like ``keys``,
            a list of specs in the order of ``keys``, or None (an ``Unbounded`` scalar float per
            key; with ``keys=None`` the specs stay unknown until ``infer_spec`` sees an info dict).
        ignore_private: skip keys starting with ``"_"`` when reading every key.

    Values are cast to the spec's dtype and shaped as ``(*batch, *spec.shape)`` (reshaped when
    the element count matches, broadcast otherwise); keys absent from an info dict (as at reset)
    read as zeros.

    Examples:
        >>> from tensordict import TensorDict
        >>> reader = default_info_dict_reader(["x_position"])
        >>> td = reader({"x_position": 1.5}, TensorDict({}, []))
        >>> td["x_position"]
        tensor(1.5000)
        >>> reader({}, TensorDict({}, []))["x_position"]
        tensor(0.)
    """

    def __init__(
        self,
        keys: Sequence[str] | str | None = None,
        spec: Mapping[str, TensorSpec] | Composite | Sequence[TensorSpec] | None = None,
        ignore_private: bool = True,
    ) -> None:
        if isinstance(keys, str):
            keys = [keys]
        self.keys: list[str] | None = None if keys is None else list(keys)
        self.ignore_private = ignore_private
        self._info_spec: Composite | None = self._normalise_spec(self.keys, spec)

    @staticmethod
    def _normalise_spec(keys: list[str] | None, spec: Any) -> Composite | None:
        if spec is None:
            if keys is None:
                return None
            return Composite({key: Unbounded(shape=(), dtype=torch.float32) for key in keys})
        if isinstance(spec, Composite):
            return spec.clone()
        if isinstance(spec, Mapping):
            return Composite(dict(spec), shape=())
        if isinstance(spec, Sequence) and all(isinstance(s, TensorSpec) for s in spec):
            if keys is None or len(spec) != len(keys):
                raise ValueError(
                    SPEC_COUNT.format(n_specs=len(spec), n_keys=len(keys or ()), keys=keys)
                )
            return Composite(dict(zip(keys, spec)), shape=())
        raise TypeError(SPEC_TYPE.format(type=type(spec).__name__))

    @property
    def info_spec(self) -> Composite | None:
        """The unbatched specs of the entries read, or None while they are unknown."""
        return self._info_spec

    def reset(self) -> None:
        """Forget the keys and specs (as torchrl 0.4): the next ``infer_spec`` finds them again.

        Examples:
            >>> reader = default_info_dict_reader(["x"])
            >>> reader.reset()
            >>> reader.keys, reader.info_spec
            (None, None)
        """
        self.keys = None
        self._info_spec = None

    def infer_spec(self, info_dict: Mapping[str, Any], batch_ndim: int = 0) -> Composite:
        """Fix the keys and specs from one info dict (numbers only) and return the specs.

        Examples:
            >>> reader = default_info_dict_reader()
            >>> reader.infer_spec({"x": np.float64(1.0), "_mask": True, "name": "a"})["x"].dtype
            torch.float64
        """
        keys = self.keys if self.keys is not None else self._readable_keys(info_dict)
        specs = {key: _spec_of(info_dict[key], batch_ndim) for key in keys if key in info_dict}
        self.keys = list(specs)
        self._info_spec = Composite(specs, shape=())
        return self._info_spec

    def _readable_keys(self, info_dict: Mapping[str, Any]) -> list[str]:
        return [
            key
            for key, value in info_dict.items()
            if _is_numeric(value) and not (self.ignore_private and key.startswith("_"))
        ]

    def __call__(self, info_dict: Mapping[str, Any], tensordict: TensorDictBase) -> TensorDictBase:
        """Write the entries of ``info_dict`` into ``tensordict`` (in place) and return it."""
        spec = self._info_spec
        if spec is None:
            for key in self._readable_keys(info_dict):
                tensordict.set(key, torch.as_tensor(info_dict[key]))
            return tensordict
        batch = tensordict.batch_size
        for key in self.keys if self.keys is not None else spec.keys():
            leaf = spec[key]
            if key not in info_dict:
                tensordict.set(key, leaf.zero(batch))
                continue
            value = torch.as_tensor(info_dict[key], dtype=leaf.dtype)
            shape = torch.Size((*batch, *leaf.shape))
            if value.shape != shape:
                if value.numel() == shape.numel():
                    value = value.reshape(shape)
                else:
                    try:
                        value = value.broadcast_to(shape)
                    except RuntimeError as err:
                        raise ValueError(
                            INFO_SHAPE.format(
                                key=key, got=tuple(value.shape), expected=tuple(shape)
                            )
                        ) from err
            tensordict.set(key, value)
        return tensordict

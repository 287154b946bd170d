"""``NonTensor``: entries that hold arbitrary Python objects (strings, dicts, ...)."""

from __future__ import annotations

import copy
from typing import Any

import torch
from tensordict import NonTensorData

from ._base import DeviceLike, ShapeLike, TensorSpec

NO_ENUMERATE = "Cannot enumerate a NonTensor spec."


class NonTensor(TensorSpec):
    """A non-tensor entry: samples are ``NonTensorData`` holding ``example_data``.

    Examples:
        >>> spec = NonTensor(example_data="hello")
        >>> spec.rand().data
        'hello'
    """

    def __init__(
        self,
        shape: ShapeLike | None = None,
        device: DeviceLike = None,
        dtype: torch.dtype | None = None,
        example_data: Any = None,
    ) -> None:
        super().__init__(shape, device, dtype)
        self.example_data = example_data

    def _default_domain(self) -> str:
        return ""

    def clone(self) -> NonTensor:
        """A copy that shares nothing with ``self`` (``example_data`` is deep-copied)."""
        return self._replace(example_data=copy.deepcopy(self.example_data))

    def _sample(self, shape: ShapeLike | None) -> NonTensorData:
        return NonTensorData(
            data=self.example_data, batch_size=self._full_shape(shape), device=self.device
        )

    def rand(self, shape: ShapeLike | None = None) -> NonTensorData:
        """Return ``example_data`` wrapped in a ``NonTensorData`` of batch ``(*shape, *self.shape)``."""
        return self._sample(shape)

    def zero(self, shape: ShapeLike | None = None) -> NonTensorData:
        """Same as ``rand``: a ``NonTensorData`` holding ``example_data``."""
        return self._sample(shape)

    def one(self, shape: ShapeLike | None = None) -> NonTensorData:
        """Same as ``rand``: a ``NonTensorData`` holding ``example_data``."""
        return self._sample(shape)

    def is_in(self, val: Any) -> bool:
        """Any non-tensor value (or ``NonTensorData``) belongs to a non-tensor spec."""
        return not isinstance(val, torch.Tensor)

    def project(self, val: Any) -> Any:
        """Non-tensor values are returned unchanged."""
        return val

    def cardinality(self) -> int:
        """Not defined for Python objects (``NotImplementedError``, as in current torchrl)."""
        raise NotImplementedError(NO_ENUMERATE)

    def enumerate(self, use_mask: bool = False) -> Any:
        """Not defined for Python objects (``NotImplementedError``, as in current torchrl)."""
        raise NotImplementedError(NO_ENUMERATE)

    def encode(self, val: Any, *, ignore_device: bool = False) -> NonTensorData:
        """Wrap ``val`` in a ``NonTensorData`` of the spec's shape."""
        return super().encode(val, ignore_device=ignore_device)

    def _encode_eager(self, val: Any, *, ignore_device: bool = False) -> NonTensorData:
        if isinstance(val, NonTensorData):
            return val
        device = None if ignore_device else self.device
        return NonTensorData(data=val, batch_size=self.shape, device=device)

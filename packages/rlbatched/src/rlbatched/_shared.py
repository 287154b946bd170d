"""One flat shared buffer holding every leaf of the batched env's shared tensordict."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase

from rlworkers import CloudpickleBox

_ALIGN = 64  # bytes: each leaf starts on its own cache line


class SharedLayout:
    """Maps the leaves of a template tensordict onto one flat byte buffer.

    The main process builds it from a zero-filled template, allocates the buffer once
    (shared memory on CPU) and sends the layout (a tiny skeleton with the template's
    structure) plus the buffer to each worker; both sides rebuild the same tensordict
    of views with ``views``, so a write on one side is seen by the other.
    """

    def __init__(self, template: TensorDictBase):
        self.device = template.device
        # the skeleton keeps keys, nesting, batch sizes and lazy stacks, but no data
        self.skeleton = CloudpickleBox(
            template.apply(lambda t: torch.zeros((), dtype=t.dtype).expand(t.shape), device="cpu")
        )
        self.nbytes = 0
        self.skeleton.obj.apply(self._measure, filter_empty=True)

    def _measure(self, tensor: torch.Tensor) -> None:
        start = -(-self.nbytes // _ALIGN) * _ALIGN
        self.nbytes = start + tensor.numel() * tensor.element_size()

    def allocate(self) -> torch.Tensor:
        """A fresh zeroed byte buffer large enough for every leaf."""
        buffer = torch.zeros(max(self.nbytes, 1), dtype=torch.uint8, device=self.device)
        if buffer.device.type == "cpu":
            buffer.share_memory_()
        return buffer

    def views(self, buffer: torch.Tensor) -> TensorDictBase:
        """The tensordict whose leaves are views into ``buffer``."""
        offset = 0

        def place(tensor: torch.Tensor) -> torch.Tensor:
            nonlocal offset
            start = -(-offset // _ALIGN) * _ALIGN
            offset = start + tensor.numel() * tensor.element_size()
            return buffer[start:offset].view(tensor.dtype).view(tensor.shape)

        return self.skeleton.obj.apply(place, device=buffer.device)

"""Page-locked (pinned) host memory for env outputs: `PinMemoryTransform`."""

from __future__ import annotations

from tensordict import TensorDictBase

from ._base import Transform

__all__ = ["PinMemoryTransform"]

PIN_ERROR = (
    "PinMemoryTransform could not pin the tensordict (batch size {batch_size}, keys {keys}): "
    "{error}. Pinning needs an accelerator (CUDA) and dense CPU tensors"
)


class PinMemoryTransform(Transform):
    """Returns step and reset outputs in pinned (page-locked) host memory.

    Pinned memory makes host-to-GPU copies faster and lets them run asynchronously
    (`td.to("cuda", non_blocking=True)`). Each output is copied with `tensordict.pin_memory()`,
    as in torchrl 0.4. Torch can pin only when an accelerator is available: without one (a
    CPU-only machine) it refuses, and so does this transform, with a `RuntimeError` that names
    the tensordict and carries torch's own error as its cause. Specs are unchanged.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> t = PinMemoryTransform()
        >>> try:
        ...     out = t(TensorDict(obs=torch.zeros(2)))
        ... except RuntimeError:  # no CUDA: torch cannot pin memory
        ...     pinned = not torch.cuda.is_available()
        ... else:
        ...     pinned = out["obs"].is_pinned()
        >>> pinned
        True
    """

    def __init__(self) -> None:
        super().__init__()

    def _call(self, next_tensordict: TensorDictBase) -> TensorDictBase:
        try:
            return next_tensordict.pin_memory()
        except RuntimeError as err:
            keys = sorted(map(str, next_tensordict.keys(True, True)))
            raise RuntimeError(
                PIN_ERROR.format(batch_size=tuple(next_tensordict.batch_size), keys=keys, error=err)
            ) from err

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return self._call(tensordict_reset)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """A copy of `tensordict` in pinned memory (RuntimeError where torch cannot pin)."""
        return self._call(tensordict)

    def __repr__(self) -> str:
        return "PinMemoryTransform()"

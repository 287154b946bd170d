"""Action masks: checking them and sampling, checking and projecting labels under them.

A mask is a boolean tensor whose last dim has one entry per category (``True``: allowed).
Specs without a mask never reach this module, so masking costs them nothing.
"""

from __future__ import annotations

from typing import Any

import torch

from .errors import SpecShapeError

MASK_DTYPE = "Only boolean masks are accepted: got a mask of dtype {dtype} for {cls}"
MASK_SHAPE = (
    "Cannot expand mask to the desired shape: a mask of shape {got} does not broadcast to "
    "{expected} for {cls}"
)
ALL_MASKED = (
    "cannot sample from {cls}: {count} of the mask's rows allow no category at all "
    "(first at position {where})"
)
NOT_UNIFORM = "{cls} can only be masked when every batch entry has the same nvec, got nvec={nvec}"


def check_mask(mask: Any, shape: tuple[int, ...], device: torch.device, cls: str) -> torch.Tensor:
    """``mask`` as a bool tensor of ``shape`` on ``device`` (expanded); raises naming the spec."""
    if not isinstance(mask, torch.Tensor):
        mask = torch.as_tensor(mask)
    if mask.dtype != torch.bool:
        raise ValueError(MASK_DTYPE.format(dtype=mask.dtype, cls=cls))
    try:
        return mask.to(device).expand(shape)
    except RuntimeError as err:
        raise SpecShapeError(
            MASK_SHAPE.format(got=tuple(mask.shape), expected=tuple(shape), cls=cls)
        ) from err


def masked_labels(mask: torch.Tensor, batch: tuple[int, ...], cls: str) -> torch.Tensor:
    """One label per entry of ``batch``, uniform among the categories ``mask`` allows.

    The largest of uniform scores over the allowed categories is a uniform pick among them;
    a row with no allowed category raises ``ValueError``.
    """
    mask = mask.expand(*batch, mask.shape[-1])
    allowed = mask.any(-1)
    if not bool(allowed.all()):
        bad = (~allowed).nonzero()
        raise ValueError(
            ALL_MASKED.format(cls=cls, count=bad.shape[0], where=tuple(bad[0].tolist()))
        )
    scores = torch.rand(mask.shape, device=mask.device).masked_fill_(~mask, -1.0)
    return scores.argmax(-1)


def labels_allowed(mask: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Whether each label (in range) is allowed by ``mask`` (broadcast over leading dims)."""
    shape = torch.broadcast_shapes(mask.shape[:-1], labels.shape)
    mask = mask.expand(*shape, mask.shape[-1])
    return mask.gather(-1, labels.long().expand(shape).unsqueeze(-1)).squeeze(-1)


def replace_disallowed(mask: torch.Tensor, labels: torch.Tensor, cls: str) -> torch.Tensor:
    """``labels`` with every label the mask forbids replaced by a random allowed one."""
    shape = torch.broadcast_shapes(mask.shape[:-1], labels.shape)
    labels = labels.long().expand(shape)
    mask = mask.expand(*shape, mask.shape[-1])
    ok = mask.gather(-1, labels.unsqueeze(-1)).squeeze(-1)
    if bool(ok.all()):
        return labels
    bad = ~ok
    out = labels.clone()
    out[bad] = masked_labels(mask[bad], (int(bad.sum()),), cls)
    return out


def mask_row(nvec: torch.Tensor, cls: str) -> list[int]:
    """The one row of cardinalities shared by every batch entry of ``nvec`` (for masking)."""
    flat = nvec.reshape(-1, nvec.shape[-1]) if nvec.ndim else nvec.reshape(1, 1)
    if flat.shape[0] and not bool((flat == flat[0]).all()):
        raise ValueError(NOT_UNIFORM.format(cls=cls, nvec=nvec.tolist()))
    return flat[0].tolist() if flat.shape[0] else []

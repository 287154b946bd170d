"""Stateless tensor functions behind some transforms (torchrl's ``envs.transforms.functional``).

``cat_frames`` is the offline (whole-trajectory) windowing of ``CatFrames``; ``rgb_to_grayscale``
is the colour conversion of ``GrayScale``.
"""

from __future__ import annotations

from typing import Literal

import torch

__all__ = ["cat_frames", "rgb_to_grayscale"]

PADDING_ERROR = "padding must be one of 'same' or 'constant', got {padding!r}."
DIM_ERROR = (
    "dim must be < 0 to accommodate for tensors of different batch-sizes "
    "(since negative dims are batch invariant)."
)
TIME_DIM_ERROR = "time_dim must be < 0."
DONE_MASK_SHAPE_ERROR = (
    "cat_frames: done_mask of shape {shape} does not line up with the tensor of shape "
    "{tensor_shape} (time_dim={time_dim}, N={N}): expected (*batch, time, N) or "
    "(*batch, time, 1, N) with (*batch, time) = {lead}"
)
GRAY_NDIM_ERROR = "Input image tensor should have at least 3 dimensions, but found{ndim}"
GRAY_CHANNELS_ERROR = (
    "Input image tensor permitted channel values are [3], but found {channels} "
    "(full shape: {shape})"
)
GRAY_OUTPUT_ERROR = "num_output_channels should be either 1 or 3"


def rgb_to_grayscale(img: torch.Tensor, num_output_channels: int = 1) -> torch.Tensor:
    """Turns RGB images (channels at dim -3) into grayscale (ITU-R 601-2 luma weights).

    Args:
        img: images of shape ``(..., 3, H, W)``.
        num_output_channels: 1 (default) or 3 (the gray channel repeated).

    Raises:
        TypeError: ``img`` has fewer than 3 dims or not 3 channels.
        ValueError: ``num_output_channels`` is neither 1 nor 3.

    Examples:
        >>> img = torch.ones(3, 2, 2)
        >>> rgb_to_grayscale(img).shape
        torch.Size([1, 2, 2])
        >>> rgb_to_grayscale(img, num_output_channels=3).shape
        torch.Size([3, 2, 2])
    """
    if img.ndim < 3:
        raise TypeError(GRAY_NDIM_ERROR.format(ndim=img.ndim))
    if img.shape[-3] != 3:
        raise TypeError(GRAY_CHANNELS_ERROR.format(channels=img.shape[-3], shape=img.shape))
    if num_output_channels not in (1, 3):
        raise ValueError(GRAY_OUTPUT_ERROR)
    r, g, b = img.unbind(dim=-3)
    gray = (0.2989 * r + 0.587 * g + 0.114 * b).to(img.dtype).unsqueeze(-3)
    if num_output_channels == 3:
        return gray.expand(img.shape)
    return gray


def _window_mask(
    tensor: torch.Tensor, N: int, time_pos: int, done_mask: torch.Tensor | None
) -> torch.Tensor:
    """``(*batch, time, N)``: True where a window slot reaches before its trajectory's start."""
    lead = tensor.shape[: time_pos + 1]
    if done_mask is None:
        steps = torch.arange(lead[-1], device=tensor.device)
        slots = torch.arange(N, device=tensor.device)
        return (slots[None, :] < (N - 1 - steps)[:, None]).expand(*lead, N)
    mask = done_mask.bool()
    if mask.ndim == len(lead) + 2 and mask.shape[-2] == 1:
        mask = mask.squeeze(-2)
    if mask.shape != torch.Size((*lead, N)):
        raise ValueError(
            DONE_MASK_SHAPE_ERROR.format(
                shape=tuple(done_mask.shape),
                tensor_shape=tuple(tensor.shape),
                time_dim=time_pos - tensor.ndim,
                N=N,
                lead=tuple(lead),
            )
        )
    return mask


def cat_frames(
    tensor: torch.Tensor,
    N: int,  # noqa: N803  (torchrl's argument name)
    dim: int,
    *,
    padding: Literal["same", "constant"] = "same",
    padding_value: float = 0.0,
    time_dim: int = -1,
    done_mask: torch.Tensor | None = None,
) -> torch.Tensor:
    """Concatenates, for each step along ``time_dim``, the ``N`` frames ending there along ``dim``.

    Window slot ``j`` of step ``t`` holds frame ``t - N + 1 + j`` (oldest first). Slots that
    reach before the start of the trajectory repeat its first frame (``padding="same"``) or hold
    ``padding_value`` (``padding="constant"``).

    Args:
        tensor: the frames, with a time axis at ``time_dim``.
        N: the number of frames per window.
        dim: the (negative) dim along which the frames are concatenated; its size is
            multiplied by ``N``.
        padding: ``"same"`` (default) or ``"constant"``.
        padding_value: the fill of ``"constant"`` padding.
        time_dim: the (negative) time dim (default -1).
        done_mask: ``(*batch, time, N)`` (or ``(*batch, time, 1, N)``) booleans flagging the
            window slots that reach across a trajectory boundary; by default only the first
            ``N - 1`` steps are padded (one trajectory).

    Raises:
        ValueError: ``padding`` unknown, ``dim`` or ``time_dim`` not negative, or a
            ``done_mask`` of the wrong shape.

    Examples:
        >>> frames = torch.arange(8.0).view(4, 2)
        >>> cat_frames(frames, N=3, dim=-1, time_dim=-2, padding="constant")
        tensor([[0., 0., 0., 0., 0., 1.],
                [0., 0., 0., 1., 2., 3.],
                [0., 1., 2., 3., 4., 5.],
                [2., 3., 4., 5., 6., 7.]])
        >>> cat_frames(frames, N=2, dim=-1, time_dim=-2)[0]
        tensor([0., 1., 0., 1.])
    """
    if padding not in ("same", "constant"):
        raise ValueError(PADDING_ERROR.format(padding=padding))
    if time_dim >= 0:
        raise ValueError(TIME_DIM_ERROR)
    if dim >= 0:
        raise ValueError(DIM_ERROR)
    time_pos = tensor.ndim + time_dim
    mask = _window_mask(tensor, N, time_pos, done_mask)
    steps = torch.arange(tensor.shape[time_pos], device=tensor.device).unsqueeze(-1)
    slots = torch.arange(N, device=tensor.device)
    if padding == "same":
        # padded slots form a prefix of the window: slot j reads slot max(j, n_padded)
        n_padded = mask.sum(-1, keepdim=True)
        slots = torch.maximum(slots, n_padded).clamp_max(N - 1)
    source = steps - (N - 1) + slots  # (*batch, time, N)
    # a slot left before the first frame holds the fill value (in both modes: "same" only
    # redirects the slots that done_mask flags)
    fill = source < 0
    if padding == "constant":
        fill = fill | mask
    source = source.clamp_min(0)
    trailing = (1,) * (tensor.ndim - time_pos - 1)
    value = torch.as_tensor(padding_value, dtype=tensor.dtype)
    frames = []
    for j in range(N):
        index = source[..., j].reshape(*source.shape[:-1], *trailing).expand(tensor.shape)
        frame = tensor.gather(time_pos, index)
        pad = fill[..., j].reshape(*fill.shape[:-1], *trailing)
        frames.append(torch.where(pad, value, frame))
    return torch.cat(frames, dim)

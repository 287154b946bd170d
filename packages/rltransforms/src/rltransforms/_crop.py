"""`Crop`: a fixed window of channel-first images."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F  # noqa: N812  (torch's usual alias)
from tensordict import NestedKey

from rlspecs import Composite, TensorSpec

from ._base import ObservationTransform, _spec_keys
from ._mapped_specs import spec_through

__all__ = ["Crop"]

IMAGE_NDIM_ERROR = "Crop: expected an image with at least 2 dims (..., H, W), got shape {shape}"


class Crop(ObservationTransform):
    """Crops images (`..., H, W`) to rows `[top, top + w)` and columns `[left, left + h)`.

    As torchrl's (which passes `w, h` to torchvision's `crop` as height and width), `w` is the
    size kept along dim -2 and `h` along dim -1. A window reaching past the image is padded
    with zeros, as torchvision does.

    Args:
        w: the number of rows kept.
        h: the number of columns kept (default: `w`).
        top: the first row (default 0).
        left: the first column (default 0).
        in_keys: the images (default `["pixels"]`).
        out_keys: where to write the crops (default: `in_keys`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(pixels=torch.arange(16.0).reshape(1, 4, 4))
        >>> Crop(2, 3, top=1, left=1)(td)["pixels"]
        tensor([[[ 5.,  6.,  7.],
                 [ 9., 10., 11.]]])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        top: int = 0,
        left: int = 0,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(in_keys=["pixels"] if in_keys is None else in_keys, out_keys=out_keys)
        self.w = int(w)
        self.h = int(h) if h else int(w)
        self.top = int(top)
        self.left = int(left)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.ndim < 2:
            raise ValueError(IMAGE_NDIM_ERROR.format(shape=tuple(obs.shape)))
        height, width = obs.shape[-2:]
        top, left = self.top, self.left
        bottom, right = top + self.w, left + self.h
        if top >= 0 and left >= 0 and bottom <= height and right <= width:
            return obs[..., top:bottom, left:right]
        # the part inside the image, padded with zeros up to the window (torchvision's rule)
        padding = (
            max(-left + min(0, right), 0),
            max(right - max(width, left), 0),
            max(-top + min(0, bottom), 0),
            max(bottom - max(height, top), 0),
        )
        inside = obs[..., max(top, 0) : max(bottom, 0), max(left, 0) : max(right, 0)]
        lead = inside.shape[:-2]
        flat = inside.reshape(-1, *inside.shape[-2:])
        out = F.pad(flat, padding)
        return out.reshape(*lead, *out.shape[-2:])

    def transform_observation_spec(self, observation_spec: TensorSpec) -> TensorSpec:
        if not isinstance(observation_spec, Composite):
            return spec_through("Crop", self.in_keys[0], observation_spec, self._apply_transform)
        keys = _spec_keys(observation_spec)
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in keys:
                observation_spec[out_key] = spec_through(
                    "Crop", in_key, observation_spec[in_key], self._apply_transform
                )
        return observation_spec

    def __repr__(self) -> str:
        return (
            f"Crop(w={self.w}, h={self.h}, top={self.top}, left={self.left}, "
            f"in_keys={self.in_keys})"
        )

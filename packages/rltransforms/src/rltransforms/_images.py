"""Image transforms on plain torch ops: `ToTensorImage`, `Resize`, `CenterCrop`, `GrayScale`.

Images are channel-first (`..., C, H, W`) once `ToTensorImage` has run; any number of leading
batch dims is accepted. No torchvision: resizing uses `torch.nn.functional.interpolate`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import NestedKey
from torch.nn import functional as F

from rlspecs import Composite, TensorSpec

from ._base import ObservationTransform
from ._mapped_specs import spec_through

__all__ = ["CenterCrop", "GrayScale", "Resize", "ToTensorImage"]

IMAGE_KEYS = ["pixels"]
INTERPOLATION_ERROR = "Resize: interpolation must be one of {modes}, got {mode!r}"
IMAGE_NDIM_ERROR = (
    "{cls}: expected an image with at least {ndim} dims ({layout}), got shape {shape}"
)
CHANNELS_ERROR = "GrayScale: expected 3 channels at dim -3 (..., C, H, W), got shape {shape}"
_MODES = ("nearest", "nearest-exact", "bilinear", "bicubic", "area")
_ANTIALIAS = ("bilinear", "bicubic")


def _check_ndim(cls: str, image: torch.Tensor, ndim: int, layout: str) -> None:
    if image.ndim < ndim:
        raise ValueError(
            IMAGE_NDIM_ERROR.format(cls=cls, ndim=ndim, layout=layout, shape=tuple(image.shape))
        )


class _ImageTransform(ObservationTransform):
    """Shared plumbing: default `pixels` keys, reset outputs transformed, specs through `fn`."""

    _call_on_reset = True

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None,
        out_keys: Sequence[NestedKey] | NestedKey | None,
    ) -> None:
        super().__init__(in_keys=IMAGE_KEYS if in_keys is None else in_keys, out_keys=out_keys)

    _keeps_bounds = True  # outputs are convex combinations of inputs: bounds map to bounds

    def _map_spec_at(self, key: NestedKey, spec: TensorSpec) -> TensorSpec:
        return spec_through(
            type(self).__name__, key, spec, self._apply_transform, self._keeps_bounds
        )

    def transform_observation_spec(self, observation_spec: Composite) -> Composite:
        if not isinstance(observation_spec, Composite):
            return self._map_spec_at(self.in_keys[0], observation_spec)
        keys = {k for k in observation_spec.keys(True, True)}
        for in_key, out_key in zip(self.in_keys, self.out_keys):
            if in_key in keys:
                observation_spec[out_key] = self._map_spec_at(in_key, observation_spec[in_key])
        return observation_spec


class ToTensorImage(_ImageTransform):
    """Turns channel-last images (`..., H, W, C`, often uint8) into channel-first floats.

    Integer images are scaled from [0, 255] to [0, 1] (`from_int=None` decides from the dtype:
    True for integer images, False for floating ones).

    Args:
        from_int: divide by 255 (True), never (False), or when the image is not floating (None).
        unsqueeze: add a leading dim to unbatched (3-dim) images.
        dtype: the output dtype (default: torch's default float dtype).
        in_keys: the images to convert (default `["pixels"]`).
        out_keys: where to write them (default: `in_keys`).
        shape_tolerant: leave images whose last dim is not 3 channel-last as they are (only
            the scaling and the dtype apply).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(pixels=torch.full((4, 5, 3), 255, dtype=torch.uint8))
        >>> out = ToTensorImage()(td)["pixels"]
        >>> out.shape, out.max().item()
        (torch.Size([3, 4, 5]), 1.0)
    """

    def __init__(
        self,
        from_int: bool | None = None,
        unsqueeze: bool = False,
        dtype: torch.dtype | None = None,
        *,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
        shape_tolerant: bool = False,
    ) -> None:
        super().__init__(in_keys, out_keys)
        self.from_int = from_int
        self.unsqueeze = unsqueeze
        self.dtype = torch.get_default_dtype() if dtype is None else dtype
        self.shape_tolerant = shape_tolerant

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        _check_ndim("ToTensorImage", obs, 3, "..., H, W, C")
        if not self.shape_tolerant or obs.shape[-1] == 3:
            obs = obs.movedim(-1, -3)
        from_int = not obs.is_floating_point() if self.from_int is None else self.from_int
        obs = obs.to(self.dtype)
        if from_int:
            obs = obs.div(255)
        if self.unsqueeze and obs.ndim == 3:
            obs = obs.unsqueeze(0)
        return obs

    def __repr__(self) -> str:
        return (
            f"ToTensorImage(in_keys={self.in_keys}, out_keys={self.out_keys}, "
            f"from_int={self.from_int}, dtype={self.dtype})"
        )


class Resize(_ImageTransform):
    """Resizes channel-first images (`..., C, H, W`) to `(w, h)` with `F.interpolate`.

    As in torchrl, `w` is the size of dim -2 and `h` the size of dim -1 (the output is
    `(..., C, w, h)`). Integer images are interpolated in float and rounded back.

    Args:
        w: size of dim -2 (or a `(w, h)` pair).
        h: size of dim -1 (default: `w`).
        interpolation: `"bilinear"` (default), `"bicubic"`, `"nearest"`, `"nearest-exact"` or
            `"area"`; bilinear and bicubic are antialiased, like torchvision's resize. Bicubic
            values can overshoot the input range, so its output spec is `Unbounded`.
        in_keys: the images to resize (default `["pixels"]`).
        out_keys: where to write them (default: `in_keys`).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(pixels=torch.rand(2, 3, 16, 16), batch_size=[2])
        >>> Resize(8, 4)(td)["pixels"].shape
        torch.Size([2, 3, 8, 4])
    """

    def __init__(
        self,
        w: int | Sequence[int],
        h: int | None = None,
        interpolation: str = "bilinear",
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        if isinstance(w, (list, tuple)):
            w, h = w
        interpolation = str(getattr(interpolation, "value", interpolation)).lower()
        if interpolation not in _MODES:
            raise ValueError(INTERPOLATION_ERROR.format(modes=_MODES, mode=interpolation))
        super().__init__(in_keys, out_keys)
        self.w = int(w)
        self.h = int(w if h is None else h)
        self.interpolation = interpolation
        # bicubic weights can be negative: values may overshoot the input range
        self._keeps_bounds = interpolation != "bicubic"

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        _check_ndim("Resize", obs, 3, "..., C, H, W")
        if obs.shape[-2:] == (self.w, self.h):
            return obs
        lead = obs.shape[:-3]
        flat = obs.reshape(-1, *obs.shape[-3:])
        data = flat if flat.is_floating_point() else flat.float()
        mode = self.interpolation
        kwargs = {"antialias": True, "align_corners": False} if mode in _ANTIALIAS else {}
        out = F.interpolate(data, size=(self.w, self.h), mode=mode, **kwargs)
        if not flat.is_floating_point():
            info = torch.iinfo(flat.dtype) if flat.dtype != torch.bool else None
            out = out.round()
            if info is not None:
                out = out.clamp(info.min, info.max)
            out = out.to(flat.dtype)
        return out.reshape(*lead, *out.shape[-3:])

    def __repr__(self) -> str:
        return (
            f"Resize(w={self.w}, h={self.h}, interpolation={self.interpolation!r}, "
            f"in_keys={self.in_keys})"
        )


class CenterCrop(_ImageTransform):
    """Crops the center `(w, h)` of channel-first images (`..., H, W`).

    As for `Resize`, `w` is the size kept along dim -2 and `h` along dim -1. When the margin is
    odd, the extra row/column is dropped at the end; a crop larger than the image pads it with
    zeros (both as torchvision does).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(pixels=torch.arange(16.0).reshape(1, 4, 4))
        >>> CenterCrop(2)(td)["pixels"]
        tensor([[[ 5.,  6.],
                 [ 9., 10.]]])
    """

    def __init__(
        self,
        w: int,
        h: int | None = None,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys)
        self.w = int(w)
        self.h = int(h) if h else int(w)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        _check_ndim("CenterCrop", obs, 2, "..., H, W")
        height, width = obs.shape[-2:]
        if self.w > height or self.h > width:
            # a crop larger than the image pads it with zeros first, as torchvision does
            pad_h, pad_w = max(self.w - height, 0), max(self.h - width, 0)
            padding = (pad_w // 2, (pad_w + 1) // 2, pad_h // 2, (pad_h + 1) // 2)
            lead = obs.shape[:-2]
            obs = F.pad(obs.reshape(-1, height, width), padding).reshape(
                *lead, height + pad_h, width + pad_w
            )
            height, width = obs.shape[-2:]
        top = int(round((height - self.w) / 2.0))
        left = int(round((width - self.h) / 2.0))
        return obs[..., top : top + self.w, left : left + self.h]

    def __repr__(self) -> str:
        return f"CenterCrop(w={self.w}, h={self.h}, in_keys={self.in_keys})"


class GrayScale(_ImageTransform):
    """Turns channel-first RGB images (`..., 3, H, W`) into one-channel luminance (`..., 1, H, W`).

    Uses the ITU-R 601-2 luma weights (0.2989, 0.587, 0.114), keeping the input dtype.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> td = TensorDict(pixels=torch.ones(3, 2, 2))
        >>> GrayScale()(td)["pixels"].shape
        torch.Size([1, 2, 2])
    """

    def __init__(
        self,
        in_keys: Sequence[NestedKey] | NestedKey | None = None,
        out_keys: Sequence[NestedKey] | NestedKey | None = None,
    ) -> None:
        super().__init__(in_keys, out_keys)

    def _apply_transform(self, obs: torch.Tensor) -> torch.Tensor:
        if obs.ndim < 3 or obs.shape[-3] != 3:
            raise ValueError(CHANNELS_ERROR.format(shape=tuple(obs.shape)))
        r, g, b = obs.unbind(-3)
        return (0.2989 * r + 0.587 * g + 0.114 * b).to(obs.dtype).unsqueeze(-3)

    def __repr__(self) -> str:
        return f"GrayScale(in_keys={self.in_keys})"

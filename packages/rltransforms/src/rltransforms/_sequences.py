"""Sub-sequences of stored trajectories: `RandomCropTensorDict`."""

from __future__ import annotations

import warnings

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlcore import EnvBase
from rlspecs import Composite

from ._base import Transform

__all__ = ["RandomCropTensorDict"]

SUB_SEQ_LEN_ERROR = "RandomCropTensorDict: sub_seq_len must be an int >= 1, got {value!r}"
POSITIVE_DIM_WARNING = (
    "A positive shape has been passed to the RandomCropTensorDict constructor. This may have "
    "unexpected behaviours when the passed tensordicts have inconsistent batch dimensions. For "
    "context, by convention, TorchRL concatenates time steps along the last dimension of the "
    "tensordict."
)
EMPTY_SHAPE_ERROR = "Cannot sub-sample from a tensordict with an empty shape."
SAMPLE_DIM_ERROR = (
    "RandomCropTensorDict: sample_dim={dim} is not a dimension of a tensordict of batch size "
    "{shape}; expected a dim in [-{ndim}, {ndim})"
)
TOO_SHORT_ERROR = (
    "Cannot sample trajectories of length {length} along dimension {dim} given a tensordict of "
    "shape {shape}. Consider reducing the sub_seq_len parameter or increase sample length."
)
MASK_SHAPE_ERROR = (
    "Expected a mask of the same shape as the tensordict. Got mask.shape={mask_shape} (key "
    "{key!r}) and tensordict.shape={shape} instead."
)
MASK_DTYPE_ERROR = "RandomCropTensorDict: mask {key!r} must be a bool tensor, got dtype {dtype}"
MASK_TOO_SHORT_ERROR = (
    "Cannot sample trajectories of length {length} when the minimum trajectory length is "
    "{shortest} (mask {key!r})."
)
ENV_ERROR = (
    "RandomCropTensorDict cannot be used as an environment transform (as in torchrl 0.4, it "
    "crops sampled trajectories: call it on the data, e.g. in a replay buffer or a module)"
)


class RandomCropTensorDict(Transform):
    """Crops a random sub-sequence of `sub_seq_len` steps along `sample_dim` of a tensordict.

    Meant for trajectories sampled from a replay buffer (batch size `[B, T]`, time last): each
    of the `B` trajectories (each slice along the other batch dims) gets its own random start,
    uniform over every start that keeps the crop inside it, `0` to `T - sub_seq_len`, and the
    result has batch size `[B, sub_seq_len]`. With `mask_key`, the bool entry there (shape
    `[B, T]`: True for the valid steps, which come first) bounds each trajectory: crops stay
    within the valid steps. A tensordict without that entry is cropped as if every step were
    valid (as in torchrl 0.4).

    As in torchrl 0.4 this transform works on data (`t(td)`), not in an env: putting it in a
    `TransformedEnv` (directly or in a `Compose`) raises `RuntimeError`.

    Args:
        sub_seq_len: the length of the crops.
        sample_dim: the batch dim to crop (default -1, the time dim). A positive dim warns:
            tensordicts of varying batch dims would be cropped along different dims.
        mask_key: the key of the valid-step mask, if any.

    Raises:
        RuntimeError: the tensordict has no batch dim, or fewer than `sub_seq_len` steps (or,
            with a mask, a trajectory has fewer than `sub_seq_len` valid steps).
        IndexError: `sample_dim` is not a batch dim of the tensordict.
        ValueError: the mask's shape is not the tensordict's batch size.
        TypeError: the mask is not a bool tensor.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> data = TensorDict(obs=torch.arange(10).expand(3, 10), batch_size=[3, 10])
        >>> crop = RandomCropTensorDict(sub_seq_len=4)(data)
        >>> crop.batch_size
        torch.Size([3, 4])
        >>> bool((crop["obs"].diff(dim=-1) == 1).all())  # consecutive steps
        True
    """

    def __init__(
        self, sub_seq_len: int, sample_dim: int = -1, mask_key: NestedKey | None = None
    ) -> None:
        if isinstance(sub_seq_len, bool) or not isinstance(sub_seq_len, int) or sub_seq_len < 1:
            raise ValueError(SUB_SEQ_LEN_ERROR.format(value=sub_seq_len))
        if sample_dim > 0:
            warnings.warn(POSITIVE_DIM_WARNING, UserWarning, stacklevel=2)
        super().__init__()
        self.sub_seq_len = sub_seq_len
        self.sample_dim = sample_dim
        self.mask_key = None if mask_key is None else unravel_key(mask_key)

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """A random crop of `sub_seq_len` steps along `sample_dim` of each trajectory."""
        shape = tensordict.batch_size
        if not shape:
            raise RuntimeError(EMPTY_SHAPE_ERROR)
        ndim, dim = len(shape), self.sample_dim
        if not -ndim <= dim < ndim:
            raise IndexError(SAMPLE_DIM_ERROR.format(dim=dim, shape=tuple(shape), ndim=ndim))
        dim = dim % ndim
        length = self.sub_seq_len
        if shape[dim] < length:
            raise RuntimeError(
                TOO_SHORT_ERROR.format(length=length, dim=self.sample_dim, shape=shape)
            )
        start_shape = list(shape)
        start_shape[dim] = 1
        device = tensordict.device or torch.device("cpu")
        mask = None if self.mask_key is None else tensordict.get(self.mask_key, None)
        if mask is None:
            # every start in [0, T - sub_seq_len]
            starts = torch.randint(shape[dim] - length + 1, start_shape, device=device)
        else:
            steps = self._valid_steps(mask, shape, dim)
            # every start in [0, valid steps - sub_seq_len], per trajectory
            span = steps - length + 1
            starts = (torch.rand(start_shape, device=steps.device) * span).long()
            starts = torch.minimum(starts, span - 1)
        offsets_shape = [1] * ndim
        offsets_shape[dim] = length
        offsets = torch.arange(length, device=starts.device).view(offsets_shape)
        return tensordict.gather(dim=dim, index=starts + offsets)

    def _valid_steps(self, mask: torch.Tensor, shape: torch.Size, dim: int) -> torch.Tensor:
        """The number of valid steps of each trajectory (shape `shape` with 1 at `dim`)."""
        if mask.shape != shape:
            raise ValueError(
                MASK_SHAPE_ERROR.format(mask_shape=mask.shape, key=self.mask_key, shape=shape)
            )
        if mask.dtype != torch.bool:
            raise TypeError(MASK_DTYPE_ERROR.format(key=self.mask_key, dtype=mask.dtype))
        steps = mask.sum(dim, keepdim=True)
        shortest = int(steps.min())
        if shortest < self.sub_seq_len:
            raise RuntimeError(
                MASK_TOO_SHORT_ERROR.format(
                    length=self.sub_seq_len, shortest=shortest, key=self.mask_key
                )
            )
        return steps

    def set_container(self, container: Transform | EnvBase | None) -> None:
        # refused before it joins an env (directly or through a Compose), so the env stays intact
        if isinstance(container, EnvBase) or (
            isinstance(container, Transform) and container.container is not None
        ):
            raise RuntimeError(ENV_ERROR)
        super().set_container(container)

    def transform_output_spec(self, output_spec: Composite) -> Composite:
        # a Compose holding this transform was put in an env
        if self.container is not None:
            raise RuntimeError(ENV_ERROR)
        return output_spec

    def __repr__(self) -> str:
        return (
            f"RandomCropTensorDict(sub_seq_len={self.sub_seq_len}, "
            f"sample_dim={self.sample_dim}, mask_key={self.mask_key!r})"
        )

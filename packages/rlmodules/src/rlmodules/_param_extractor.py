"""NormalParamExtractor: splits a network's output into a location and a positive scale."""

from __future__ import annotations

from numbers import Number

import torch
from tensordict.nn import NormalParamExtractor as _TensorDictNormalParamExtractor
from tensordict.nn import mappings

__all__ = ["NormalParamExtractor"]

_UNKNOWN_MAPPING = (
    "Unknown mapping {name!r} for scale_mapping; choose one of 'softplus', 'exp', 'relu', "
    "'expln', 'none', 'biased_softplus', 'biased_softplus_<bias>' or "
    "'biased_softplus_<bias>_<min_val>' (e.g. 'biased_softplus_1.0'), or register one with "
    "tensordict.nn.add_custom_mapping."
)
_BAD_BIASED_SOFTPLUS = (
    "Invalid scale_mapping {name!r}: write 'biased_softplus_<bias>' or "
    "'biased_softplus_<bias>_<min_val>' with numbers, e.g. 'biased_softplus_1.0' ({reason})."
)
_MAPPING_TYPE = "scale_mapping must be a mapping name (str), got {type}."
_ODD_LAST_DIM = (
    "NormalParamExtractor splits the last dim in two halves (loc, scale), so it must be even; "
    "got a tensor of shape {shape}."
)


def _scale_mapping(name: str):
    if not isinstance(name, str):
        raise TypeError(_MAPPING_TYPE.format(type=type(name).__name__))
    try:
        return mappings(name)
    except NotImplementedError:
        raise NotImplementedError(_UNKNOWN_MAPPING.format(name=name)) from None
    except ValueError as err:
        raise ValueError(_BAD_BIASED_SOFTPLUS.format(name=name, reason=err)) from None


class NormalParamExtractor(_TensorDictNormalParamExtractor):
    """Splits its first input's last dim into ``loc`` and a positive ``scale``.

    The second half goes through ``scale_mapping`` and is clamped below at ``scale_lb``.
    Further inputs are passed through after ``(loc, scale)``. This is tensordict's
    ``NormalParamExtractor`` (torchrl's), checking its arguments up front.

    Args:
        scale_mapping: how the scale half is made positive: ``"biased_softplus_1.0"``
            (softplus shifted so that 0 maps to 1.0; ``"biased_softplus_<bias>"`` and
            ``"biased_softplus_<bias>_<min_val>"`` in general), ``"softplus"``, ``"exp"``,
            ``"relu"``, ``"expln"`` or ``"none"``.
        scale_lb: the smallest scale returned (1e-4).

    Raises:
        NotImplementedError: for an unknown mapping name (as torchrl).
        ValueError: for a ``biased_softplus_...`` name whose parameters are not numbers, and
            at call time for an odd last dim.

    Examples:
        >>> import torch
        >>> from rlmodules import NormalParamExtractor
        >>> loc, scale = NormalParamExtractor()(torch.zeros(3, 4))
        >>> loc.shape, scale
        (torch.Size([3, 2]), tensor([[1., 1.],
                [1., 1.],
                [1., 1.]]))
        >>> NormalParamExtractor("exp", scale_lb=0.5)(torch.full((4,), -10.0))[1]
        tensor([0.5000, 0.5000])
    """

    def __init__(
        self,
        scale_mapping: str = "biased_softplus_1.0",
        scale_lb: Number = 1e-4,
    ) -> None:
        _scale_mapping(scale_mapping)
        super().__init__(scale_mapping=scale_mapping, scale_lb=scale_lb)
        self.scale_mapping_name = scale_mapping

    def forward(self, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Returns ``(loc, scale, *other_inputs)``."""
        if tensors and tensors[0].shape[-1] % 2:
            raise ValueError(_ODD_LAST_DIM.format(shape=tuple(tensors[0].shape)))
        return super().forward(*tensors)

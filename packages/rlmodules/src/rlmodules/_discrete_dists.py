"""Discrete policy distributions: OneHotCategorical and MaskedCategorical (torchrl 0.4)."""

from __future__ import annotations

from collections.abc import Sequence
from enum import Enum

import torch
from torch import distributions as D

__all__ = ["MaskedCategorical", "OneHotCategorical", "ReparamGradientStrategy"]

_MASK_XOR_INDICES = (
    "A ``mask`` or some ``indices`` must be provided for {cls}, but not both "
    "(got mask={mask}, indices={indices})."
)
_LOGITS_XOR_PROBS = "Either `probs` or `logits` must be specified, but not both."
_NO_PARAMS = "{cls} needs `logits` or `probs`; got neither."
_MASK_SHAPE = (
    "{cls}: the mask must have the shape of the {param} {shape} (or broadcast to it), "
    "got {mask_shape}."
)
_MASK_DTYPE = "{cls}: the mask must be a bool tensor (False marks a masked outcome), got {dtype}."
_INDICES_DTYPE = "{cls}: indices must be an integer tensor of valid outcomes, got {dtype}."
_UNKNOWN_STRATEGY = "Unknown reparametrization strategy {strategy}; use a ReparamGradientStrategy."


class ReparamGradientStrategy(Enum):
    """How ``OneHotCategorical.rsample`` passes gradients through a discrete sample.

    ``PassThrough`` adds ``probs - probs.detach()`` to the sample (straight-through);
    ``RelaxedOneHot`` samples a relaxed one-hot and rounds its values to the argmax.
    """

    PassThrough = 1
    RelaxedOneHot = 2


def _squeeze_singleton(params: torch.Tensor | None) -> torch.Tensor | None:
    # torchrl 0.4 reads a trailing singleton dim as "the outcomes are the dim before"
    if params is not None and params.shape[-1] == 1:
        return params[..., 0]
    return params


class OneHotCategorical(D.Categorical):
    """A categorical distribution that reads and writes one-hot encodings.

    Behaves as ``torch.distributions.Categorical`` except that samples, ``mode`` and the
    values given to ``log_prob`` are one-hot (``torch.long`` for ``sample``/``mode``).
    ``rsample`` returns a float one-hot sample carrying gradients as ``grad_method`` says.

    Args:
        logits: unnormalised log-probabilities of the outcomes (last dim).
        probs: probabilities of the outcomes (last dim).
        grad_method: a ``ReparamGradientStrategy`` for ``rsample`` (``PassThrough``).

    Examples:
        >>> import torch
        >>> from rlmodules import OneHotCategorical
        >>> dist = OneHotCategorical(logits=torch.tensor([0.0, 5.0, 0.0]))
        >>> dist.mode
        tensor([0, 1, 0])
        >>> dist.sample((2,)).shape
        torch.Size([2, 3])
        >>> dist.log_prob(torch.tensor([0, 1, 0])).exp() > 0.9
        tensor(True)
    """

    num_params: int = 1

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        grad_method: ReparamGradientStrategy = ReparamGradientStrategy.PassThrough,
        **kwargs,
    ) -> None:
        logits = _squeeze_singleton(logits)
        probs = _squeeze_singleton(probs)
        if (logits is None) == (probs is None):
            raise ValueError(_LOGITS_XOR_PROBS)
        self.grad_method = grad_method
        kwargs.setdefault("validate_args", False)
        super().__init__(probs=probs, logits=logits, **kwargs)
        self.num_samples = self._param.shape[-1]

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """The log-probability of a one-hot ``value``."""
        return super().log_prob(value.argmax(dim=-1))

    @property
    def mode(self) -> torch.Tensor:
        """The most likely outcome, one-hot (``torch.long``)."""
        return (self.logits == self.logits.max(-1, True)[0]).to(torch.long)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The action ``ExplorationType.DETERMINISTIC`` takes: ``mode``."""
        return self.mode

    def sample(self, sample_shape: Sequence[int] | None = None) -> torch.Tensor:
        """One-hot samples (``torch.long``) of shape ``sample_shape + batch_shape + (n,)``."""
        index = super().sample(torch.Size(sample_shape or ()))
        return torch.nn.functional.one_hot(index, self.num_samples)

    def rsample(self, sample_shape: Sequence[int] | None = None) -> torch.Tensor:
        """Float one-hot samples that carry gradients to the probabilities."""
        sample_shape = torch.Size(sample_shape or ())
        if self.grad_method == ReparamGradientStrategy.RelaxedOneHot:
            relaxed = D.RelaxedOneHotCategorical(1.0, logits=self.logits)
            out = relaxed.rsample(sample_shape)
            out.data.copy_((out == out.max(-1, True)[0]).to(out.dtype))
            return out
        if self.grad_method == ReparamGradientStrategy.PassThrough:
            probs = self.probs
            return self.sample(sample_shape) + probs - probs.detach()
        raise ValueError(_UNKNOWN_STRATEGY.format(strategy=self.grad_method))


class MaskedCategorical(D.Categorical):
    """A categorical distribution over the outcomes a mask allows.

    Masked outcomes get the log-probability ``neg_inf`` and are never sampled. The allowed
    outcomes are given either as a bool ``mask`` over all outcomes, or as ``indices``: an
    integer tensor listing them (rows may be padded with ``padding_value``, and the
    ``logits``/``probs`` then cover every outcome).

    Args:
        logits: unnormalised log-probabilities of all outcomes (last dim).
        probs: probabilities of all outcomes; masked ones are zeroed and the rest renormalised.

    Keyword Args:
        mask: bool tensor shaped like ``logits``, ``False`` marking masked outcomes.
            Exclusive with ``indices``.
        indices: integer tensor of the allowed outcomes. Exclusive with ``mask``.
        neg_inf: the log-probability of masked outcomes (``-inf``).
        padding_value: the value padding the rows of ``indices``.

    Raises:
        ValueError: when both or neither of ``mask``/``indices``, or of ``logits``/``probs``,
            are given, or when the mask does not fit the parameters.

    Examples:
        >>> import torch
        >>> from rlmodules import MaskedCategorical
        >>> dist = MaskedCategorical(logits=torch.zeros(4), mask=torch.tensor([True, False, True, True]))
        >>> bool((dist.sample((100,)) != 1).all())
        True
        >>> dist.log_prob(torch.tensor([0, 1]))
        tensor([-1.0986,    -inf])
        >>> sparse = MaskedCategorical(logits=torch.zeros(4), indices=torch.tensor([0, 2, 3]))
        >>> sparse.log_prob(torch.tensor([0, 1]))
        tensor([-1.0986,    -inf])
    """

    def __init__(
        self,
        logits: torch.Tensor | None = None,
        probs: torch.Tensor | None = None,
        *,
        mask: torch.Tensor | None = None,
        indices: torch.Tensor | None = None,
        neg_inf: float = float("-inf"),
        padding_value: int | None = None,
    ) -> None:
        cls = type(self).__name__
        if (mask is None) == (indices is None):
            raise ValueError(
                _MASK_XOR_INDICES.format(cls=cls, mask=_describe(mask), indices=_describe(indices))
            )
        if logits is not None and probs is not None:
            raise ValueError(_LOGITS_XOR_PROBS)
        if logits is None and probs is None:
            raise ValueError(_NO_PARAMS.format(cls=cls))
        sparse = mask is None
        param = logits if logits is not None else probs
        if sparse:
            if indices.dtype.is_floating_point or indices.dtype == torch.bool:
                raise ValueError(_INDICES_DTYPE.format(cls=cls, dtype=indices.dtype))
            batch = torch.broadcast_shapes(param.shape[:-1], indices.shape[:-1])
            mask = indices.expand(*batch, indices.shape[-1])
        else:
            if mask.dtype != torch.bool:
                raise ValueError(_MASK_DTYPE.format(cls=cls, dtype=mask.dtype))
            try:
                torch.broadcast_shapes(mask.shape, param.shape)
            except RuntimeError:
                raise ValueError(
                    _MASK_SHAPE.format(
                        cls=cls,
                        param="logits" if logits is not None else "probs",
                        shape=tuple(param.shape),
                        mask_shape=tuple(mask.shape),
                    )
                ) from None
        if probs is not None:
            if not sparse:
                probs = probs.masked_fill(~mask, 0.0)
                probs = probs / probs.sum(-1, keepdim=True)
            logits = probs.log()
        self.num_samples = logits.shape[-1]
        logits = self._mask_logits(logits, mask, neg_inf, sparse, padding_value)
        self.neg_inf = neg_inf
        self._mask = mask
        self._sparse_mask = sparse
        self._padding_value = padding_value
        super().__init__(logits=logits, validate_args=False)

    @staticmethod
    def _mask_logits(
        logits: torch.Tensor,
        mask: torch.Tensor,
        neg_inf: float,
        sparse: bool,
        padding_value: int | None,
    ) -> torch.Tensor:
        if not sparse:
            return logits.masked_fill(~mask, neg_inf)
        padding = None
        if padding_value is not None:
            padding = mask == padding_value
            # a padding value outside [0, n) would be an invalid index for gather
            mask = mask.masked_fill(padding, 0)
        logits = logits.expand(*mask.shape[:-1], logits.shape[-1]).gather(-1, mask)
        if padding is not None:
            logits = logits.masked_fill(padding, neg_inf)
        return logits

    def _to_outcome(self, position: torch.Tensor) -> torch.Tensor:
        """Maps positions in the list of allowed outcomes back to outcomes (sparse masks)."""
        indices = self._mask.expand(*position.shape, self._mask.shape[-1])
        return indices.gather(-1, position.unsqueeze(-1)).squeeze(-1)

    def sample(self, sample_shape: Sequence[int] | None = None) -> torch.Tensor:
        """Outcome indices of shape ``sample_shape + batch_shape``; masked ones never appear."""
        out = super().sample(torch.Size(sample_shape or ()))
        return self._to_outcome(out) if self._sparse_mask else out

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """The log-probability of outcome indices (``neg_inf`` for masked ones)."""
        if not self._sparse_mask:
            return super().log_prob(value)
        matches = self._mask == value.unsqueeze(-1)
        if self._padding_value is not None:
            matches = matches & (self._mask != self._padding_value)
        position = matches.int().argmax(-1)
        log_prob = super().log_prob(position)
        return log_prob.masked_fill(~matches.any(-1), self.neg_inf)

    @property
    def mode(self) -> torch.Tensor:
        """The most likely allowed outcome."""
        position = self.logits.argmax(-1)
        return self._to_outcome(position) if self._sparse_mask else position

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The action ``ExplorationType.DETERMINISTIC`` takes: ``mode``."""
        return self.mode


def _describe(tensor: torch.Tensor | None) -> str:
    return "None" if tensor is None else f"a tensor of shape {tuple(tensor.shape)}"

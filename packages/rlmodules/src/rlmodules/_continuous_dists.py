"""Continuous policy distributions: TanhNormal, IndependentNormal, Delta and TanhDelta.

All of them follow torchrl 0.4 (names, arguments, errors) and answer the exploration types:
``mode`` and ``deterministic_sample`` give the deterministic action, ``sample``/``rsample`` a
random one. Bounds are ``low``/``high`` (current torchrl) or ``min``/``max`` (torchrl 0.4).
Argument validation of ``torch.distributions`` is switched off for these classes only (torchrl
0.4 switched it off globally); the constructors check what matters themselves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from numbers import Number

import torch
from torch import distributions as D
from torch.distributions import constraints

__all__ = ["Delta", "IndependentNormal", "TanhDelta", "TanhNormal"]

_BOUNDS_ORDER_NORMAL = (
    "TanhNormal max values must be strictly greater than min values (high > low); "
    "got low={low}, high={high}."
)
_BOUNDS_ORDER_DELTA = (
    "TanhDelta max value has been found to be equal or less than min value (high must be "
    "greater than low); got low={low}, high={high}."
)
_BOUND_TWICE = "{cls} got both {new}= and {old}= for the same bound; pass only one of them."
_NO_MEAN = (
    "{cls} does not have a closed form formula for the average. Estimate it with "
    "dist.sample((N,)).mean(0) for a large N, or use ExplorationType.DETERMINISTIC / MODE."
)
_DELTA_NO_MEAN = "TanhDelta mean has not analytical form."


class NoClosedFormMean(NotImplementedError, AttributeError):
    """A distribution's mean that has no closed form: torchrl's ``NotImplementedError``, and an
    ``AttributeError`` too, so that ``hasattr(dist, "mean")`` is False (tensordict 0.14's
    ``ExplorationType.MEAN`` asks that before falling back to an empirical estimate)."""


Bound = torch.Tensor | Number


def _safe_tanh(x: torch.Tensor) -> torch.Tensor:
    """tanh kept strictly inside (-1, 1), so that atanh of the result is finite.

    The clamp is applied to the value only: the gradient is tanh's own (1 - tanh(x)^2).
    """
    lim = 1.0 - torch.finfo(x.dtype).resolution
    y = x.tanh()
    return y + (y.clamp(-lim, lim) - y).detach()


def _safe_atanh(y: torch.Tensor) -> torch.Tensor:
    """atanh of ``y`` clamped inside (-1, 1); the clamp passes gradients through unchanged."""
    lim = 1.0 - torch.finfo(y.dtype).resolution
    return (y + (y.clamp(-lim, lim) - y).detach()).atanh()


class _SafeTanhTransform(D.TanhTransform):
    """A TanhTransform whose forward and inverse stay finite at the edges of (-1, 1)."""

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        return _safe_tanh(x)

    def _inverse(self, y: torch.Tensor) -> torch.Tensor:
        return _safe_atanh(y)


def _resolve_bound(cls: str, new_name: str, new: Bound | None, old_name: str, old: Bound | None):
    if new is not None and old is not None:
        raise TypeError(_BOUND_TWICE.format(cls=cls, new=new_name, old=old_name))
    return old if new is None else new


def _as_bound(value: Bound, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(value, device=like.device, dtype=like.dtype)


def _squash_transform(low: torch.Tensor, high: torch.Tensor, safe: bool) -> D.Transform:
    """tanh, then the affine map from (-1, 1) onto (low, high) when the bounds are not (-1, 1)."""
    tanh = _SafeTanhTransform() if safe else D.TanhTransform()
    if bool((low != -1.0).any()) or bool((high != 1.0).any()):
        return D.ComposeTransform(
            [tanh, D.AffineTransform(loc=(high + low) / 2, scale=(high - low) / 2)]
        )
    return tanh


class IndependentNormal(D.Independent):
    """A Normal distribution whose last ``event_dim`` dims form one event.

    With ``tanh_loc=True`` the location is squashed as ``upscale * tanh(loc / upscale)``, which
    keeps it from drifting far from 0.

    Args:
        loc: the mean.
        scale: the standard deviation (a tensor, a number or a callable of ``loc``).
        upscale: the ``upscale`` of the formula above (5.0).
        tanh_loc: apply the formula above (``False``).
        event_dim: number of trailing dims forming an event (1).

    Examples:
        >>> import torch
        >>> from rlmodules import IndependentNormal
        >>> dist = IndependentNormal(torch.zeros(3, 2), torch.ones(3, 2))
        >>> dist.sample((4,)).shape, dist.log_prob(torch.zeros(3, 2)).shape
        (torch.Size([4, 3, 2]), torch.Size([3]))
        >>> dist.mode
        tensor([[0., 0.],
                [0., 0.],
                [0., 0.]])
    """

    num_params: int = 2

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor | float | Callable[[torch.Tensor], torch.Tensor],
        upscale: float = 5.0,
        tanh_loc: bool = False,
        event_dim: int = 1,
        **kwargs,
    ) -> None:
        self.tanh_loc = tanh_loc
        self.upscale = upscale
        self._event_dim = event_dim
        self._kwargs = kwargs
        self.update(loc, scale)

    def update(self, loc: torch.Tensor, scale) -> None:
        """Rebuilds the distribution with new parameters."""
        if self.tanh_loc:
            loc = self.upscale * (loc / self.upscale).tanh()
        scale = _as_scale(scale, loc)
        normal = D.Normal(loc, scale, validate_args=False, **self._kwargs)
        super().__init__(normal, self._event_dim, validate_args=False)

    @property
    def mode(self) -> torch.Tensor:
        """The mean of the normal (its mode)."""
        return self.base_dist.mean

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The action ``ExplorationType.DETERMINISTIC`` takes: the mean."""
        return self.base_dist.mean


def _as_scale(scale, loc: torch.Tensor) -> torch.Tensor:
    if callable(scale) and not isinstance(scale, torch.Tensor):
        return scale(loc)
    if not isinstance(scale, torch.Tensor):
        return torch.as_tensor(scale, device=loc.device, dtype=loc.dtype)
    return scale


class TanhNormal(D.TransformedDistribution):
    """A Normal squashed by tanh into ``(low, high)``: the usual continuous-control policy.

    Samples are ``tanh(x)`` (then mapped affinely onto ``(low, high)``) with ``x`` drawn from
    ``Normal(loc, scale)``; ``log_prob`` accounts for the squashing. With ``tanh_loc=True``
    the location is first squashed as ``upscale * tanh(loc / upscale)``.

    ``mode`` and ``deterministic_sample`` are the squashed location (torchrl 0.4's ``mode``;
    current torchrl raises on ``mode`` and keeps only ``deterministic_sample``). ``mean`` has
    no closed form: it raises ``NotImplementedError`` and ``ExplorationType.MEAN`` falls back
    on an empirical mean of samples.

    Args:
        loc: the location of the normal.
        scale: its standard deviation (a tensor, a number or a callable of ``loc``).
        upscale: the ``upscale`` of the location squashing (5.0).
        low: the lower bound (-1.0); torchrl 0.4's ``min`` is accepted as a keyword.
        high: the upper bound (1.0); torchrl 0.4's ``max`` is accepted as a keyword.
        event_dims: number of trailing dims forming one action; ``log_prob`` sums over them
            (1, or 0 for a scalar ``loc``).
        tanh_loc: squash the location as above (``False``).
        safe_tanh: keep samples strictly inside the bounds so that ``log_prob`` stays finite.

    Raises:
        RuntimeError: when ``high`` is not greater than ``low`` everywhere.

    Examples:
        >>> import torch
        >>> from rlmodules import TanhNormal
        >>> dist = TanhNormal(torch.zeros(5, 2), torch.ones(5, 2), low=-2.0, high=2.0)
        >>> sample = dist.rsample((3,))
        >>> sample.shape, dist.log_prob(sample).shape
        (torch.Size([3, 5, 2]), torch.Size([3, 5]))
        >>> bool(sample.abs().max() < 2.0)
        True
        >>> TanhNormal(torch.tensor([0.5]), torch.ones(1), min=0.0, max=1.0).mode
        tensor([0.7311])
    """

    arg_constraints = {"loc": constraints.real, "scale": constraints.greater_than(1e-6)}
    num_params: int = 2

    def __init__(
        self,
        loc: torch.Tensor,
        scale: torch.Tensor | float | Callable[[torch.Tensor], torch.Tensor],
        upscale: torch.Tensor | Number = 5.0,
        low: Bound | None = None,
        high: Bound | None = None,
        event_dims: int | None = None,
        tanh_loc: bool = False,
        safe_tanh: bool = True,
        *,
        min: Bound | None = None,  # torchrl 0.4's name for low
        max: Bound | None = None,  # torchrl 0.4's name for high
    ) -> None:
        if not isinstance(loc, torch.Tensor):
            loc = torch.as_tensor(loc, dtype=torch.get_default_dtype())
        low = _resolve_bound("TanhNormal", "low", low, "min", min)
        high = _resolve_bound("TanhNormal", "high", high, "max", max)
        low = _as_bound(-1.0 if low is None else low, loc)
        high = _as_bound(1.0 if high is None else high, loc)
        if not bool((high > low).all()):
            raise RuntimeError(_BOUNDS_ORDER_NORMAL.format(low=low.tolist(), high=high.tolist()))
        self.low = low
        self.high = high
        self.upscale = upscale.to(loc.device) if isinstance(upscale, torch.Tensor) else upscale
        self.tanh_loc = tanh_loc
        self._event_dims = _default_event_dims(loc) if event_dims is None else event_dims
        self._shift = bool((low != -1.0).any()) or bool((high != 1.0).any())
        self._t = _squash_transform(low, high, safe_tanh)
        self.update(loc, scale)

    def update(self, loc: torch.Tensor, scale) -> None:
        """Rebuilds the distribution with new parameters (same bounds and options)."""
        if self.tanh_loc:
            loc = (loc / self.upscale).tanh() * self.upscale
            if self._shift:
                loc = loc + (self.high - self.low) / 2 + self.low
        scale = _as_scale(scale, loc)
        self.loc = loc
        self.scale = scale
        base = D.Normal(loc, scale, validate_args=False)
        if self._event_dims > 0:
            base = D.Independent(base, self._event_dims, validate_args=False)
        super().__init__(base, self._t, validate_args=False)

    @property
    def min(self) -> torch.Tensor:
        """The lower bound (torchrl 0.4's name for ``low``)."""
        return self.low

    @property
    def max(self) -> torch.Tensor:
        """The upper bound (torchrl 0.4's name for ``high``)."""
        return self.high

    @property
    def root_dist(self) -> D.Normal:
        """The innermost Normal."""
        dist = self.base_dist
        while hasattr(dist, "base_dist"):
            dist = dist.base_dist
        return dist

    @property
    def mode(self) -> torch.Tensor:
        """The squashed location (torchrl 0.4)."""
        return self._t(self.root_dist.mean)

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The action ``ExplorationType.DETERMINISTIC`` takes: the squashed location."""
        return self._t(self.root_dist.mean)

    @property
    def mean(self) -> torch.Tensor:
        """Raises ``NotImplementedError``: the squashed normal's mean has no closed form."""
        raise NoClosedFormMean(_NO_MEAN.format(cls=type(self).__name__))


def _default_event_dims(loc: torch.Tensor) -> int:
    """The default ``event_dims``: 1, or 0 for a scalar location."""
    return 1 if loc.ndim else 0


class Delta(D.Distribution):
    """A distribution that always returns its parameter: a deterministic policy's distribution.

    ``log_prob`` is ``+inf`` for values within ``atol + rtol * |param|`` of the parameter
    (over the whole event) and ``-inf`` elsewhere.

    Args:
        param: the value of the distribution.
        atol: absolute tolerance of ``log_prob``'s comparison (1e-6).
        rtol: relative tolerance of ``log_prob``'s comparison (1e-6).
        batch_shape: the batch shape; by default all dims of ``param`` but the last.
        event_shape: the event shape; by default the last dim of ``param``.

    Examples:
        >>> import torch
        >>> from rlmodules import Delta
        >>> dist = Delta(torch.tensor([[1.0, 2.0]]))
        >>> dist.sample((2,)).shape
        torch.Size([2, 1, 2])
        >>> dist.log_prob(torch.tensor([[1.0, 2.0]])), dist.log_prob(torch.tensor([[1.0, 0.0]]))
        (tensor([inf]), tensor([-inf]))
    """

    arg_constraints: dict = {}

    def __init__(
        self,
        param: torch.Tensor,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        batch_shape: torch.Size | Sequence[int] | None = None,
        event_shape: torch.Size | Sequence[int] | None = None,
    ) -> None:
        batch_shape = torch.Size(() if batch_shape is None else batch_shape)
        event_shape = torch.Size(() if event_shape is None else event_shape)
        self.update(param)
        self.atol = atol
        self.rtol = rtol
        if not batch_shape and not event_shape:
            batch_shape, event_shape = param.shape[:-1], param.shape[-1:]
        super().__init__(batch_shape=batch_shape, event_shape=event_shape, validate_args=False)

    def update(self, param: torch.Tensor) -> None:
        """Replaces the parameter."""
        self.param = param

    def expand(self, batch_shape: Sequence[int], _instance=None) -> Delta:
        """A Delta whose parameter is expanded to ``batch_shape``."""
        if self.batch_shape == tuple(batch_shape):
            return self
        return type(self)(
            self.param.expand((*batch_shape, *self.event_shape)),
            atol=self.atol,
            rtol=self.rtol,
            batch_shape=batch_shape,
            event_shape=self.event_shape,
        )

    def _is_equal(self, value: torch.Tensor) -> torch.Tensor:
        param = self.param.expand_as(value)
        is_equal = (value - param).abs() < self.atol + self.rtol * param.abs()
        for _ in self.event_shape:
            is_equal = is_equal.all(-1)
        return is_equal

    def log_prob(self, value: torch.Tensor) -> torch.Tensor:
        """``+inf`` where ``value`` matches the parameter, ``-inf`` elsewhere."""
        is_equal = self._is_equal(value)
        inf = torch.full_like(is_equal, float("inf"), dtype=value.dtype)
        return torch.where(is_equal, inf, -inf)

    @torch.no_grad()
    def sample(self, sample_shape: Sequence[int] | None = None) -> torch.Tensor:
        """The parameter, expanded to ``sample_shape + param.shape`` (no gradient)."""
        return self.param.expand(*(sample_shape or ()), *self.param.shape)

    def rsample(self, sample_shape: Sequence[int] | None = None) -> torch.Tensor:
        """The parameter, expanded to ``sample_shape + param.shape``."""
        return self.param.expand(*(sample_shape or ()), *self.param.shape)

    @property
    def mode(self) -> torch.Tensor:
        """The parameter."""
        return self.param

    @property
    def mean(self) -> torch.Tensor:
        """The parameter."""
        return self.param

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The parameter."""
        return self.param


class TanhDelta(D.TransformedDistribution):
    """A Delta squashed by tanh into ``(low, high)``: a deterministic bounded policy.

    As in torchrl, when the bounds are not ``(-1, 1)`` the parameter is shifted by the
    centre of the box before squashing.

    Args:
        param: the parameter of the Delta.
        low: the lower bound (-1.0); torchrl 0.4's ``min`` is accepted as a keyword.
        high: the upper bound (1.0); torchrl 0.4's ``max`` is accepted as a keyword.
        event_dims: number of trailing dims forming one action (1).
        atol: absolute tolerance of ``log_prob``'s comparison (1e-6).
        rtol: relative tolerance of ``log_prob``'s comparison (1e-6).
        safe: keep the squashed value strictly inside the bounds.

    Raises:
        ValueError: when ``high`` is not greater than ``low`` everywhere.

    Examples:
        >>> import torch
        >>> from rlmodules import TanhDelta
        >>> dist = TanhDelta(torch.zeros(3, 2))
        >>> dist.mode
        tensor([[0., 0.],
                [0., 0.],
                [0., 0.]])
        >>> dist.rsample((4,)).shape
        torch.Size([4, 3, 2])
    """

    arg_constraints = {"loc": constraints.real}

    def __init__(
        self,
        param: torch.Tensor,
        low: Bound | None = None,
        high: Bound | None = None,
        event_dims: int = 1,
        atol: float = 1e-6,
        rtol: float = 1e-6,
        safe: bool = True,
        *,
        min: Bound | None = None,  # torchrl 0.4's name for low
        max: Bound | None = None,  # torchrl 0.4's name for high
    ) -> None:
        low = _resolve_bound("TanhDelta", "low", low, "min", min)
        high = _resolve_bound("TanhDelta", "high", high, "max", max)
        low = _as_bound(-1.0 if low is None else low, param)
        high = _as_bound(1.0 if high is None else high, param)
        if not bool((high > low).all()):
            raise ValueError(_BOUNDS_ORDER_DELTA.format(low=low.tolist(), high=high.tolist()))
        self.low = low
        self.high = high
        self.non_trivial = bool((low != -1.0).any()) or bool((high != 1.0).any())
        base = Delta(
            self._shifted(param),
            atol=atol,
            rtol=rtol,
            batch_shape=param.shape[: param.ndim - event_dims],
            event_shape=param.shape[param.ndim - event_dims :],
        )
        super().__init__(base, _squash_transform(low, high, safe), validate_args=False)

    def _shifted(self, param: torch.Tensor) -> torch.Tensor:
        if self.non_trivial:
            return param + (self.high - self.low) / 2 + self.low
        return param

    def update(self, param: torch.Tensor) -> None:
        """Replaces the parameter."""
        self.base_dist.update(self._shifted(param))

    @property
    def min(self) -> torch.Tensor:
        """The lower bound (torchrl 0.4's name for ``low``)."""
        return self.low

    @property
    def max(self) -> torch.Tensor:
        """The upper bound (torchrl 0.4's name for ``high``)."""
        return self.high

    @property
    def mode(self) -> torch.Tensor:
        """The squashed parameter."""
        mode = self.base_dist.param
        for transform in self.transforms:
            mode = transform(mode)
        return mode

    @property
    def deterministic_sample(self) -> torch.Tensor:
        """The squashed parameter."""
        return self.mode

    @property
    def mean(self) -> torch.Tensor:
        """Raises ``AttributeError`` as torchrl does (``ExplorationType.MEAN`` then samples)."""
        raise AttributeError(_DELTA_NO_MEAN)

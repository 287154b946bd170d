"""Probabilistic modules with an output spec: SafeProbabilisticModule and its sequence.

They are tensordict's ``ProbabilisticTensorDictModule`` / ``ProbabilisticTensorDictSequential``
with torchrl 0.4's defaults (``default_interaction_type=MODE``, the log-probability written
under ``"sample_log_prob"``) and the spec handling of ``SafeModule``: a spec per sampled key,
projected into when ``safe=True``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import torch
from tensordict import TensorDictBase
from tensordict.nn import (
    CompositeDistribution,
    InteractionType,
    ProbabilisticTensorDictModule,
    ProbabilisticTensorDictSequential,
    TensorDictModuleBase,
    composite_lp_aggregate,
)
from tensordict.utils import NestedKey
from torch import distributions as D

from rlspecs import Composite, TensorSpec

from ._continuous_dists import Delta
from ._safe import _missing_in_key_error, _OutputSpecMixin

__all__ = ["SafeProbabilisticModule", "SafeProbabilisticTensorDictSequential"]

_INTERACTION_MODE_DEPRECATED = (
    "default_interaction_mode is deprecated, use default_interaction_type instead "
    "(it takes the same values)."
)
_DEFAULT_LOG_PROB_KEY = "sample_log_prob"


def _listed(keys: NestedKey | Sequence[NestedKey] | None) -> list[NestedKey] | None:
    if keys is None or isinstance(keys, (str, tuple)):
        return None if keys is None else [keys]
    return list(keys)


class SafeProbabilisticModule(_OutputSpecMixin, ProbabilisticTensorDictModule):
    """A ``ProbabilisticTensorDictModule`` with a spec for its samples, projected into when safe.

    It reads the distribution's parameters (``in_keys``), builds ``distribution_class`` and
    writes a value of it under ``out_keys``: a sample, its mode, its mean, ... as the current
    exploration type says (``set_exploration_type``), or ``default_interaction_type`` when
    none is set.

    Args:
        in_keys: keys holding the distribution's keyword arguments (``"loc"``, ``"scale"``,
            ...), or a dict ``{distribution kwarg: tensordict key}``.
        out_keys: keys the sample is written to.
        spec: the spec of the sample: a leaf (one out_key) or a ``Composite`` keyed by
            out_keys. ``random()`` samples it.
        safe: project the sample into ``spec`` (exploration or numerical errors can leave
            it out of bounds).
        default_interaction_mode: deprecated name of ``default_interaction_type``.
        default_interaction_type: how to get the value when no exploration type is set
            (``ExplorationType.MODE``, as torchrl 0.4).
        distribution_class: the distribution (``Delta`` by default).
        distribution_kwargs: further keyword arguments of the distribution.
        return_log_prob: also write the sample's log-probability.
        log_prob_key: where to write it (``"sample_log_prob"``, torchrl 0.4; ``None`` gives
            tensordict's ``"<out_key>_log_prob"``).
        cache_dist: tensordict's experimental distribution cache.
        n_empirical_estimate: samples averaged when the mean has no closed form (1000).

    Keyword Args:
        log_prob_keys: tensordict's per-sample log-probability keys (composite distributions).
        num_samples: draw this many samples per call (a leading dim).
        generator: a ``torch.Generator``, a seed, or a key of the tensordict holding one.

    Raises:
        RuntimeError: when ``safe=True`` without a spec, or when the spec has keys that are
            not out_keys.
        KeyError: at call time, naming the missing in_keys and the keys present.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlmodules import SafeProbabilisticModule
        >>> from rlspecs import Bounded
        >>> module = SafeProbabilisticModule(
        ...     in_keys=["loc", "scale"], out_keys=["action"],
        ...     spec=Bounded(-1.0, 1.0, shape=(2,)), safe=True,
        ...     distribution_class=torch.distributions.Normal, return_log_prob=True,
        ... )
        >>> td = module(TensorDict(loc=torch.full((3, 2), 5.0), scale=torch.ones(3, 2), batch_size=[3]))
        >>> td["action"]
        tensor([[1., 1.],
                [1., 1.],
                [1., 1.]])
        >>> td["sample_log_prob"].shape
        torch.Size([3, 2])
    """

    def __init__(
        self,
        in_keys: NestedKey | Sequence[NestedKey] | dict[str, NestedKey],
        out_keys: NestedKey | Sequence[NestedKey] | None = None,
        spec: TensorSpec | None = None,
        safe: bool = False,
        default_interaction_mode: str | None = None,
        default_interaction_type: InteractionType | str = InteractionType.MODE,
        distribution_class: type = Delta,
        distribution_kwargs: dict | None = None,
        return_log_prob: bool = False,
        log_prob_key: NestedKey | None = _DEFAULT_LOG_PROB_KEY,
        cache_dist: bool = False,
        n_empirical_estimate: int = 1000,
        *,
        log_prob_keys: list[NestedKey] | None = None,
        num_samples: int | torch.Size | None = None,
        generator: torch.Generator | int | NestedKey | None = None,
    ) -> None:
        if default_interaction_mode is not None:
            warnings.warn(_INTERACTION_MODE_DEPRECATED, DeprecationWarning, stacklevel=2)
            default_interaction_type = default_interaction_mode
        listed = _listed(out_keys)
        several = (
            (listed is None and distribution_class is CompositeDistribution)
            or (listed is not None and len(listed) > 1)
            or log_prob_keys is not None
        )
        if several and not composite_lp_aggregate(nowarn=True):
            # tensordict names one log-prob per sample then; an explicit key would be refused
            if log_prob_key == _DEFAULT_LOG_PROB_KEY:
                log_prob_key = None
        super().__init__(
            in_keys=in_keys,
            out_keys=listed,
            default_interaction_type=InteractionType(default_interaction_type),
            distribution_class=distribution_class,
            distribution_kwargs=distribution_kwargs,
            return_log_prob=return_log_prob,
            log_prob_keys=log_prob_keys,
            log_prob_key=log_prob_key,
            cache_dist=cache_dist,
            n_empirical_estimate=n_empirical_estimate,
            num_samples=num_samples,
            generator=generator,
        )
        self._init_output_spec(spec, safe)

    @property
    def _spec_keys(self) -> list[NestedKey]:
        return self.dist_sample_keys

    def get_dist(self, tensordict: TensorDictBase) -> D.Distribution:
        """Builds the distribution from the parameters in ``tensordict``.

        Raises:
            KeyError: naming the in_keys missing from ``tensordict`` and the keys present.
        """
        for key in self.in_keys:
            if tensordict.get(key, None) is None:
                raise _missing_in_key_error(self, tensordict)
        return super().get_dist(tensordict)


class SafeProbabilisticTensorDictSequential(ProbabilisticTensorDictSequential):
    """Modules run in turn, ending with a probabilistic one; ``spec`` gathers their specs.

    Calling it runs the modules that compute the distribution's parameters, then samples
    (as the last module's exploration settings say). ``get_dist(td)`` returns the
    distribution without sampling.

    Args:
        *modules: tensordict modules, the last one probabilistic.
        partial_tolerant: let inputs miss keys; only the modules that can run do.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from rlmodules import (
        ...     NormalParamExtractor, SafeProbabilisticModule,
        ...     SafeProbabilisticTensorDictSequential, TanhNormal,
        ... )
        >>> from rlspecs import Bounded
        >>> seq = SafeProbabilisticTensorDictSequential(
        ...     TensorDictModule(
        ...         torch.nn.Sequential(torch.nn.Linear(3, 4), NormalParamExtractor()),
        ...         in_keys=["obs"], out_keys=["loc", "scale"],
        ...     ),
        ...     SafeProbabilisticModule(
        ...         ["loc", "scale"], ["action"], spec=Bounded(-1.0, 1.0, shape=(2,)),
        ...         distribution_class=TanhNormal,
        ...     ),
        ... )
        >>> seq(TensorDict(obs=torch.zeros(5, 3), batch_size=[5]))["action"].shape
        torch.Size([5, 2])
        >>> list(seq.spec.keys())
        ['action']
    """

    def __init__(
        self,
        *modules: TensorDictModuleBase | ProbabilisticTensorDictModule,
        partial_tolerant: bool = False,
    ) -> None:
        super().__init__(*modules, partial_tolerant=partial_tolerant)

    @property
    def spec(self) -> Composite:
        """The specs of every module that has one, merged in a ``Composite``."""
        spec = Composite()
        for module in self.module:
            module_spec = getattr(module, "spec", None)
            if isinstance(module_spec, Composite):
                spec.update(module_spec)
        return spec

    def random(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes a random sample of every spec'd output in ``tensordict``."""
        return tensordict.update(self.spec.rand(tensordict.batch_size))

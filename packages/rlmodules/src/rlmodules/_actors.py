"""Actors, value operators and their actor-critic combinations."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tensordict.nn import (
    CompositeDistribution,
    TensorDictModule,
    TensorDictModuleBase,
    TensorDictSequential,
)
from tensordict.utils import NestedKey
from torch import nn

from rlspecs import Composite, TensorSpec

from ._probabilistic import SafeProbabilisticModule, SafeProbabilisticTensorDictSequential
from ._safe import SafeModule

_STATE_VALUE_CRITIC = (
    "ActorCriticOperator's value operator writes 'state_value', a value of the state alone; "
    "give it 'action' among its in_keys (it then writes 'state_action_value'), or use "
    "ActorValueOperator."
)
_NO_VALUE_OPERATOR = (
    "ActorCriticOperator values (state, action) pairs, so it has no state-value operator; "
    "call get_critic_operator() instead."
)
_NOT_A_TD_MODULE = (
    "ProbabilisticActor needs `module` to be a tensordict module writing the distribution "
    "parameters {in_keys}, got {type}; wrap the network, e.g. "
    "TensorDictModule(net, in_keys=['observation'], out_keys={in_keys})."
)
_NO_DISTRIBUTION_MAP = (
    "'distribution_map' must be provided within distribution_kwargs whenever the "
    "distribution is of type CompositeDistribution."
)


class Actor(SafeModule):
    """A deterministic policy: reads ``"observation"`` and writes ``"action"`` by default.

    Args:
        module: the network mapping the in_keys tensors to the action.
        in_keys: keys read, ``["observation"]`` by default.
        out_keys: keys written, ``["action"]`` by default.
        spec: the action spec (a leaf is stored under the ``"action"`` key).
        safe: project the action into ``spec``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlmodules import Actor
        >>> actor = Actor(torch.nn.Linear(3, 2))
        >>> actor(TensorDict(observation=torch.zeros(5, 3), batch_size=[5]))["action"].shape
        torch.Size([5, 2])
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
        *,
        spec: TensorSpec | None = None,
        safe: bool = False,
    ) -> None:
        out_keys = ["action"] if out_keys is None else out_keys
        if spec is not None and not isinstance(spec, Composite) and "action" in out_keys:
            spec = Composite(action=spec)
        super().__init__(
            module,
            in_keys=["observation"] if in_keys is None else in_keys,
            out_keys=out_keys,
            spec=spec,
            safe=safe,
        )


class ProbabilisticActor(SafeProbabilisticTensorDictSequential):
    """A stochastic policy: a module computing distribution parameters, then a sample.

    ``module`` writes the parameters (``in_keys``, e.g. ``"loc"`` and ``"scale"``); a
    ``SafeProbabilisticModule`` then builds the distribution and writes the action
    (``out_keys``, ``["action"]`` by default): a random sample, or its mode / mean /
    deterministic value, as ``set_exploration_type`` says (``default_interaction_type``,
    ``MODE`` by default, when no type is set).

    Args:
        module: a tensordict module writing the distribution parameters.
        in_keys: the parameter keys read by the distribution (or a dict
            ``{distribution kwarg: tensordict key}``).
        out_keys: keys the sample is written to (``["action"]``; the distribution map's
            keys for a ``CompositeDistribution``).

    Keyword Args:
        spec: the action spec (a leaf is stored under the single out_key).
        **kwargs: ``SafeProbabilisticModule``'s arguments: ``safe``,
            ``distribution_class``, ``distribution_kwargs``, ``return_log_prob``,
            ``default_interaction_type``, ``log_prob_key``, ...

    Raises:
        TypeError: when ``module`` is not a tensordict module.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from tensordict.nn import TensorDictModule
        >>> from rlmodules import (
        ...     ExplorationType, NormalParamExtractor, ProbabilisticActor, TanhNormal,
        ...     set_exploration_type,
        ... )
        >>> from rlspecs import Bounded
        >>> net = torch.nn.Sequential(torch.nn.Linear(4, 8), NormalParamExtractor())
        >>> actor = ProbabilisticActor(
        ...     TensorDictModule(net, in_keys=["observation"], out_keys=["loc", "scale"]),
        ...     in_keys=["loc", "scale"],
        ...     spec=Bounded(-2.0, 2.0, shape=(4,)),
        ...     distribution_class=TanhNormal,
        ...     distribution_kwargs={"low": -2.0, "high": 2.0},
        ...     return_log_prob=True,
        ... )
        >>> td = TensorDict(observation=torch.randn(3, 4), batch_size=[3])
        >>> with set_exploration_type(ExplorationType.RANDOM):
        ...     td = actor(td)
        >>> sorted(td.keys())
        ['action', 'loc', 'observation', 'sample_log_prob', 'scale']
        >>> td["action"].shape, td["sample_log_prob"].shape
        (torch.Size([3, 4]), torch.Size([3]))
    """

    def __init__(
        self,
        module: TensorDictModuleBase,
        in_keys: NestedKey | Sequence[NestedKey] | dict[str, NestedKey],
        out_keys: Sequence[NestedKey] | None = None,
        *,
        spec: TensorSpec | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(module, TensorDictModuleBase):
            raise TypeError(
                _NOT_A_TD_MODULE.format(
                    in_keys=list(in_keys.values()) if isinstance(in_keys, dict) else in_keys,
                    type=type(module).__name__,
                )
            )
        if out_keys is None:
            if kwargs.get("distribution_class") is CompositeDistribution:
                dist_kwargs = kwargs.get("distribution_kwargs") or {}
                if "distribution_map" not in dist_kwargs:
                    raise KeyError(_NO_DISTRIBUTION_MAP)
                name_map = dist_kwargs.get("name_map")
                out_keys = list(
                    name_map.values() if name_map else dist_kwargs["distribution_map"].keys()
                )
            else:
                out_keys = ["action"]
        elif isinstance(out_keys, (str, tuple)):
            out_keys = [out_keys]
        if len(out_keys) == 1 and spec is not None and not isinstance(spec, Composite):
            spec = Composite({out_keys[0]: spec})
        super().__init__(
            module,
            SafeProbabilisticModule(in_keys=in_keys, out_keys=out_keys, spec=spec, **kwargs),
        )


class ValueOperator(SafeModule):
    """A value network: writes ``"state_value"``, or ``"state_action_value"`` when it reads ``"action"``.

    Args:
        module: the network; with several in_keys it receives one tensor per key.
        in_keys: keys read, ``["observation"]`` by default.
        out_keys: keys written; defaults as described above.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlmodules import MLP, ValueOperator
        >>> value = ValueOperator(MLP(out_features=1, num_cells=[]), in_keys=["obs", "action"])
        >>> value.out_keys
        ['state_action_value']
        >>> td = TensorDict(obs=torch.zeros(4, 3), action=torch.zeros(4, 2), batch_size=[4])
        >>> value(td)["state_action_value"].shape
        torch.Size([4, 1])
    """

    def __init__(
        self,
        module: nn.Module,
        in_keys: Sequence[NestedKey] | None = None,
        out_keys: Sequence[NestedKey] | None = None,
    ) -> None:
        in_keys = ["observation"] if in_keys is None else in_keys
        if out_keys is None:
            out_keys = ["state_action_value"] if "action" in in_keys else ["state_value"]
        super().__init__(module, in_keys=in_keys, out_keys=out_keys)


class ActorValueOperator(TensorDictSequential):
    """A common trunk followed by a policy head and a state-value head (run in that order).

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlmodules import Actor, ActorValueOperator, SafeModule, ValueOperator
        >>> op = ActorValueOperator(
        ...     SafeModule(torch.nn.Linear(3, 4), in_keys=["observation"], out_keys=["hidden"]),
        ...     Actor(torch.nn.Linear(4, 2), in_keys=["hidden"]),
        ...     ValueOperator(torch.nn.Linear(4, 1), in_keys=["hidden"]),
        ... )
        >>> td = op(TensorDict(observation=torch.zeros(3), batch_size=[]))
        >>> sorted(td.keys())
        ['action', 'hidden', 'observation', 'state_value']
        >>> "state_value" in op.get_policy_operator()(td.exclude("state_value"))
        False
    """

    def __init__(
        self,
        common_operator: TensorDictModule,
        policy_operator: TensorDictModule,
        value_operator: TensorDictModule,
    ) -> None:
        super().__init__(common_operator, policy_operator, value_operator)

    def get_policy_operator(self) -> TensorDictSequential:
        """Returns the trunk followed by the policy head: observation to action."""
        return TensorDictSequential(self.module[0], self.module[1])

    def get_value_operator(self) -> TensorDictSequential:
        """Returns the trunk followed by the value head: observation to value."""
        return TensorDictSequential(self.module[0], self.module[2])

    def get_policy_head(self) -> TensorDictModule:
        """Returns the policy head alone."""
        return self.module[1]

    def get_value_head(self) -> TensorDictModule:
        """Returns the value head alone."""
        return self.module[2]


class ActorCriticOperator(ActorValueOperator):
    """A common trunk, a policy head and a critic head valuing (state, action) pairs.

    Calling the operator runs trunk → policy → critic, so it can serve as a policy
    that also writes ``"state_action_value"``.

    Examples:
        >>> import torch
        >>> from tensordict import TensorDict
        >>> from rlmodules import MLP, Actor, ActorCriticOperator, SafeModule, ValueOperator
        >>> op = ActorCriticOperator(
        ...     SafeModule(torch.nn.Linear(3, 4), in_keys=["observation"], out_keys=["hidden"]),
        ...     Actor(torch.nn.Linear(4, 2), in_keys=["hidden"]),
        ...     ValueOperator(MLP(out_features=1, num_cells=[]), in_keys=["hidden", "action"]),
        ... )
        >>> td = op(TensorDict(observation=torch.zeros(3), batch_size=[]))
        >>> td["state_action_value"].shape
        torch.Size([1])
        >>> op.get_critic_operator() is op
        True
    """

    def __init__(
        self,
        common_operator: TensorDictModule,
        policy_operator: TensorDictModule,
        value_operator: TensorDictModule,
    ) -> None:
        super().__init__(common_operator, policy_operator, value_operator)
        if "state_value" in self.module[2].out_keys:
            raise RuntimeError(_STATE_VALUE_CRITIC)

    def get_critic_operator(self) -> ActorCriticOperator:
        """Returns the whole operator: observation to action and its value."""
        return self

    def get_value_operator(self) -> TensorDictSequential:
        """Raises: a critic values (state, action) pairs; use ``get_critic_operator``."""
        raise RuntimeError(_NO_VALUE_OPERATOR)

"""Actors, value operators and their actor-critic combinations."""

from __future__ import annotations

from collections.abc import Sequence

from tensordict.nn import TensorDictModule, TensorDictSequential
from tensordict.utils import NestedKey
from torch import nn

from rlspecs import Composite, TensorSpec

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

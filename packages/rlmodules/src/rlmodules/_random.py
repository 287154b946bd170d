"""RandomPolicy: samples actions uniformly from an action spec."""

from __future__ import annotations

from tensordict import TensorDictBase
from tensordict.nn import TensorDictModuleBase
from tensordict.utils import NestedKey

from rlspecs import Composite, TensorSpec


class RandomPolicy(TensorDictModuleBase):
    """A policy writing ``action_spec.rand()`` into the tensordict it is given.

    A ``Composite`` spec (such as ``env.full_action_spec``) writes
    each of its entries; a leaf spec writes ``action_key``. The spec should carry
    the env's batch dims, as ``env.action_spec`` does.

    Examples:
        >>> from rlmodules import RandomPolicy
        >>> from tensordict import TensorDict
        >>> from rlspecs import Bounded
        >>> policy = RandomPolicy(Bounded(-1.0, 1.0, shape=(3,)))
        >>> td = policy(TensorDict())
        >>> bool(td["action"].abs().max() <= 1)
        True
    """

    def __init__(self, action_spec: TensorSpec, action_key: NestedKey = "action") -> None:
        super().__init__()
        self.action_spec = action_spec.clone()
        self.action_key = action_key
        self.in_keys = []
        if isinstance(self.action_spec, Composite):
            self.out_keys = list(self.action_spec.keys(include_nested=True, leaves_only=True))
        else:
            self.out_keys = [action_key]

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Writes a random action in ``tensordict`` and returns it."""
        if isinstance(self.action_spec, Composite):
            return tensordict.update(self.action_spec.rand())
        return tensordict.set(self.action_key, self.action_spec.rand())

"""Deterministic policies (and one module) matching the mock envs' action specs."""

from __future__ import annotations

import torch
from tensordict import NestedKey, TensorDictBase
from tensordict.nn import TensorDictModuleBase
from torch import nn

from rlspecs import Composite, TensorSpec

__all__ = [
    "CountingEnvCountModule",
    "CountingEnvCountPolicy",
    "DiscreteActionConvPolicy",
    "DiscreteActionVecPolicy",
    "HeterogeneousCountingEnvPolicy",
    "MultiKeyCountingEnvPolicy",
]

LEAF_SPEC_ERROR = (
    "CountingEnvCountPolicy expects a leaf action spec (e.g. env.action_spec), got a "
    "Composite with keys {keys}; pass env.full_action_spec[action_key] instead."
)
NOT_COUNTING_ERROR = (
    "MultiKeyCountingEnvPolicy(count=False) is always deterministic: pass "
    "deterministic=True or count=True."
)


class CountingEnvCountPolicy(TensorDictModuleBase):
    """Writes ``action_spec.zero() + 1`` (all ones, batch dims included) under ``action_key``.

    Examples:
        >>> from rlmocks import CountingEnv
        >>> env = CountingEnv(max_steps=2)
        >>> policy = CountingEnvCountPolicy(env.action_spec, env.action_key)
        >>> env.rollout(10, policy)["next", "observation"].squeeze(-1)
        tensor([1, 2, 3], dtype=torch.int32)
    """

    def __init__(self, action_spec: TensorSpec, action_key: NestedKey = "action") -> None:
        super().__init__()
        if isinstance(action_spec, Composite):
            raise TypeError(LEAF_SPEC_ERROR.format(keys=list(action_spec.keys(True, True))))
        self.action_spec = action_spec
        self.action_key = action_key
        self.in_keys = []
        self.out_keys = [action_key]

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        return td.set(self.action_key, self.action_spec.zero() + 1)


class CountingEnvCountModule(nn.Module):
    """A plain module returning ``action_spec.zero() + 1`` whatever its input.

    Examples:
        >>> from rlmocks import CountingEnv
        >>> CountingEnvCountModule(CountingEnv().action_spec)(torch.zeros(1))
        tensor([1], dtype=torch.int8)
    """

    def __init__(self, action_spec: TensorSpec) -> None:
        super().__init__()
        self.action_spec = action_spec

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self.action_spec.zero() + 1


class HeterogeneousCountingEnvPolicy(TensorDictModuleBase):
    """Writes ``full_action_spec.zero()``, plus 1 on every leaf of every agent when ``count``.

    Examples:
        >>> from rlmocks import HeterogeneousCountingEnv
        >>> env = HeterogeneousCountingEnv()
        >>> policy = HeterogeneousCountingEnvPolicy(env.full_action_spec)
        >>> td = env.rollout(2, policy, return_contiguous=False)
        >>> td["next", "state"][-1].mean().item()
        2.0
    """

    def __init__(self, full_action_spec: Composite, count: bool = True) -> None:
        super().__init__()
        self.full_action_spec = full_action_spec
        self.count = count
        self.in_keys = []
        self.out_keys = list(full_action_spec.keys(True, True))

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        action_td = self.full_action_spec.zero()
        if self.count:
            action_td.apply_(lambda x: x + 1)
        return td.update(action_td)


class MultiKeyCountingEnvPolicy(TensorDictModuleBase):
    """Drives one (or all) of `MultiKeyCountingEnv`'s three counters at each call.

    Starting from ``full_action_spec.zero()``, the three possible edits are
    ``nested_1.action += 1``, ``nested_2.azione += 1`` and setting index 1 of the
    one-hot ``action``. ``deterministic=True`` applies all three; otherwise one
    ``torch.randint(0, 3, ())`` draw per call picks one for the whole batch.
    ``count=False`` (requires ``deterministic=True``) leaves the zeros.

    Examples:
        >>> from rlmocks import MultiKeyCountingEnv
        >>> env = MultiKeyCountingEnv()
        >>> policy = MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True)
        >>> policy(env.reset())["action"]
        tensor([False,  True])
    """

    def __init__(
        self, full_action_spec: Composite, count: bool = True, deterministic: bool = False
    ) -> None:
        super().__init__()
        if not deterministic and not count:
            raise ValueError(NOT_COUNTING_ERROR)
        self.full_action_spec = full_action_spec
        self.count = count
        self.deterministic = deterministic
        self.in_keys = []
        self.out_keys = list(full_action_spec.keys(True, True))

    def __call__(self, td: TensorDictBase) -> TensorDictBase:
        action_td = self.full_action_spec.zero()
        if self.count:
            choices = range(3) if self.deterministic else (int(torch.randint(0, 3, ())),)
            for choice in choices:
                if choice == 0:
                    action_td.set(("nested_1", "action"), action_td.get(("nested_1", "action")) + 1)
                elif choice == 1:
                    action_td.set(("nested_2", "azione"), action_td.get(("nested_2", "azione")) + 1)
                else:
                    one_hot = action_td.get("action").clone()
                    one_hot[..., 1] = True
                    action_td.set("action", one_hot)
        return td.update(action_td)


class DiscreteActionVecPolicy(TensorDictModuleBase):
    """One-hot action pointing one slot past the (last) maximum of ``observation``.

    Examples:
        >>> from tensordict import TensorDict
        >>> td = TensorDict({"observation": torch.tensor([0.0, 3.0, 1.0])}, [])
        >>> DiscreteActionVecPolicy()(td)["action"]
        tensor([0, 0, 1])
    """

    in_keys = ["observation"]
    out_keys = ["action"]

    def _vector(self, tensordict: TensorDictBase) -> torch.Tensor:
        return tensordict.get(self.in_keys[0])

    def __call__(self, tensordict: TensorDictBase) -> TensorDictBase:
        obs = self._vector(tensordict)
        size = obs.shape[-1]
        is_max = obs == obs.max(dim=-1, keepdim=True).values
        last_max = is_max.cumsum(-1).argmax(-1)
        action = nn.functional.one_hot((last_max + 1) % size, size)
        return tensordict.set(self.out_keys[0], action)


class DiscreteActionConvPolicy(DiscreteActionVecPolicy):
    """`DiscreteActionVecPolicy` reading the diagonal of the ``pixels`` image.

    Examples:
        >>> from tensordict import TensorDict
        >>> pixels = torch.diag_embed(torch.tensor([0.0, 3.0, 1.0])).unsqueeze(0)
        >>> DiscreteActionConvPolicy()(TensorDict({"pixels": pixels}, []))["action"]
        tensor([0, 0, 1])
    """

    in_keys = ["pixels"]

    def _vector(self, tensordict: TensorDictBase) -> torch.Tensor:
        return tensordict.get(self.in_keys[0]).diagonal(0, -2, -1).squeeze(-2)

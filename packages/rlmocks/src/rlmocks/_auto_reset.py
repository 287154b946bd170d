"""Counting envs that reset themselves when done, for tests of auto-resetting envs."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import expand_right

from ._counting import CountingEnv
from ._heterogeneous import HeterogeneousCountingEnv

__all__ = ["AutoResetHeteroCountingEnv", "AutoResettingCountingEnv"]

PARTIAL_RESET_ERROR = (
    "{cls} resets itself when done and takes no partial reset (its input held {key!r}); "
    "build it with auto_reset=True, or roll out with break_when_any_done=True"
)


class AutoResettingCountingEnv(CountingEnv):
    """A `CountingEnv` that resets itself at the step where it is done.

    Specs and counting are `CountingEnv`'s. When a step ends with any done flag True,
    the whole count goes back to ``start_val`` at once and the step returns the reset's
    observation with the done flags still True (as the auto-resetting envs of gym's
    vector API do). A reset whose input holds a ``"_reset"`` entry raises RuntimeError:
    such an env is driven with ``auto_reset=True`` (an ``AutoResetTransform``), which
    never asks it for partial resets.

    Examples:
        >>> env = AutoResettingCountingEnv(max_steps=1)
        >>> td = env.reset().set("action", torch.ones(1, dtype=torch.int8))
        >>> for _ in range(2):
        ...     td = env.step(td)
        >>> td["next", "observation"], td["next", "done"]
        (tensor([0], dtype=torch.int32), tensor([True]))
    """

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        result = super()._step(tensordict)
        if result.get("done").any():
            reset = self._reset(None)
            result.update(reset.exclude(*self.done_keys))
        return result

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if tensordict is not None and "_reset" in tensordict.keys():
            raise RuntimeError(PARTIAL_RESET_ERROR.format(cls=type(self).__name__, key="_reset"))
        return super()._reset(tensordict)


class AutoResetHeteroCountingEnv(HeterogeneousCountingEnv):
    """A `HeterogeneousCountingEnv` with one count per agent, each reset to 0 once it passes max.

    Specs are `HeterogeneousCountingEnv`'s. The buffer ``count`` is per agent, (*B, 3,
    1) int32, set to ``start_val`` by reset. A step adds 1 to agent i's count where the
    first entry of its action is non-zero; an agent whose count exceeds ``max_steps`` is
    set back to 0 in the same step, so no episode ever ends. Then, as current torchrl's
    class does, agent i's count is added in place to each of agent i's ``"lazy"``
    observation entries of the step's *input*; the step's own outputs (observations,
    done flags, reward) are all zeros. A reset whose input holds ``("lazy", "_reset")``
    raises RuntimeError (see `AutoResettingCountingEnv`).

    Examples:
        >>> from rlmocks import HeterogeneousCountingEnvPolicy
        >>> env = AutoResetHeteroCountingEnv(max_steps=1)
        >>> policy = HeterogeneousCountingEnvPolicy(env.full_action_spec)
        >>> td = env.reset()
        >>> for _ in range(2):
        ...     _ = env.step(policy(td))
        ...     print(env.count.squeeze(-1).tolist(), td["lazy"][..., 0]["tensor_0"].tolist())
        [1, 1, 1] [1.0]
        [0, 0, 0] [1.0]
    """

    def __init__(self, max_steps: int = 5, start_val: int = 0, **kwargs) -> None:
        super().__init__(max_steps=max_steps, start_val=start_val, **kwargs)
        self.register_buffer(
            "count",
            torch.full(
                (*self.batch_size, self.n_nested_dim, 1),
                start_val,
                dtype=torch.int32,
                device=self.device,
            ),
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = tensordict.get("lazy")
        for i in range(self.n_nested_dim):
            moved = actions[..., i].get("action")[..., 0] != 0
            self.count[..., i, 0] += moved.to(self.count.dtype)
        self.count[self.count > self.max_steps] = 0
        lazy_keys = [
            key[1:]
            for key in self.observation_spec.keys(True, True)
            if isinstance(key, tuple) and key[0] == "lazy"
        ]
        for i in range(self.n_nested_dim):
            agent = tensordict.get("lazy")[..., i]
            for key in lazy_keys:
                leaf = agent.get(key)
                leaf += expand_right(self.count[..., i, 0], leaf.shape).to(leaf.dtype)
        result = self.full_observation_spec.zero()
        result.update(self.full_done_spec.zero())
        result.update(self.full_reward_spec.zero())
        return result

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        reset_key = self.reset_keys[0]
        if tensordict is not None and reset_key in tensordict.keys(True):
            raise RuntimeError(PARTIAL_RESET_ERROR.format(cls=type(self).__name__, key=reset_key))
        self.count.fill_(self.start_val)
        result = self.full_observation_spec.zero()
        result.update(self.full_done_spec.zero())
        return result

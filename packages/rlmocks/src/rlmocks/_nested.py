"""`NestedCountingEnv`: a `CountingEnv` whose entries live under a nested ``"data"`` level."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from rlspecs import Binary, Categorical, Composite, Unbounded

from ._counting import CountingEnv, _counting_specs, _set_specs

__all__ = ["NestedCountingEnv"]

UNEXPECTED_ROOT_RESET = (
    "NestedCountingEnv(nest_done=True, has_root_done=False) received a root '_reset' "
    "entry: only ('data', '_reset') should be routed to it."
)
UNEXPECTED_NESTED_RESET = (
    "NestedCountingEnv(nest_done=False) received a ('data', '_reset') entry: only the "
    "root '_reset' should be routed to it."
)


class NestedCountingEnv(CountingEnv):
    """A `CountingEnv` whose observation, action, reward and done can sit under ``"data"``.

    ``"data"`` is a sub-level of shape (*B, nested_dim). Each flag moves one part:

    - ``nest_obs_action``: observation ``("data", "states")`` int32 (*B, nested_dim, 1)
      and action ``("data", "action")`` Binary(1) int8 (*B, nested_dim, 1), replacing
      the root ``observation``/``action``;
    - ``nest_reward``: reward ``("data", "reward")`` float32 (*B, nested_dim, 1);
    - ``nest_done``: ``("data", "done")``/``("data", "terminated")`` bool (*B,
      nested_dim, 1); ``has_root_done`` keeps root ``done``/``terminated`` (*B, 1) too.

    A step increments the shared count by the max of the nested actions (or by the root
    action) and broadcasts count, done and reward to every nested entry. Only a root
    ``"_reset"`` masks a reset: ``("data", "_reset")`` resets the whole count.

    Examples:
        >>> env = NestedCountingEnv(nested_dim=2)
        >>> env.done_keys
        [('data', 'done'), ('data', 'terminated')]
        >>> env.reset()["data"].batch_size
        torch.Size([2])
    """

    def __init__(
        self,
        max_steps: int = 5,
        start_val: int = 0,
        nest_obs_action: bool = True,
        nest_done: bool = True,
        nest_reward: bool = True,
        nested_dim: int = 3,
        has_root_done: bool = False,
        **kwargs,
    ) -> None:
        super().__init__(max_steps=max_steps, start_val=start_val, **kwargs)
        self.nested_dim = nested_dim
        self.has_root_done = has_root_done
        self.nested_obs_action = nest_obs_action
        self.nested_done = nest_done
        self.nested_reward = nest_reward
        _set_specs(self, self._nested_specs())

    def _nested_specs(self) -> dict[str, Composite]:
        batch_size, device = self.batch_size, self.device
        leaf_shape = (*batch_size, self.nested_dim, 1)
        specs = _counting_specs(batch_size, device)

        def data(**leaves) -> Composite:
            level = Composite(leaves, shape=(*batch_size, self.nested_dim), device=device)
            return Composite(data=level, shape=batch_size, device=device)

        if self.nested_obs_action:
            specs["observation"] = data(
                states=Unbounded(shape=leaf_shape, dtype=torch.int32, device=device)
            )
            specs["action"] = data(
                action=Binary(n=1, shape=leaf_shape, dtype=torch.int8, device=device)
            )
        if self.nested_reward:
            specs["reward"] = data(
                reward=Unbounded(shape=leaf_shape, dtype=torch.float32, device=device)
            )
        if self.nested_done:
            done = Categorical(2, shape=leaf_shape, dtype=torch.bool, device=device)
            specs["done"] = data(done=done, terminated=done.clone())
            if self.has_root_done:
                root = Categorical(2, shape=(*batch_size, 1), dtype=torch.bool, device=device)
                specs["done"]["done"] = root
                specs["done"]["terminated"] = root.clone()
        return specs

    def _broadcast(self, value: torch.Tensor) -> torch.Tensor:
        """(*B, 1) -> (*B, nested_dim, 1)."""
        return value.unsqueeze(-2).expand(*self.batch_size, self.nested_dim, 1).clone()

    def _nest(self, flat: TensorDictBase) -> TensorDictBase:
        """Move the flat `CountingEnv` outputs to the keys the flags select."""
        data = {}
        if self.nested_done:
            for key in ("done", "terminated"):
                value = flat.get(key) if self.has_root_done else flat.pop(key)
                data[key] = self._broadcast(value)
        if self.nested_obs_action:
            data["states"] = self._broadcast(flat.pop("observation"))
        if self.nested_reward and "reward" in flat.keys():
            data["reward"] = self._broadcast(flat.pop("reward"))
        if data:
            flat.set(
                "data",
                TensorDict(
                    data, batch_size=(*self.batch_size, self.nested_dim), device=self.device
                ),
            )
        return flat

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        if tensordict is not None:
            if self.nested_done and not self.has_root_done and "_reset" in tensordict.keys():
                raise RuntimeError(UNEXPECTED_ROOT_RESET)
            if not self.nested_done and ("data", "_reset") in tensordict.keys(True):
                raise RuntimeError(UNEXPECTED_NESTED_RESET)
        return self._nest(super()._reset(tensordict))

    def _increment(self, tensordict: TensorDictBase) -> torch.Tensor:
        if not self.nested_obs_action:
            return super()._increment(tensordict)
        action = tensordict.get(("data", "action"))
        return action.max(-2).values.to(dtype=torch.int32, device=self.count.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return self._nest(super()._step(tensordict))

"""`HeterogeneousCountingEnv`: three agents with different specs held in lazy stacks."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import expand_right

from rlcore import EnvBase
from rlspecs import Bounded, Categorical, Composite, Unbounded, consolidate_spec

from ._spec_utils import expand_to_batch

__all__ = ["HeterogeneousCountingEnv"]

AGENT_INDEX_ERROR = "HeterogeneousCountingEnv has agents 0, 1 and 2; got index {index}."


class HeterogeneousCountingEnv(EnvBase):
    """A shared counter observed by three agents whose observation and action specs differ.

    Specs (``*B`` = batch_size):

    - observation: ``lazy``, a lazy stack over the 3 agents (shape (*B, 3), stack dim
      last) consolidated so that every agent has every key (``camera``, ``lidar``,
      ``vector``, ``tensor_0``, ``tensor_1``, ``tensor_2``; a key an agent lacks is a
      zero-size placeholder), and ``state`` Unbounded (*B, 64, 64, 3);
    - action: ``("lazy", "action")`` Bounded[-1, 1], (3,) for agent 0 and (2,) for
      agents 1 and 2, lazily stacked;
    - reward ``("lazy", "reward")`` (*B, 3, 1); done/terminated ``("lazy", ...)`` bool
      (*B, 3, 1), so the only reset key is ``("lazy", "_reset")``.

    The buffer ``count`` ((*B, 1) int32) is the state. Reset sets it to ``start_val``
    (where any agent of ``("lazy", "_reset")`` is True, if given). A step adds 1 where
    the first action entry of any agent is non-zero. Every observation leaf is filled
    with ``count``; done is ``count > max_steps`` for every agent; the reward is 0.

    Examples:
        >>> env = HeterogeneousCountingEnv()
        >>> td = env.rand_step(env.reset())
        >>> td["next", "lazy"][0]["tensor_0"]
        tensor([1.])
    """

    def __init__(self, max_steps: int = 5, start_val: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.n_nested_dim = 3
        self.max_steps = max_steps
        self.start_val = start_val
        self.register_buffer(
            "count",
            torch.full((*self.batch_size, 1), start_val, dtype=torch.int32, device=self.device),
        )
        self._make_specs()

    def _make_specs(self) -> None:
        agents = range(self.n_nested_dim)
        observations = torch.stack([self.get_agent_obs_spec(i) for i in agents], dim=0)
        actions = torch.stack([self.get_agent_action_spec(i) for i in agents], dim=0)
        n = self.n_nested_dim
        self.unbatched_observation_spec = Composite(
            lazy=consolidate_spec(observations),
            state=Unbounded(shape=(64, 64, 3), device=self.device),
            device=self.device,
        )
        self.unbatched_action_spec = Composite(lazy=actions, device=self.device)
        self.unbatched_reward_spec = Composite(
            lazy=Composite(reward=Unbounded(shape=(n, 1), device=self.device), shape=(n,)),
            device=self.device,
        )
        done = Categorical(2, shape=(n, 1), dtype=torch.bool, device=self.device)
        self.unbatched_done_spec = Composite(
            lazy=Composite(done=done, terminated=done.clone(), shape=(n,)),
            device=self.device,
        )
        self.full_observation_spec = expand_to_batch(
            self.unbatched_observation_spec, self.batch_size
        )
        self.full_action_spec = expand_to_batch(self.unbatched_action_spec, self.batch_size)
        self.full_reward_spec = expand_to_batch(self.unbatched_reward_spec, self.batch_size)
        self.full_done_spec = expand_to_batch(self.unbatched_done_spec, self.batch_size)
        self.full_state_spec = Composite(shape=self.batch_size, device=self.device)

    def get_agent_obs_spec(self, i: int) -> Composite:
        """The unbatched observation spec of agent ``i`` (before consolidation).

        Examples:
            >>> sorted(HeterogeneousCountingEnv().get_agent_obs_spec(2).keys())
            ['camera', 'tensor_2', 'vector']
        """
        entries = {"camera": Bounded(low=0, high=200, shape=(7, 7, 3))}
        if i == 0:
            entries.update(
                lidar=Bounded(low=0, high=5, shape=(8,)),
                vector=Unbounded(shape=(3,)),
                tensor_0=Unbounded(shape=(1,)),
            )
        elif i == 1:
            entries.update(
                lidar=Bounded(low=0, high=5, shape=(8,)),
                vector=Unbounded(shape=(2,)),
                tensor_1=Bounded(low=0, high=3, shape=(1, 2)),
            )
        elif i == 2:
            entries.update(vector=Unbounded(shape=(2,)), tensor_2=Unbounded(shape=(1, 2, 3)))
        else:
            raise ValueError(AGENT_INDEX_ERROR.format(index=i))
        return Composite(entries).to(self.device)

    def get_agent_action_spec(self, i: int) -> Composite:
        """The unbatched action spec of agent ``i``: ``action`` Bounded[-1, 1] of size 3 or 2.

        Examples:
            >>> HeterogeneousCountingEnv().get_agent_action_spec(1)["action"].shape
            torch.Size([2])
        """
        if i not in (0, 1, 2):
            raise ValueError(AGENT_INDEX_ERROR.format(index=i))
        size = 3 if i == 0 else 2
        return Composite(action=Bounded(low=-1, high=1, shape=(size,))).to(self.device)

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed)

    def _observations(self) -> TensorDictBase:
        result = self.full_observation_spec.zero()
        result.apply_(lambda x: x + expand_right(self.count, x.shape))
        return result

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        reset = None if tensordict is None else tensordict.get(("lazy", "_reset"), None)
        if reset is None:
            self.count.fill_(self.start_val)
        else:
            self.count[reset.squeeze(-1).any(-1)] = self.start_val
        result = self._observations()
        result.update(self.full_done_spec.zero())
        return result

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        actions = tensordict.get("lazy")
        moved = torch.zeros(self.batch_size, dtype=torch.bool, device=self.count.device)
        for i in range(self.n_nested_dim):
            moved |= actions[..., i].get("action")[..., 0] != 0
        self.count += moved.unsqueeze(-1).to(torch.int32)
        result = self._observations()
        result.update(self.full_reward_spec.zero())
        done = self.count > self.max_steps
        for key in ("done", "terminated"):
            shape = self.full_done_spec["lazy", key].shape
            result.set(("lazy", key), expand_right(done, shape).clone())
        return result

"""`MultiKeyCountingEnv`: three independent counters, each with its own action, reward and done."""

from __future__ import annotations

import torch
from tensordict import TensorDictBase
from tensordict.utils import expand_right

from rlcore import EnvBase
from rlspecs import Bounded, Categorical, Composite, OneHot, Unbounded

from ._spec_utils import expand_to_batch

__all__ = ["MultiKeyCountingEnv"]


def _done_pair(shape: tuple[int, ...]) -> dict[str, Categorical]:
    done = Categorical(2, shape=shape, dtype=torch.bool)
    return {"done": done, "terminated": done.clone()}


class MultiKeyCountingEnv(EnvBase):
    """Three counters (root, ``nested_1`` of 3 rows, ``nested_2`` of 2 rows) driven by three actions.

    Specs (``*B`` = batch_size; the sub-levels ``nested_1`` and ``nested_2`` have shapes
    (*B, 3) and (*B, 2)):

    - observation: ``observation`` Unbounded (*B, 10, 10, 3); ``("nested_1",
      "observation")`` Bounded[0, 200] (*B, 3, 3); ``("nested_2", "observation")``
      Unbounded (*B, 2, 2);
    - action: ``action`` OneHot(2) (*B, 2); ``("nested_1", "action")`` Categorical(2)
      (*B, 3); ``("nested_2", "azione")`` Bounded[0, 100] (*B, 2, 1);
    - reward: ``reward`` (*B, 1); ``("nested_1", "gift")`` (*B, 3, 1);
      ``("nested_2", "reward")`` (*B, 2, 1);
    - done/terminated: bool (*B, 1) at the root, (*B, 3, 1) and (*B, 2, 1) nested.

    A step adds ``argmax(action)`` to ``count``, ``nested_1.action`` to
    ``count_nested_1`` and ``nested_2.azione != 0`` to ``count_nested_2``; the rewards
    are those increments as floats (``nested_2.reward`` is the raw ``azione``); each
    observation is filled with its counter and each done is ``counter > max_steps``.
    Reset sets the counters to ``start_val`` (where the root ``"_reset"`` is True, if
    given). The env draws nothing from the global RNG.

    Examples:
        >>> env = MultiKeyCountingEnv()
        >>> sorted(env.reset_keys, key=str)
        [('nested_1', '_reset'), ('nested_2', '_reset'), '_reset']
    """

    def __init__(self, max_steps: int = 5, start_val: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_steps = max_steps
        self.start_val = start_val
        self.nested_dim_1 = 3
        self.nested_dim_2 = 2
        for name, inner in (
            ("count", ()),
            ("count_nested_1", (self.nested_dim_1,)),
            ("count_nested_2", (self.nested_dim_2,)),
        ):
            shape = (*self.batch_size, *inner, 1)
            self.register_buffer(
                name, torch.full(shape, start_val, dtype=torch.int32, device=self.device)
            )
        self.make_specs()

    def make_specs(self) -> None:
        """Build the ``unbatched_*`` specs and install them expanded to the batch size.

        Examples:
            >>> MultiKeyCountingEnv(batch_size=[4]).unbatched_action_spec["action"].shape
            torch.Size([2])
        """
        n1, n2 = self.nested_dim_1, self.nested_dim_2
        self.unbatched_observation_spec = Composite(
            nested_1=Composite(observation=Bounded(low=0, high=200, shape=(n1, 3)), shape=(n1,)),
            nested_2=Composite(observation=Unbounded(shape=(n2, 2)), shape=(n2,)),
            observation=Unbounded(shape=(10, 10, 3)),
        )
        self.unbatched_action_spec = Composite(
            nested_1=Composite(action=Categorical(2, shape=(n1,)), shape=(n1,)),
            nested_2=Composite(azione=Bounded(low=0, high=100, shape=(n2, 1)), shape=(n2,)),
            action=OneHot(2),
        )
        self.unbatched_reward_spec = Composite(
            nested_1=Composite(gift=Unbounded(shape=(n1, 1)), shape=(n1,)),
            nested_2=Composite(reward=Unbounded(shape=(n2, 1)), shape=(n2,)),
            reward=Unbounded(shape=(1,)),
        )
        self.unbatched_done_spec = Composite(
            nested_1=Composite(_done_pair((n1, 1)), shape=(n1,)),
            nested_2=Composite(_done_pair((n2, 1)), shape=(n2,)),
            **_done_pair((1,)),
        )
        batch_size, device = self.batch_size, self.device
        self.full_observation_spec = expand_to_batch(
            self.unbatched_observation_spec, batch_size
        ).to(device)
        self.full_action_spec = expand_to_batch(self.unbatched_action_spec, batch_size).to(device)
        self.full_reward_spec = expand_to_batch(self.unbatched_reward_spec, batch_size).to(device)
        self.full_done_spec = expand_to_batch(self.unbatched_done_spec, batch_size).to(device)
        self.full_state_spec = Composite(shape=batch_size, device=device)

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed)

    def _observations(self) -> TensorDictBase:
        result = self.full_observation_spec.zero()
        for key, count in (
            ("observation", self.count),
            (("nested_1", "observation"), self.count_nested_1),
            (("nested_2", "observation"), self.count_nested_2),
        ):
            leaf = result.get(key)
            leaf += expand_right(count, leaf.shape)
        return result

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        reset = None if tensordict is None else tensordict.get("_reset", None)
        counts = (self.count, self.count_nested_1, self.count_nested_2)
        if reset is None:
            for count in counts:
                count.fill_(self.start_val)
        else:
            # the root mask (*B, 1) covers every row of the nested counters
            mask = reset.reshape(*self.batch_size, 1)
            for count in counts:
                count.masked_fill_(expand_right(mask, count.shape), self.start_val)
        result = self._observations()
        result.update(self.full_done_spec.zero())
        return result

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        reward = self.full_reward_spec.zero()
        done = self.full_done_spec.zero()

        root = tensordict.get("action").long().argmax(-1).unsqueeze(-1)
        self.count += root.to(torch.int32)
        reward.get("reward").copy_(root)

        nested_1 = tensordict.get(("nested_1", "action")).unsqueeze(-1)
        self.count_nested_1 += nested_1.to(torch.int32)
        reward.get(("nested_1", "gift")).copy_(nested_1)

        nested_2 = tensordict.get(("nested_2", "azione"))
        self.count_nested_2 += (nested_2 != 0).to(torch.int32)
        reward.get(("nested_2", "reward")).copy_(nested_2)

        for prefix, count in (
            ((), self.count),
            (("nested_1",), self.count_nested_1),
            (("nested_2",), self.count_nested_2),
        ):
            for key in ("done", "terminated"):
                done.set((*prefix, key), count > self.max_steps)
        result = self._observations()
        result.update(done)
        result.update(reward)
        return result

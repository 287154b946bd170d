"""Small envs for the transform tests (rlcore's tests cannot use rlmocks)."""

from __future__ import annotations

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase
from rlspecs import Binary, Bounded, Categorical, Composite, OneHot, Unbounded


class CountEnv(EnvBase):
    """Counts steps: observation = count (3 copies), reward 1, terminated when count == max_count.

    Partial resets (a `"_reset"` mask) reset only the flagged sub-envs.
    """

    def __init__(self, batch_size=(), max_count: int = 1000, device=None) -> None:
        super().__init__(batch_size=torch.Size(batch_size), device=device)
        b = self.batch_size
        self.max_count = max_count
        self.observation_spec = Composite(
            observation=Unbounded((*b, 3)), shape=b, device=self.device
        )
        self.action_spec = Unbounded((*b, 1), device=self.device)
        self.reward_spec = Unbounded((*b, 1), device=self.device)
        self.done_spec = Categorical(2, (*b, 1), dtype=torch.bool, device=self.device)
        self.register_buffer("count", torch.zeros((*b, 1)))
        self.seed_calls: list = []

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None:
            self.count.zero_()
        else:
            self.count[reset.reshape(self.count.shape)] = 0
        done = torch.zeros((*self.batch_size, 1), dtype=torch.bool, device=self.device)
        return TensorDict(
            {"observation": self.count.expand(*self.batch_size, 3).clone(), "done": done},
            self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count += 1
        terminated = self.count >= self.max_count
        return TensorDict(
            {
                "observation": self.count.expand(*self.batch_size, 3).clone(),
                "reward": torch.ones_like(self.count),
                "terminated": terminated,
            },
            self.batch_size,
            device=self.device,
        )

    def _set_seed(self, seed: int | None) -> None:
        self.seed_calls.append(seed)

    def custom_method(self) -> str:
        return "base"


class DoubleEnv(EnvBase):
    """Float64 observations `obs_a` (2,) / `obs_b` (3,) and a float64 action it insists on."""

    def __init__(self, batch_size=()) -> None:
        super().__init__(batch_size=torch.Size(batch_size))
        b = self.batch_size
        self.observation_spec = Composite(
            obs_a=Unbounded((*b, 2), dtype=torch.float64),
            obs_b=Bounded(-1.0, 1.0, (*b, 3), dtype=torch.float64),
            shape=b,
        )
        self.action_spec = Bounded(-1.0, 1.0, (*b, 1), dtype=torch.float64)
        self.reward_spec = Unbounded((*b, 1))
        self.last_action_dtype = None

    def _obs(self, value: float) -> dict:
        b = self.batch_size
        return {
            "obs_a": torch.full((*b, 2), value, dtype=torch.float64),
            "obs_b": torch.full((*b, 3), value / 10, dtype=torch.float64).clamp(-1, 1),
        }

    def _reset(self, tensordict):
        out = self._obs(0.0)
        out["done"] = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        return TensorDict(out, self.batch_size)

    def _step(self, tensordict):
        action = tensordict.get("action")
        self.last_action_dtype = action.dtype
        out = self._obs(float(action.flatten()[0]))
        out["reward"] = torch.ones((*self.batch_size, 1))
        out["done"] = torch.zeros((*self.batch_size, 1), dtype=torch.bool)
        return TensorDict(out, self.batch_size)

    def _set_seed(self, seed):
        return None


class PixelEnv(EnvBase):
    """uint8 channel-last `pixels` (4, 5, 3), constant 255; reward in [-2, 2]."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(pixels=Bounded(0, 255, (4, 5, 3), dtype=torch.uint8))
        self.action_spec = Unbounded((1,))
        self.reward_spec = Unbounded((1,))

    def _reset(self, tensordict):
        return TensorDict(
            {
                "pixels": torch.full((4, 5, 3), 255, dtype=torch.uint8),
                "done": torch.zeros(1, dtype=torch.bool),
            },
            [],
        )

    def _step(self, tensordict):
        return TensorDict(
            {
                "pixels": torch.full((4, 5, 3), 255, dtype=torch.uint8),
                "reward": torch.tensor([2.0]),
                "done": torch.zeros(1, dtype=torch.bool),
            },
            [],
        )

    def _set_seed(self, seed):
        return None


class NestedDoneEnv(EnvBase):
    """Two agents under `"data"`, done flags only there (shape (2, 1)); a counter per agent."""

    def __init__(self) -> None:
        super().__init__()
        agents = (2,)
        self.full_observation_spec = Composite(
            data=Composite(observation=Unbounded((*agents, 3)), shape=agents)
        )
        self.full_action_spec = Composite(
            data=Composite(action=Unbounded((*agents, 1)), shape=agents)
        )
        self.full_reward_spec = Composite(
            data=Composite(reward=Unbounded((*agents, 1)), shape=agents)
        )
        done = Categorical(2, (*agents, 1), dtype=torch.bool)
        self.full_done_spec = Composite(
            data=Composite(done=done, terminated=done.clone(), shape=agents)
        )
        self.count = torch.zeros(*agents, 1)

    def _data(self, **extra) -> TensorDict:
        data = {"observation": self.count.expand(2, 3).clone(), **extra}
        data["done"] = torch.zeros(2, 1, dtype=torch.bool)
        data["terminated"] = torch.zeros(2, 1, dtype=torch.bool)
        return TensorDict({"data": TensorDict(data, [2])}, [])

    def _reset(self, tensordict):
        self.count.zero_()
        return self._data()

    def _step(self, tensordict):
        self.count += 1
        return self._data(reward=torch.ones(2, 1))

    def _set_seed(self, seed):
        return None


class ManyKeysEnv(EnvBase):
    """Random observations `a`, `b`, `c` (3,), a random reward, never done (torchrl's test env)."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(a=Unbounded(3), b=Unbounded(3), c=Unbounded(3))
        self.reward_spec = Unbounded(1)
        self.action_spec = Unbounded(2)

    def _step(self, tensordict):
        return self.observation_spec.rand().update(
            {"reward": self.reward_spec.rand(), "done": torch.zeros(1, dtype=torch.bool)}
        )

    def _reset(self, tensordict):
        return self.observation_spec.rand().update({"done": torch.zeros(1, dtype=torch.bool)})

    def _set_seed(self, seed):
        return seed


class OneHotEnv(CountEnv):
    """CountEnv with a one-hot action over `n` choices; records the action it receives."""

    def __init__(self, n: int = 3, batch_size=()) -> None:
        super().__init__(batch_size=batch_size)
        self.action_spec = OneHot(n, shape=(*self.batch_size, n))
        self.received = None

    def _step(self, tensordict):
        self.received = tensordict["action"].clone()
        return super()._step(tensordict)


class MaskedEnv(EnvBase):
    """Four actions, each allowed once per episode; the mask is an observation and a state."""

    def __init__(self, one_hot: bool = False) -> None:
        super().__init__()
        self.one_hot = one_hot
        self.action_spec = OneHot(4) if one_hot else Categorical(4)
        self.state_spec = Composite(action_mask=Binary(4, dtype=torch.bool))
        self.observation_spec = Composite(obs=Unbounded(3), action_mask=Binary(4, dtype=torch.bool))
        self.reward_spec = Unbounded(1)

    def _reset(self, tensordict):
        return TensorDict(obs=torch.zeros(3), action_mask=torch.ones(4, dtype=torch.bool))

    def _step(self, tensordict):
        action = tensordict["action"]
        index = action.long().argmax(-1) if self.one_hot else action
        mask = tensordict["action_mask"].scatter(-1, index.unsqueeze(-1), False)
        return TensorDict(
            obs=torch.zeros(3), action_mask=mask, reward=torch.zeros(1), done=~mask.any().view(1)
        )

    def _set_seed(self, seed):
        return seed


class EmptySpecsEnv(EnvBase):
    """Declares empty composites among its observations, rewards and actions (torchrl's DummyEnv)."""

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(
            observation=Unbounded(3), other=Composite(another_other=Composite())
        )
        self.full_action_spec = Composite(action=Unbounded(3), empty_action=Composite())
        self.reward_spec = Composite(reward=Unbounded(1), other_reward=Composite())
        self.seen_empty_action = False

    def _reset(self, tensordict):
        return self.observation_spec.rand().update(self.full_done_spec.zero())

    def _step(self, tensordict):
        self.seen_empty_action = "empty_action" in tensordict.keys()
        out = self.observation_spec.rand().update(self.full_done_spec.zero())
        return out.update(self.full_reward_spec.rand())

    def _set_seed(self, seed):
        return seed

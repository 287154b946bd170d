"""Envs shared by the rlcore tests (rlcore cannot depend on rlmocks): imported as a module."""

from __future__ import annotations

import torch
from tensordict import LazyStackedTensorDict, TensorDict

from rlcore import EnvBase, ModelBasedEnvBase
from rlspecs import Binary, Bounded, Categorical, Composite, Unbounded, stack_specs


def done_leaf(batch_size=()) -> Categorical:
    return Categorical(2, shape=(*batch_size, 1), dtype=torch.bool)


class CountingEnv(EnvBase):
    """Counts the actions taken (Binary action); done (and terminated) past ``max_steps``.

    A root ``"_reset"`` resets only the flagged entries to ``start_val``.
    """

    def __init__(self, max_steps: int = 5, start_val: int = 0, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_steps = max_steps
        self.start_val = start_val
        batch = self.batch_size
        self.observation_spec = Composite(
            observation=Unbounded((*batch, 1), dtype=torch.int32), shape=batch
        )
        self.action_spec = Binary(n=1, shape=(*batch, 1))
        self.reward_spec = Unbounded((*batch, 1))
        self.done_spec = done_leaf(batch)
        self.register_buffer("count", torch.zeros((*batch, 1), dtype=torch.int32))
        self.reset_inputs: list = []

    def _set_seed(self, seed):
        if seed is not None:
            torch.manual_seed(seed)

    def _reset(self, tensordict):
        self.reset_inputs.append(None if tensordict is None else tensordict.clone())
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None:
            self.count.fill_(self.start_val)
        else:
            self.count[reset.reshape(self.count.shape)] = self.start_val
        done = self.count > self.max_steps
        return TensorDict(
            {"observation": self.count.clone(), "done": done, "terminated": done.clone()},
            self.batch_size,
            device=self.device,
        )

    def _step(self, tensordict):
        action = tensordict.get("action")
        self.count += action.to(torch.int32).reshape(self.count.shape)
        done = self.count > self.max_steps
        return TensorDict(
            {
                "observation": self.count.clone(),
                "reward": torch.zeros(self.count.shape),
                "done": done,
                "terminated": done.clone(),
            },
            self.batch_size,
            device=self.device,
        )


class TerminatedOnlyEnv(CountingEnv):
    """Returns ``terminated`` and ``truncated`` only: the framework derives ``done``."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        batch = self.batch_size
        self.done_spec = Composite(
            terminated=done_leaf(batch), truncated=done_leaf(batch), shape=batch
        )

    def _reset(self, tensordict):
        return super()._reset(tensordict).exclude("done", "terminated")

    def _step(self, tensordict):
        out = super()._step(tensordict).exclude("done")
        out.set("truncated", torch.zeros_like(out["terminated"]))
        return out


class NestedCountingEnv(CountingEnv):
    """``CountingEnv`` with observation, action, reward and done under ``"data"`` (dim ``n``)."""

    def __init__(self, nested_dim: int = 3, has_root_done: bool = False, **kwargs) -> None:
        super().__init__(**kwargs)
        self.nested_dim = nested_dim
        self.has_root_done = has_root_done
        batch = self.batch_size
        nested = (*batch, nested_dim)
        self.observation_spec = Composite(
            data=Composite(states=Unbounded((*nested, 1), dtype=torch.int32), shape=nested),
            shape=batch,
        )
        self.action_spec = Composite(
            data=Composite(action=Binary(n=1, shape=(*nested, 1)), shape=nested), shape=batch
        )
        self.reward_spec = Composite(
            data=Composite(reward=Unbounded((*nested, 1)), shape=nested), shape=batch
        )
        done = Composite(
            data=Composite(done=done_leaf(nested), terminated=done_leaf(nested), shape=nested),
            shape=batch,
        )
        if has_root_done:
            done["done"] = done_leaf(batch)
        self.done_spec = done

    def _nest(self, flat, with_reward: bool):
        nested = (*self.batch_size, self.nested_dim, 1)
        done = flat["done"].unsqueeze(-2).expand(nested).clone()
        data = {"states": flat["observation"].unsqueeze(-2).expand(nested).clone(), "done": done}
        data["terminated"] = done.clone()
        if with_reward:
            data["reward"] = flat["reward"].unsqueeze(-2).expand(nested).clone()
        out = TensorDict(
            {"data": TensorDict(data, (*self.batch_size, self.nested_dim))},
            self.batch_size,
        )
        if self.has_root_done:
            out["done"] = flat["done"]
            out["terminated"] = flat["terminated"]
        return out

    def _reset(self, tensordict):
        return self._nest(super()._reset(tensordict), with_reward=False)

    def _step(self, tensordict):
        action = tensordict.get(("data", "action")).max(-2).values
        flat = super()._step(TensorDict({"action": action}, self.batch_size))
        return self._nest(flat, with_reward=True)


class HeterogeneousEnv(EnvBase):
    """Two agents under ``"agents"`` with observations and actions of different sizes (lazy)."""

    def __init__(self, max_steps: int = 5, **kwargs) -> None:
        super().__init__(**kwargs)
        self.max_steps = max_steps
        batch = self.batch_size
        sizes = (2, 3)
        agents = (*batch, len(sizes))
        obs = stack_specs(
            [Composite(vector=Unbounded((*batch, n)), shape=batch) for n in sizes], len(batch)
        )
        act = stack_specs(
            [Composite(action=Bounded(-1, 1, shape=(*batch, n)), shape=batch) for n in sizes],
            len(batch),
        )
        self.observation_spec = Composite(agents=obs, shape=batch)
        self.action_spec = Composite(agents=act, shape=batch)
        self.reward_spec = Composite(
            agents=Composite(reward=Unbounded((*agents, 1)), shape=agents), shape=batch
        )
        self.done_spec = Composite(
            agents=Composite(done=done_leaf(agents), shape=agents), shape=batch
        )
        self.count = torch.zeros((*batch, 1))
        self.sizes = sizes

    def _set_seed(self, seed):
        if seed is not None:
            torch.manual_seed(seed)

    def _data(self):
        batch = self.batch_size
        members = [
            TensorDict({"vector": self.count.expand(*batch, n).clone()}, batch) for n in self.sizes
        ]
        return LazyStackedTensorDict.lazy_stack(members, len(batch))

    def _reset(self, tensordict):
        self.count.zero_()
        agents = (*self.batch_size, len(self.sizes))
        data = self._data()
        data.set("done", torch.zeros((*agents, 1), dtype=torch.bool))
        return TensorDict({"agents": data}, self.batch_size)

    def _step(self, tensordict):
        self.count += 1
        agents = (*self.batch_size, len(self.sizes))
        data = self._data()
        data.set("reward", torch.ones((*agents, 1)))
        data.set("done", (self.count > self.max_steps).unsqueeze(-2).expand(*agents, 1).clone())
        return TensorDict({"agents": data}, self.batch_size)


class UnlockedEnv(EnvBase):
    """Not batch-locked: accepts tensordicts with extra leading dims when ``batch_size`` is empty."""

    _batch_locked = False

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        batch = self.batch_size
        self.observation_spec = Composite(observation=Unbounded((*batch, 1)), shape=batch)
        self.action_spec = Unbounded((*batch, 1))

    def _set_seed(self, seed):
        pass

    def _reset(self, tensordict):
        batch = tensordict.batch_size if tensordict is not None else self.batch_size
        return TensorDict({"observation": torch.zeros((*batch, 1))}, batch)

    def _step(self, tensordict):
        obs = tensordict["observation"] + tensordict["action"]
        return TensorDict({"observation": obs, "reward": obs.sum(-1)}, tensordict.batch_size)


class DifferentiableEnv(EnvBase):
    """Observation = (observation + action) / |action|: gradients flow through steps."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.observation_spec = Composite(observation=Unbounded(3))
        self.action_spec = Composite(action=Unbounded(3))
        self.reward_spec = Composite(reward=Unbounded(1))
        self.seed = 0

    def _set_seed(self, seed):
        self.seed = seed

    def _reset(self, tensordict):
        td = self.observation_spec.zero().update(self.full_done_spec.zero())
        td["observation"] = (td["observation"] + self.seed % 10).requires_grad_()
        return td

    def _step(self, tensordict):
        action = tensordict.get("action")
        obs = (tensordict.get("observation") + action) / action.norm()
        return TensorDict(
            {"reward": action.sum().unsqueeze(0), **self.full_done_spec.zero(), "observation": obs}
        )


class LinearWorldModel(torch.nn.Module):
    """Next hidden observation from (hidden, action); reward from the hidden observation."""

    def __init__(self) -> None:
        super().__init__()
        self.transition = torch.nn.Linear(5, 4)
        self.reward = torch.nn.Linear(4, 1)
        self.in_keys = ["hidden_observation", "action"]
        self.out_keys = ["hidden_observation", "reward"]

    def forward(self, tensordict):
        hidden = self.transition(
            torch.cat([tensordict["hidden_observation"], tensordict["action"]], -1)
        )
        tensordict.set("hidden_observation", hidden)
        tensordict.set("reward", self.reward(hidden))
        return tensordict


class DummyModelBasedEnv(ModelBasedEnvBase):
    """A model-based env with a 4-dim hidden observation and a 1-dim action."""

    def __init__(self, world_model, device="cpu", dtype=None, batch_size=None) -> None:
        super().__init__(world_model, device=device, dtype=dtype, batch_size=batch_size)
        batch = self.batch_size
        self.observation_spec = Composite(hidden_observation=Unbounded((*batch, 4)), shape=batch)
        self.state_spec = Composite(hidden_observation=Unbounded((*batch, 4)), shape=batch)
        self.action_spec = Unbounded((*batch, 1))
        self.reward_spec = Unbounded((*batch, 1))

    def _reset(self, tensordict):
        return TensorDict(
            {"hidden_observation": self.state_spec["hidden_observation"].rand()},
            self.batch_size,
            device=self.device,
        )

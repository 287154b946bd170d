"""Envs whose agents have done flags of their own: `MultiAgentCountingEnv`, `MockNestedResetEnv`."""

from __future__ import annotations

import logging

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase, MarlGroupMapType, check_marl_grouping
from rlspecs import Binary, Categorical, Composite, Unbounded

__all__ = ["MockNestedResetEnv", "MultiAgentCountingEnv"]

logger = logging.getLogger(__name__)


class MultiAgentCountingEnv(EnvBase):
    """``n_agents`` agents with identical specs, grouped by ``group_map``, sharing one counter.

    Agents are named ``agent_0`` ... ``agent_{n-1}``; ``group_map`` is a
    `MarlGroupMapType` (default: every agent in the group ``"agents"``) or a dict of group
    names to agent names (checked by `check_marl_grouping`). Specs (``*B`` = batch_size),
    under ``(group, agent)``: observation ``observation`` Unbounded float32 (*B, 3, 4);
    action ``action`` Binary(1) (*B, 1); reward ``reward`` Unbounded (*B, 1); ``done``
    (completed with ``terminated``) bool (*B, 1). At the root, ``env_done_key`` (default
    ``"env_done"``) bool (*B, 1); its level has no ``done``, so no ``terminated`` is added.

    The buffer ``count`` ((*B, 1) int32) is the state: reset sets it to ``start_val``
    (only where a root ``"_reset"`` is True, if given), a step adds 1 whatever the
    actions. Every done flag is ``count > max_steps``; observations are drawn from the
    global RNG (``torch.rand``); rewards are zero. (Current torchrl's class only works with
    an empty batch size; this one takes any.)

    Examples:
        >>> env = MultiAgentCountingEnv(n_agents=2, max_steps=2)
        >>> env.done_keys[:3]
        ['env_done', ('agents', 'agent_0', 'done'), ('agents', 'agent_0', 'terminated')]
        >>> env.rollout(10)["next", "env_done"].squeeze(-1)
        tensor([False, False,  True])
    """

    def __init__(
        self,
        n_agents: int,
        group_map: MarlGroupMapType | dict[str, list[str]] = MarlGroupMapType.ALL_IN_ONE_GROUP,
        max_steps: int = 5,
        start_val: int = 0,
        env_done_key: str = "env_done",
        **kwargs,
    ) -> None:
        super().__init__(**kwargs)
        self.max_steps = max_steps
        self.start_val = start_val
        self.env_done_key = env_done_key
        self.n_agents = n_agents
        self.agent_names = [f"agent_{idx}" for idx in range(n_agents)]
        if isinstance(group_map, MarlGroupMapType):
            group_map = group_map.get_group_map(self.agent_names)
        check_marl_grouping(group_map, self.agent_names)
        self.group_map = group_map
        self._make_specs()
        self.register_buffer(
            "count", torch.zeros((*self.batch_size, 1), dtype=torch.int32, device=self.device)
        )

    def _make_specs(self) -> None:
        batch_size, device = self.batch_size, self.device
        scalar = (*batch_size, 1)

        def level(**leaves) -> Composite:
            return Composite(leaves, shape=batch_size, device=device)

        def per_agent(make_leaves) -> Composite:
            return level(
                **{
                    group: level(**{agent: level(**make_leaves()) for agent in agents})
                    for group, agents in self.group_map.items()
                }
            )

        self.full_observation_spec = per_agent(
            lambda: {"observation": Unbounded((*batch_size, 3, 4), dtype=torch.float32)}
        )
        self.full_reward_spec = per_agent(lambda: {"reward": Unbounded(scalar)})
        self.full_action_spec = per_agent(lambda: {"action": Binary(n=1, shape=scalar)})
        done = per_agent(lambda: {"done": Categorical(2, shape=scalar, dtype=torch.bool)})
        done[self.env_done_key] = Categorical(2, shape=scalar, dtype=torch.bool, device=device)
        self.full_done_spec = done

    def _set_seed(self, seed: int | None) -> None:
        torch.manual_seed(seed)

    def _outputs(self, with_reward: bool) -> TensorDictBase:
        done = self.count > self.max_steps
        result = TensorDict(batch_size=self.batch_size, device=self.device)
        for group, agents in self.group_map.items():
            for agent in agents:
                obs_dtype = self.full_observation_spec[group, agent, "observation"].dtype
                entries = {
                    "observation": torch.rand(
                        (*self.batch_size, 3, 4), dtype=obs_dtype, device=self.device
                    ),
                    "done": done.clone(),
                    "terminated": done.clone(),
                }
                if with_reward:
                    reward_dtype = self.full_reward_spec[group, agent, "reward"].dtype
                    entries["reward"] = torch.zeros(
                        done.shape, dtype=reward_dtype, device=self.device
                    )
                result.set((group, agent), TensorDict(entries, batch_size=self.batch_size))
        result.set(self.env_done_key, done.clone())
        return result

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        reset = None if tensordict is None else tensordict.get("_reset", None)
        if reset is None:
            self.count.fill_(self.start_val)
        else:
            self.count[reset.reshape(self.count.shape)] = self.start_val
        return self._outputs(with_reward=False)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count += 1
        return self._outputs(with_reward=True)


class MockNestedResetEnv(EnvBase):
    """Two agents with done flags of their own, and optionally a root done that prevails.

    Specs: no observation, action or reward; done ``("agent_1", "done")`` and
    ``("agent_2", "done")`` Binary(1) bool (1,), each completed with ``terminated``;
    with ``done_at_root=True`` also a root ``done`` (and ``terminated``).

    Reset zeroes the step counter and returns every done False (and logs, at INFO level
    on this module's logger, how many steps the episode had). A step counts; the episode
    ends after ``num_steps`` steps: with ``done_at_root`` the root done says so while
    ``agent_1`` is always done and ``agent_2`` never (so only the root may trigger a
    reset); without it, ``agent_1`` carries the end and ``agent_2`` is never done.

    Examples:
        >>> env = MockNestedResetEnv(num_steps=2, done_at_root=True)
        >>> td = env.rollout(5, break_when_any_done=False)
        >>> td["next", "done"].squeeze(-1)
        tensor([False,  True, False,  True, False])
        >>> td["next", "agent_1", "done"].all().item()
        True
    """

    def __init__(self, num_steps: int, done_at_root: bool) -> None:
        super().__init__(device="cpu")
        self._num_steps = num_steps
        self._counter = 0
        self.done_at_root = done_at_root
        self.full_reward_spec = Composite(device=self.device)
        done_spec = Composite(
            {
                ("agent_1", "done"): Binary(1, dtype=torch.bool),
                ("agent_2", "done"): Binary(1, dtype=torch.bool),
            }
        )
        if done_at_root:
            done_spec["done"] = Binary(1, dtype=torch.bool)
        self.full_done_spec = done_spec

    @staticmethod
    def _flag(value: bool) -> torch.Tensor:
        return torch.tensor([value], dtype=torch.bool)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        logger.info("Reset after %d steps!", self._counter)
        if tensordict is not None:
            logger.info("tensordict at reset %s", tensordict.to_dict())
        self._counter = 0
        result = TensorDict(
            {("agent_1", "done"): self._flag(False), ("agent_2", "done"): self._flag(False)}
        )
        if self.done_at_root:
            result["done"] = self._flag(False)
        return result

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self._counter += 1
        ended = self._counter >= self._num_steps
        if self.done_at_root:
            return TensorDict(
                {
                    "done": self._flag(ended),
                    ("agent_1", "done"): self._flag(True),
                    ("agent_2", "done"): self._flag(False),
                }
            )
        return TensorDict(
            {("agent_1", "done"): self._flag(ended), ("agent_2", "done"): self._flag(False)}
        )

    def _set_seed(self, seed: int | None) -> None:
        pass

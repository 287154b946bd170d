"""Deterministic counters that ignore the action: `MockSerialEnv` and the `MockBatched*` envs."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from tensordict import TensorDict, TensorDictBase

from rlcore import EnvBase
from rlspecs import Categorical, Composite, Unbounded

__all__ = ["MockBatchedLockedEnv", "MockBatchedUnLockedEnv", "MockSerialEnv"]

SEED_ERROR = "{cls}.set_seed expects a seed >= 1, got {seed}."


class _SeededCounter(EnvBase):
    """A counter seeded to ``seed % 17`` whose step ignores the action (not exported)."""

    # stepped without an action (rand_step samples none): a given one is still checked
    _action_required = False

    def _set_seed(self, seed: int | None) -> None:
        if seed is None or seed < 1:
            raise ValueError(SEED_ERROR.format(cls=type(self).__name__, seed=seed))
        self.seed = seed
        self.counter = seed % 17
        self._update_max_val()

    def _update_max_val(self) -> None:
        self.max_val = max(self.counter + 100, 2 * self.counter)

    def rand_step(self, tensordict: TensorDictBase | None = None) -> TensorDictBase:
        """Step without sampling an action: these envs ignore it.

        Examples:
            >>> env = MockSerialEnv()
            >>> _ = env.set_seed(1)
            >>> env.rand_step(env.reset())["next", "observation"]
            tensor([2.])
        """
        return self.step(tensordict)


class MockSerialEnv(_SeededCounter):
    """A scalar counter: each step adds 1 and reports it as observation and reward.

    Specs: observation ``observation`` Unbounded (1,); action ``action`` Unbounded (1,)
    (ignored); reward Unbounded (1,); done/terminated bool (1,); no state. Batch ``()``.

    ``set_seed(seed)`` (seed >= 1, required before use) sets ``counter = seed % 17``
    and ``max_val = max(counter + 100, 2 * counter)``. Reset recomputes ``max_val`` and
    keeps the counter. A step increments ``counter`` and returns it as observation and
    reward; done is ``counter >= max_val`` (first true 100 steps after seeding).

    Examples:
        >>> env = MockSerialEnv()
        >>> _ = env.set_seed(100)
        >>> env.reset()["observation"]
        tensor([15.])
    """

    def __init__(self, device: torch.device | str | None = "cpu") -> None:
        super().__init__(device=device)
        done = Categorical(2, shape=(1,), dtype=torch.bool)
        self.full_observation_spec = Composite(observation=Unbounded(shape=(1,))).to(self.device)
        self.full_action_spec = Composite(action=Unbounded(shape=(1,))).to(self.device)
        self.full_reward_spec = Composite(reward=Unbounded(shape=(1,))).to(self.device)
        self.full_done_spec = Composite(done=done, terminated=done.clone()).to(self.device)
        self.full_state_spec = Composite(device=self.device)
        self.is_closed = False

    def _outputs(self) -> dict[str, torch.Tensor]:
        value = torch.tensor([float(self.counter)], device=self.device)
        done = torch.tensor([self.counter >= self.max_val], device=self.device)
        return {"observation": value, "done": done, "terminated": done.clone()}

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self._update_max_val()
        return TensorDict(self._outputs(), batch_size=[], device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.counter += 1
        outputs = self._outputs()
        outputs["reward"] = outputs["observation"].clone()
        return TensorDict(outputs, batch_size=[], device=self.device)


class MockBatchedLockedEnv(_SeededCounter):
    """The `MockSerialEnv` counter with a batch size; one counter shared by every element.

    Specs (``*B`` = batch_size): observation ``observation`` Unbounded (*B, 1), also the
    state; action ``action`` Unbounded (*B, 1) (ignored); reward Unbounded (*B, 1);
    done/terminated bool (*B, 1).

    ``counter`` starts at 0; ``set_seed`` sets it as in `MockSerialEnv`. Outputs are
    ``counter`` broadcast to the input's batch: reset keeps the counter and recomputes
    ``max_val``; a step increments it and returns it as observation and reward, with
    done ``counter >= max_val``. ``batch_locked`` is True.

    Examples:
        >>> env = MockBatchedLockedEnv(batch_size=[2])
        >>> _ = env.set_seed(1)
        >>> env.rand_step(env.reset())["next", "observation"].squeeze(-1)
        tensor([2., 2.])
    """

    def __init__(
        self,
        device: torch.device | str | None = "cpu",
        batch_size: Sequence[int] | None = None,
    ) -> None:
        super().__init__(device=device, batch_size=torch.Size(batch_size or ()))
        shape = (*self.batch_size, 1)
        done = Categorical(2, shape=shape, dtype=torch.bool)

        def composite(**leaves) -> Composite:
            return Composite(leaves, shape=self.batch_size).to(self.device)

        self.full_observation_spec = composite(observation=Unbounded(shape=shape))
        self.full_state_spec = composite(observation=Unbounded(shape=shape))
        self.full_action_spec = composite(action=Unbounded(shape=shape))
        self.full_reward_spec = composite(reward=Unbounded(shape=shape))
        self.full_done_spec = composite(done=done, terminated=done.clone())
        self.counter = 0
        self.is_closed = False

    def _batch_of(self, tensordict: TensorDictBase | None) -> torch.Size:
        """``(*lead, *batch_size)``: the input's batch, or the env's when there is no input."""
        if tensordict is None:
            return self.batch_size
        n_batch = len(self.batch_size)
        lead = tensordict.batch_size[: len(tensordict.batch_size) - n_batch]
        return torch.Size((*lead, *self.batch_size))

    def _outputs(self, batch_size: torch.Size) -> dict[str, torch.Tensor]:
        shape = (*batch_size, 1)
        value = torch.full(shape, float(self.counter), device=self.device)
        done = torch.full(shape, self.counter >= self.max_val, device=self.device)
        return {"observation": value, "done": done, "terminated": done.clone()}

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        self._update_max_val()
        batch_size = self._batch_of(tensordict)
        return TensorDict(self._outputs(batch_size), batch_size=batch_size, device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.counter += 1
        outputs = self._outputs(tensordict.batch_size)
        outputs["reward"] = outputs["observation"].clone()
        return TensorDict(outputs, batch_size=tensordict.batch_size, device=self.device)


class MockBatchedUnLockedEnv(MockBatchedLockedEnv):
    """`MockBatchedLockedEnv` with ``batch_locked=False``: outputs follow the input's batch.

    Stepping a tensordict of batch (2,) on an env of batch () returns outputs of batch
    (2,); specs and dynamics are those of `MockBatchedLockedEnv`.

    Examples:
        >>> from tensordict import TensorDict
        >>> env = MockBatchedUnLockedEnv()
        >>> _ = env.set_seed(1)
        >>> env.step(TensorDict({"action": torch.zeros(2, 1)}, [2]))["next", "reward"].shape
        torch.Size([2, 1])
    """

    def __init__(
        self,
        device: torch.device | str | None = "cpu",
        batch_size: Sequence[int] | None = None,
    ) -> None:
        super().__init__(device=device, batch_size=batch_size)
        self._batch_locked = False

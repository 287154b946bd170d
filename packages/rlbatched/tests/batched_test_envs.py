"""Envs that only the rlbatched tests need: failing, hanging, extra-key and differentiable ones."""

from __future__ import annotations

import functools
import multiprocessing
import os
import time

import torch
from tensordict import LazyStackedTensorDict, TensorDict, TensorDictBase

from rlbatched import ParallelEnv, SerialEnv
from rlcore import EnvBase
from rlmocks import CountingEnv
from rlspecs import Composite, Unbounded

# Batched-env constructors by name; the fixtures in conftest.py build envs through these.
FACTORIES = {
    "serial": SerialEnv,
    "fork": functools.partial(ParallelEnv, mp_start_method="fork"),
    "spawn": functools.partial(ParallelEnv, mp_start_method="spawn"),
    "forkserver": functools.partial(ParallelEnv, mp_start_method="forkserver"),
}


def in_worker() -> bool:
    """True in a process started by multiprocessing (a ParallelEnv worker)."""
    return multiprocessing.parent_process() is not None


class OddError(Exception):
    """Hard to pass on: its ``__str__`` raises (``unprintable``), or it pickles but cannot be
    unpickled, since its args do not rebuild it (otherwise)."""

    def __init__(self, phase: str, unprintable: bool):
        super().__init__(f"{phase}/2")
        self.phase = phase
        self.unprintable = unprintable

    def __reduce__(self):
        if self.unprintable:  # rebuilt in the main process (and still unprintable there)
            return type(self), (self.phase, True)
        return super().__reduce__()  # args ("step/2",) do not rebuild it

    def __str__(self) -> str:
        if self.unprintable:
            raise RuntimeError("no text for you")
        return super().__str__()


ERRORS = {
    "value": lambda phase: ValueError(f"boom in _{phase}"),
    "str": lambda phase: OddError(phase, unprintable=True),
    "twoargs": lambda phase: OddError(phase, unprintable=False),
}


class FailingCountingEnv(CountingEnv):
    """A CountingEnv whose ``_step`` or ``_reset`` raises (ValueError by default) when asked to."""

    def __init__(self, fail_on: str | None = None, error: str = "value", **kwargs):
        super().__init__(**kwargs)
        self.fail_on = fail_on
        self.error = error

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.fail_on == "step":
            raise ERRORS[self.error]("step")
        return super()._step(tensordict)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        if self.fail_on == "reset":
            raise ERRORS[self.error]("reset")
        return super()._reset(tensordict, **kwargs)


class BadStartCountingEnv(CountingEnv):
    """A CountingEnv that, in a worker, cannot be built (``fail``), never finishes building
    (``hang``) or kills its process while being built (``exit``, status 4)."""

    def __init__(self, mode: str = "fail", **kwargs):
        super().__init__(**kwargs)
        if in_worker():
            if mode == "hang":
                time.sleep(3600)
            if mode == "exit":
                os._exit(4)
            raise KeyError("no such task")


class SlowCountingEnv(CountingEnv):
    """A CountingEnv whose steps take ``delay`` seconds."""

    def __init__(self, delay: float = 0.5, **kwargs):
        super().__init__(**kwargs)
        self.delay = delay

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        time.sleep(self.delay)
        return super()._step(tensordict)


class GatedCountingEnv(CountingEnv):
    """A CountingEnv whose steps wait until the file ``gate`` exists (no gate: no wait).

    A test holds a sub-env in flight for as long as it needs, then lets it go by creating the
    file: unlike a sleep, no load on the machine can make it answer early.
    """

    def __init__(self, gate: str | None = None, **kwargs):
        super().__init__(**kwargs)
        self.gate = gate

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.gate is not None:
            deadline = time.monotonic() + 120
            while not os.path.exists(self.gate):
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the gate {self.gate} was never opened")
                time.sleep(0.005)
        return super()._step(tensordict)


class DyingCountingEnv(CountingEnv):
    """A CountingEnv whose worker process exits (status 3) at step ``die_at``."""

    def __init__(self, die_at: int = 1, **kwargs):
        super().__init__(**kwargs)
        self.die_at = die_at
        self.steps = 0

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.steps += 1
        if self.steps == self.die_at and in_worker():
            os._exit(3)
        return super()._step(tensordict)


class GainEnv(EnvBase):
    """Reads a state entry ``"gain"`` and its observation at each step: obs += gain * action."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(1))
        self.state_spec = Composite(gain=Unbounded(1))
        self.action_spec = Unbounded(1)
        self.reward_spec = Unbounded(1)

    def _set_seed(self, seed: int | None) -> None:
        pass

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        return TensorDict({"observation": torch.zeros(1), "gain": torch.ones(1)}, [])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        obs = tensordict["observation"] + tensordict["gain"] * tensordict["action"]
        return TensorDict({"observation": obs, "reward": torch.zeros(1)}, [])


class ObsEchoEnv(EnvBase):
    """Tells whether its step was given an observation: next obs = given obs + 1, else -1."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(1))
        self.action_spec = Unbounded(1)
        self.reward_spec = Unbounded(1)

    def _set_seed(self, seed: int | None) -> None:
        pass

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        return TensorDict({"observation": torch.zeros(1)}, [])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        given = tensordict.get("observation", None)
        obs = given + 1 if given is not None else torch.full((1,), -1.0)
        return TensorDict({"observation": obs, "reward": torch.zeros(1)}, [])


class HangingCountingEnv(CountingEnv):
    """A CountingEnv whose ``_step`` sleeps for an hour when ``hang`` is set."""

    def __init__(self, hang: bool = False, **kwargs):
        super().__init__(**kwargs)
        self.hang = hang

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        if self.hang:
            time.sleep(3600)
        return super()._step(tensordict)


class ExtraObsCountingEnv(CountingEnv):
    """A CountingEnv with one more observation, ``"extra"`` (ones of shape (2,))."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        spec = self.full_observation_spec.clone()
        spec["extra"] = Unbounded(shape=(*self.batch_size, 2), device=self.device)
        self.full_observation_spec = spec

    def _extra(self) -> torch.Tensor:
        return torch.ones((*self.batch_size, 2), device=self.device)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return super()._step(tensordict).set("extra", self._extra())

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        return super()._reset(tensordict, **kwargs).set("extra", self._extra())


class DifferentiableEnv(EnvBase):
    """An env whose observations carry gradients from the actions (seed's test_backprop)."""

    def __init__(self, seed: int = 0, device: str = "cpu"):
        super().__init__(device=device)
        self.observation_spec = Composite(observation=Unbounded(3, device=device), device=device)
        self.action_spec = Composite(action=Unbounded(3, device=device), device=device)
        self.reward_spec = Composite(reward=Unbounded(1, device=device), device=device)
        self.seed = seed

    def _set_seed(self, seed: int | None) -> None:
        self.seed = seed

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        td = self.observation_spec.zero().update(self.full_done_spec.zero())
        td["observation"] = (td["observation"].clone() + self.seed % 10).requires_grad_()
        return td

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict.get("action")
        obs = (tensordict.get("observation") + action) / action.norm()
        return TensorDict(
            {"reward": action.sum().unsqueeze(0), **self.full_done_spec.zero(), "observation": obs}
        )


class StartStateEnv(EnvBase):
    """Resets its observation to the ``"start"`` state entry of the input, when given."""

    def __init__(self):
        super().__init__()
        self.observation_spec = Composite(observation=Unbounded(1))
        self.state_spec = Composite(start=Unbounded(1))
        self.action_spec = Unbounded(1)
        self.reward_spec = Unbounded(1)

    def _set_seed(self, seed: int | None) -> None:
        pass

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        start = torch.zeros(1) if tensordict is None else tensordict["start"].clone()
        return TensorDict({"observation": start.clone(), "start": start}, [])

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        return TensorDict(
            {"observation": tensordict.get("observation") + 1, "reward": torch.zeros(1)}, []
        )


class UnsqueezingCountingEnv(CountingEnv):
    """A CountingEnv whose reset goes through ``TensorDict.unsqueeze`` (a lazy-legacy query)."""

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        return super()._reset(tensordict, **kwargs).unsqueeze(0).squeeze(0)


class GrowingObsEnv(EnvBase):
    """Dynamic specs: two rows whose observation ``"obs"`` grows by one entry at each step (row
    ``i`` has ``count + i + 1`` entries, all equal to ``count``), a lazy stack whose spec stacks
    the reset shapes lazily (``-1``); the reward is ``count``."""

    def __init__(self, **kwargs):
        super().__init__(batch_size=(2,), **kwargs)
        self.count = 0
        rows = [Composite(obs=Unbounded((size,))) for size in (1, 2)]
        self.full_observation_spec = torch.stack(rows, 0)
        self.full_action_spec = Composite(action=Unbounded((2, 1)), shape=(2,))
        self.full_reward_spec = Composite(reward=Unbounded((2, 1)), shape=(2,))

    def _set_seed(self, seed: int | None) -> None:
        pass

    def _outputs(self) -> TensorDictBase:
        rows = [
            TensorDict(obs=torch.full((self.count + i + 1,), float(self.count))) for i in (0, 1)
        ]
        out = LazyStackedTensorDict(*rows, stack_dim=0)
        out.set("done", torch.zeros(2, 1, dtype=torch.bool))
        out.set("terminated", torch.zeros(2, 1, dtype=torch.bool))
        return out

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs) -> TensorDictBase:
        self.count = 0
        return self._outputs()

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        self.count += 1
        return self._outputs().set("reward", torch.full((2, 1), float(self.count)))


class EmptyInfoEnv(CountingEnv):
    """A CountingEnv whose observation spec holds an empty Composite, ``("info", "extra")``
    (``nested``) or ``"info"``."""

    def __init__(self, nested: bool = False, **kwargs):
        super().__init__(**kwargs)
        spec = self.full_observation_spec.clone()
        spec["info"] = Composite(extra=Composite()) if nested else Composite()
        self.full_observation_spec = spec


class RewardCountingEnv(CountingEnv):
    """A CountingEnv rewarded with its count (so that a placeholder's zero reward shows)."""

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        out = super()._step(tensordict)
        return out.set("reward", self.count.to(torch.float32))

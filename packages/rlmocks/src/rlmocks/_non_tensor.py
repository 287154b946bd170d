"""Envs carrying non-tensor data (metadata, strings) beside or instead of tensors."""

from __future__ import annotations

import random
import string

import torch
from tensordict import TensorDictBase

from rlcore import EnvBase
from rlspecs import Composite, NonTensor, Unbounded

from ._counting import CountingEnv

__all__ = ["CountingEnvWithString", "EnvWithMetadata", "Str2StrEnv"]

STRING_ACTION_ERROR = "Str2StrEnv expects a str under 'action', got {type}."
SIZE_RANGE_ERROR = "{cls}: min_size must not exceed max_size (got min_size={low}, max_size={high})."


def _random_string(min_size: int, max_size: int) -> str:
    """A lowercase ASCII string of a length drawn in [min_size, max_size] (``random``'s RNG)."""
    size = random.randint(min_size, max_size)
    return "".join(random.choice(string.ascii_lowercase) for _ in range(size))


def _check_sizes(cls: type, min_size: int, max_size: int) -> None:
    if min_size > max_size:
        raise ValueError(SIZE_RANGE_ERROR.format(cls=cls.__name__, low=min_size, high=max_size))


class EnvWithMetadata(EnvBase):
    """An env whose non-tensor entry ``non_tensor`` counts the steps beside a tensor observation.

    Specs (unbatched): observation ``tensor`` Unbounded (3,) and ``non_tensor``
    NonTensor (), which is also the state (the step reads it back); action Unbounded (1,);
    reward Unbounded (1,); done/terminated bool (1,).

    Reset sets ``non_tensor = 0``; a step returns the input's ``non_tensor + 1``. The
    tensor observation and the reward are zeros and the episode never ends. The data
    follow the specs the env was built with, whatever later edits do to its specs.

    Examples:
        >>> env = EnvWithMetadata()
        >>> list(env.rollout(3)["next", "non_tensor"])
        [1, 2, 3]
    """

    def __init__(self) -> None:
        super().__init__()
        self.observation_spec = Composite(tensor=Unbounded(3), non_tensor=NonTensor(shape=()))
        self._saved_obs_spec = self.observation_spec.clone()
        self.state_spec = Composite(non_tensor=NonTensor(shape=()))
        self._saved_state_spec = self.state_spec.clone()
        self.reward_spec = Unbounded(1)
        self._saved_full_reward_spec = self.full_reward_spec.clone()
        self.action_spec = Unbounded(1)
        self._saved_full_action_spec = self.full_action_spec.clone()

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        data = self._saved_obs_spec.zero()
        data.set_non_tensor("non_tensor", 0)
        data.update(self.full_done_spec.zero())
        return data

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        data = self._saved_obs_spec.zero()
        data.set_non_tensor("non_tensor", tensordict["non_tensor"] + 1)
        data.update(self.full_done_spec.zero())
        data.update(self._saved_full_reward_spec.zero())
        return data

    def _set_seed(self, seed: int | None) -> None:
        pass


class CountingEnvWithString(CountingEnv):
    """A `CountingEnv` whose observation also holds a random lowercase string, ``string``.

    Specs: those of `CountingEnv` plus ``string`` NonTensor of shape *B. Keywords
    ``min_size=4`` and ``max_size=30`` bound the string's length; the others go to
    `CountingEnv`.

    Every reset and step draws a fresh string (one for the whole batch) from Python's
    ``random`` module; the count, done and reward are `CountingEnv`'s.

    Examples:
        >>> env = CountingEnvWithString(min_size=3, max_size=3)
        >>> len(env.reset()["string"])
        3
    """

    def __init__(self, *args, min_size: int = 4, max_size: int = 30, **kwargs) -> None:
        _check_sizes(type(self), min_size, max_size)
        self.max_size = max_size
        self.min_size = min_size
        super().__init__(*args, **kwargs)
        self.observation_spec.set(
            "string",
            NonTensor(
                shape=self.batch_size, device=self.device, example_data=self.get_random_string()
            ),
        )

    def get_random_string(self) -> str:
        """A string of ``min_size`` to ``max_size`` lowercase letters.

        Examples:
            >>> len(CountingEnvWithString(min_size=2, max_size=2).get_random_string())
            2
        """
        return _random_string(self.min_size, self.max_size)

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        result = super()._reset(tensordict)
        result["string"] = self.get_random_string()
        return result

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        result = super()._step(tensordict)
        result["string"] = self.get_random_string()
        return result


class Str2StrEnv(EnvBase):
    """An env whose observation and action are strings (a text-in, text-out env).

    Specs (unbatched): observation ``observation`` NonTensor (example ``"an
    observation!"``); action ``action`` NonTensor (example ``"an action!"``, which a
    random action takes); reward Unbounded float32 (1,); done/terminated bool (1,).

    A step checks that the action is a ``str`` (TypeError otherwise), returns a random
    string of ``min_size`` to ``max_size`` lowercase letters, and draws done and reward
    each as Bernoulli(0.01). Reset returns a random string and done False (current
    torchrl draws done there too, so its reset raises about once in a hundred).
    ``set_seed(seed)`` seeds Python's ``random`` with ``seed`` and torch with 0, as
    current torchrl does.

    Examples:
        >>> env = Str2StrEnv(min_size=5, max_size=5)
        >>> td = env.rand_step(env.reset())
        >>> td["action"], len(td["next", "observation"])
        ('an action!', 5)
    """

    def __init__(self, min_size: int = 4, max_size: int = 10, **kwargs) -> None:
        _check_sizes(type(self), min_size, max_size)
        # set before EnvBase.__init__, as the current class does
        self.observation_spec = Composite(
            observation=NonTensor(example_data="an observation!", shape=())
        )
        self.full_action_spec = Composite(action=NonTensor(example_data="an action!", shape=()))
        self.reward_spec = Unbounded(shape=(1,), dtype=torch.float32)
        self.min_size = min_size
        self.max_size = max_size
        super().__init__(**kwargs)

    def get_random_string(self) -> str:
        """A string of ``min_size`` to ``max_size`` lowercase letters.

        Examples:
            >>> len(Str2StrEnv(min_size=1, max_size=1).get_random_string())
            1
        """
        return _random_string(self.min_size, self.max_size)

    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        action = tensordict["action"]
        if not isinstance(action, str):
            raise TypeError(STRING_ACTION_ERROR.format(type=type(action).__name__))
        out = tensordict.empty()
        out.set("observation", self.get_random_string())
        out.set("done", torch.zeros(1, dtype=torch.bool).bernoulli_(0.01))
        out.set("reward", torch.zeros(1, dtype=torch.float32).bernoulli_(0.01))
        return out

    def _reset(self, tensordict: TensorDictBase | None) -> TensorDictBase:
        out = self.full_done_spec.zero()
        out.set("observation", self.get_random_string())
        return out

    def _set_seed(self, seed: int | None) -> None:
        random.seed(seed)
        torch.manual_seed(0)

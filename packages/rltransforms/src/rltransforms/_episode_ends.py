"""Transforms that end episodes: `TerminateTransform` (a user predicate) and
`RandomTruncationTransform` (random horizons that decorrelate batched envs)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from tensordict import NestedKey, TensorDictBase, unravel_key

from rlspecs import Categorical, Composite

from ._base import Transform, _get

__all__ = ["RandomTruncationTransform", "TerminateTransform"]

STOP_ERROR = "`stop` must be a callable."
NO_PARENT_ERROR = "class {cls} cannot be executed without a parent environment."
PROB_ERROR = "{name} must be in [0, 1], got {value}"
HORIZON_ERROR = "{name} must be >= 1, got {value}"
HORIZON_ORDER_ERROR = "min_horizon ({low}) must be <= max_horizon ({high})"
NO_STEP_COUNTER_ERROR = (
    "RandomTruncationTransform requires a StepCounter earlier in the transform chain that "
    "writes the {key!r} step-count key. Use:\n"
    "  Compose(StepCounter(), RandomTruncationTransform(...))\n"
    "or add StepCounter() before RandomTruncationTransform in your transform pipeline. If "
    "StepCounter uses a custom step_count_key, pass the same key to RandomTruncationTransform."
)
RANDOM_TRUNCATION_CALL_ERROR = (
    "RandomTruncationTransform cannot be called independently, only its step and reset methods "
    "are functional."
)


def _leaf(key: NestedKey) -> str:
    return key if isinstance(key, str) else key[-1]


def _replace_last(key: NestedKey, name: str) -> NestedKey:
    return name if isinstance(key, str) else (*key[:-1], name)


class TerminateTransform(Transform):
    """Ends an episode when `stop(next_tensordict)` holds: ORs the flag into the done entries.

    After each step the predicate's result (a bool or a bool tensor broadcastable to the done
    entries) is OR-ed into every `terminated` entry and, with `write_done=True` (default), every
    `done` entry, so that `rollout(..., break_when_any_done=True)` stops there.

    Args:
        stop: `next_tensordict -> bool or bool tensor`.
        write_done: also set the `done` entries (default True).

    Examples:
        >>> import torch
        >>> from rlmocks import CountingEnv
        >>> from rltransforms import TransformedEnv
        >>> env = TransformedEnv(
        ...     CountingEnv(max_steps=100), TerminateTransform(lambda td: td["observation"] >= 3)
        ... )
        >>> policy = lambda td: td.set("action", torch.ones(1, dtype=torch.int8))
        >>> env.rollout(10, policy)["next", "observation"].squeeze(-1).tolist()
        [1, 2, 3]
    """

    def __init__(self, stop: Callable[[TensorDictBase], Any], *, write_done: bool = True) -> None:
        if not callable(stop):
            raise ValueError(STOP_ERROR)
        super().__init__(in_keys=[], out_keys=[])
        self.stop = stop
        self.write_done = write_done

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        return tensordict_reset

    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        flag = self.stop(next_tensordict)
        if not isinstance(flag, torch.Tensor):
            flag = torch.as_tensor(flag, device=next_tensordict.device)
        flag = flag.bool()
        parent = self.parent
        done_keys = list(parent.done_keys) if parent is not None else ["done"]
        for key in done_keys:
            name = _leaf(key)
            if name == "truncated" or (name == "done" and not self.write_done):
                continue
            current = _get(next_tensordict, key)
            if current is None:
                continue
            broadcast = flag.reshape(*flag.shape, *([1] * (current.ndim - flag.ndim)))
            next_tensordict.set(key, current | broadcast.expand(current.shape))
        return next_tensordict

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Not available: the predicate ends episodes of an env."""
        raise RuntimeError(NO_PARENT_ERROR.format(cls=type(self)))


class RandomTruncationTransform(Transform):
    """Truncates episodes at random horizons, so that batched envs do not end in waves.

    At the first reset each sub-env draws a horizon in `[1, max_horizon]` (spreading the
    sub-envs over the episode's phases); at later resets, with probability `prob`
    (`first_episode_prob` for a sub-env's first full episode) a horizon is drawn in
    `[min_horizon, max_horizon]`, else `max_horizon` is used. A step whose step count reaches
    the horizon sets `truncated` and `done` (next to the step count, nested keys included).

    Place it after a `StepCounter` (same `step_count_key`): it reads its count.

    Args:
        min_horizon: the smallest random horizon (inclusive, >= 1).
        max_horizon: the largest one, and the horizon without random truncation.
        prob: the probability of a random horizon at a reset (default 0.0).
        first_episode_prob: the same for each sub-env's first episode after the spread
            (default: `prob`).
        step_count_key: the step counter's key (a string matches the last part of any key).
        truncated_key: the truncation flag written (next to the step count for a string).
        done_key: the done flag OR-ed with it (next to the step count for a string).

    Examples:
        >>> import torch
        >>> from rlmocks import CountingEnv
        >>> from rltransforms import Compose, StepCounter, TransformedEnv
        >>> _ = torch.manual_seed(0)
        >>> env = TransformedEnv(
        ...     CountingEnv(max_steps=100, batch_size=[4]),
        ...     Compose(StepCounter(), RandomTruncationTransform(min_horizon=2, max_horizon=5)),
        ... )
        >>> r = env.rollout(10, break_when_any_done=False)
        >>> bool((r["next", "step_count"] <= 5).all())
        True
    """

    invertible = False

    def __init__(
        self,
        min_horizon: int,
        max_horizon: int,
        prob: float = 0.0,
        first_episode_prob: float | None = None,
        *,
        step_count_key: NestedKey = "step_count",
        truncated_key: NestedKey = "truncated",
        done_key: NestedKey = "done",
    ) -> None:
        super().__init__()
        if first_episode_prob is None:
            first_episode_prob = prob
        if not 0.0 <= prob <= 1.0:
            raise ValueError(PROB_ERROR.format(name="prob", value=prob))
        if not 0.0 <= first_episode_prob <= 1.0:
            raise ValueError(PROB_ERROR.format(name="first_episode_prob", value=first_episode_prob))
        if min_horizon < 1:
            raise ValueError(HORIZON_ERROR.format(name="min_horizon", value=min_horizon))
        if max_horizon < 1:
            raise ValueError(HORIZON_ERROR.format(name="max_horizon", value=max_horizon))
        if min_horizon > max_horizon:
            raise ValueError(HORIZON_ORDER_ERROR.format(low=min_horizon, high=max_horizon))
        self.prob = prob
        self.first_episode_prob = first_episode_prob
        self.min_horizon = min_horizon
        self.max_horizon = max_horizon
        self.step_count_key = unravel_key(step_count_key)
        self.truncated_key = unravel_key(truncated_key)
        self.done_key = unravel_key(done_key)
        self._horizons: torch.Tensor | None = None
        self._first_episode: torch.Tensor | None = None
        self._initialized = False

    # ------------------------------------------------------------------ keys
    @staticmethod
    def _match(keys: Sequence[NestedKey], target: NestedKey) -> NestedKey | None:
        """`target` if present, else the first key whose last part is `target` (a string)."""
        match = None
        for key in keys:
            key = unravel_key(key)
            if key == target:
                return key
            if match is None and isinstance(target, str) and _leaf(key) == target:
                match = key
        return match

    def _companion(self, step_count_key: NestedKey, companion: NestedKey) -> NestedKey:
        if isinstance(companion, tuple):
            return companion
        return _replace_last(step_count_key, companion)

    def _locate(self, tensordict: TensorDictBase) -> NestedKey | None:
        cached = self.__dict__.get("_located_step_count_key")
        if cached is None:
            cached = self._match(list(tensordict.keys(True, True)), self.step_count_key)
            if cached is not None:
                self.__dict__["_located_step_count_key"] = cached
        return cached

    def set_container(self, container: Any) -> None:
        self.__dict__.pop("_located_step_count_key", None)
        super().set_container(container)

    # ------------------------------------------------------------------ data path
    def _step(self, tensordict: TensorDictBase, next_tensordict: TensorDictBase) -> TensorDictBase:
        key = self._locate(next_tensordict)
        if key is None or self._horizons is None:
            return next_tensordict
        count = next_tensordict.get(key)
        truncate = count >= self._horizons.to(count.device)
        truncated_key = self._companion(key, self.truncated_key)
        done_key = self._companion(key, self.done_key)
        truncated = _get(next_tensordict, truncated_key)
        done = _get(next_tensordict, done_key)
        truncated = torch.zeros_like(truncate) if truncated is None else truncated
        done = torch.zeros_like(truncate) if done is None else done
        next_tensordict.set(truncated_key, truncated | truncate)
        next_tensordict.set(done_key, done | truncate)
        return next_tensordict

    def _reset(
        self, tensordict: TensorDictBase, tensordict_reset: TensorDictBase
    ) -> TensorDictBase:
        key = self._locate(tensordict_reset)
        if key is None:
            return tensordict_reset
        count = tensordict_reset.get(key)
        truncated_key = self._companion(key, self.truncated_key)
        done = _get(tensordict_reset, self._companion(key, self.done_key))
        if done is not None:
            tensordict_reset.set(truncated_key, torch.zeros_like(done))
        if not self._initialized:
            # first reset: a uniform spread over the episode's phases
            self._horizons = torch.randint(
                1, self.max_horizon + 1, count.shape, device=count.device
            )
            self._first_episode = torch.ones(count.shape, dtype=torch.bool, device=count.device)
            self._initialized = True
            return tensordict_reset
        reset_key = _replace_last(key, "_reset")
        mask = None if tensordict is None else _get(tensordict, reset_key)
        if mask is None and reset_key != "_reset" and tensordict is not None:
            mask = _get(tensordict, "_reset")
        if mask is None:
            return tensordict_reset
        mask = mask.reshape(self._horizons.shape).bool()
        if not bool(mask.any()):
            return tensordict_reset
        n = int(mask.sum())
        horizons = torch.randint(
            self.min_horizon, self.max_horizon + 1, (n,), device=self._horizons.device
        )
        first = self._first_episode[mask]
        prob = torch.where(
            first,
            torch.tensor(self.first_episode_prob, device=first.device),
            torch.tensor(self.prob, device=first.device),
        )
        keep_full = torch.rand(n, device=first.device) > prob
        horizons[keep_full] = self.max_horizon
        self._horizons[mask] = horizons
        self._first_episode[mask] = False
        return tensordict_reset

    def forward(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Not available: the horizons belong to an env's episodes."""
        raise NotImplementedError(RANDOM_TRUNCATION_CALL_ERROR)

    # ------------------------------------------------------------------ specs
    def transform_output_spec(self, output_spec: Composite) -> Composite:
        done_spec = output_spec["full_done_spec"]
        observation_keys = (
            list(output_spec["full_observation_spec"].keys(True, True))
            if "full_observation_spec" in output_spec.keys()
            else []
        )
        key = self._match(observation_keys, self.step_count_key)
        if key is None and self.container_ref is not None:
            raise RuntimeError(NO_STEP_COUNTER_ERROR.format(key=self.step_count_key))
        if key is not None:
            truncated_key = self._companion(key, self.truncated_key)
            done_key = self._companion(key, self.done_key)
        else:
            done_key = self._match(list(done_spec.keys(True, True)), self.done_key)
            done_key = self.done_key if done_key is None else done_key
            truncated_key = self._companion(done_key, self.truncated_key)
        done_keys = [unravel_key(k) for k in done_spec.keys(True, True)]
        if truncated_key not in done_keys:
            source = done_spec[done_key] if done_key in done_keys else None
            if source is None:
                source = next((done_spec[k] for k in done_keys if _leaf(k) == "done"), None)
            if source is not None:
                done_spec[truncated_key] = Categorical(
                    2, shape=source.shape, dtype=torch.bool, device=output_spec.device
                )
        return super().transform_output_spec(output_spec)

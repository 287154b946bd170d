"""Generic helpers for tests written against the env API (devices, resets, rollouts, workers)."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import cloudpickle
import torch
from tensordict import TensorDictBase

from rlcore import EnvBase

__all__ = [
    "check_rollout_consistency_multikey_env",
    "decorate_thread_sub_func",
    "get_default_devices",
    "rand_reset",
]

THREAD_COUNT_ERROR = "expected torch.get_num_threads() == {expected} in the worker, got {actual}"


def get_default_devices() -> list[torch.device]:
    """The devices to parametrise tests over: ``[cpu]``, ``[cuda:0]``, or cpu and every GPU.

    Examples:
        >>> import torch
        >>> torch.device("cpu") in get_default_devices() or torch.cuda.device_count() == 1
        True
    """
    num_cuda = torch.cuda.device_count()
    if num_cuda == 0:
        return [torch.device("cpu")]
    if num_cuda == 1:
        return [torch.device("cuda:0")]
    return [torch.device("cpu")] + [torch.device(f"cuda:{i}") for i in range(num_cuda)]


def rand_reset(env: EnvBase) -> TensorDictBase:
    """Random ``"_reset"`` entries for every reset key of ``env``, each with at least one True.

    The result is ``env.full_done_spec.zero()`` with its done leaves replaced by the
    reset entries, so nested levels keep their batch sizes. It draws from torch's
    global RNG.

    Examples:
        >>> from rlmocks import CountingEnv
        >>> rand_reset(CountingEnv())["_reset"]
        tensor([True])
    """
    full_done_spec = env.full_done_spec
    resets = {}
    for reset_key, done_group in zip(env.reset_keys, env.done_keys_groups):
        spec = full_done_spec[done_group[0]]
        value = spec.rand()
        while not value.any():
            value = spec.rand()
        resets[reset_key] = value
    result = full_done_spec.zero()
    result.update(resets)
    return result.exclude(*full_done_spec.keys(True, True))


def _check(condition: torch.Tensor | bool, group: str, what: str) -> None:
    if not bool(condition):
        raise AssertionError(f"MultiKeyCountingEnv rollout, {group}: {what}")


def check_rollout_consistency_multikey_env(td: TensorDictBase, max_steps: int) -> None:
    """Assert that a `MultiKeyCountingEnv` rollout of batch (*B, T) follows the env's dynamics.

    For the root counter and for ``nested_1``/``nested_2``: done is True exactly where
    the observation reached ``max_steps + 1``; after a (root) done the observation
    restarts at 0, otherwise it carries over; a counting action adds 1 to the
    observation and gives reward 1, any other action leaves both unchanged. The
    temporal checks use the first element of every batch dim.

    Raises:
        AssertionError: naming the counter and the check that failed.

    Examples:
        >>> from rlmocks import MultiKeyCountingEnv, MultiKeyCountingEnvPolicy
        >>> env = MultiKeyCountingEnv(max_steps=2)
        >>> policy = MultiKeyCountingEnvPolicy(env.full_action_spec, deterministic=True)
        >>> check_rollout_consistency_multikey_env(env.rollout(5, policy), max_steps=2)
    """
    first = (0,) * (td.ndim - 1)
    root_done = td.get(("next", "done"))[first][:-1].squeeze(-1)
    groups = (
        ("root", (), ("reward",), td.get("action").long().argmax(-1) != 0),
        ("nested_1", ("nested_1",), ("nested_1", "gift"), td.get(("nested_1", "action")) != 0),
        (
            "nested_2",
            ("nested_2",),
            ("nested_2", "reward"),
            td.get(("nested_2", "azione")).squeeze(-1) != 0,
        ),
    )
    for group, prefix, reward_key, counted in groups:
        obs = td.get((*prefix, "observation"))
        next_obs = td.get(("next", *prefix, "observation"))
        done = td.get(("next", *prefix, "done"))
        reward = td.get(("next", *reward_key))
        # the root observation is (*B, T, 10, 10, 3); the nested ones (*B, T, rows, width)
        at_max = (next_obs[..., 0, 0, 0] if not prefix else next_obs[..., 0]) == max_steps + 1
        _check(done[at_max].all(), group, f"done must be True where the count is {max_steps + 1}")
        _check((~done[~at_max]).all(), group, f"done must be False below {max_steps + 1}")
        following = obs[first][1:]
        _check((following[root_done] == 0).all(), group, "the count must restart at 0 after done")
        _check(
            (following[~root_done] == next_obs[first][:-1][~root_done]).all(),
            group,
            "the count must carry over to the next step when not done",
        )
        _check((next_obs[counted] == obs[counted] + 1).all(), group, "a counting action must add 1")
        _check((reward[counted] == 1).all(), group, "a counting action must give reward 1")
        _check(
            (next_obs[~counted] == obs[~counted]).all(),
            group,
            "a non-counting action must leave the count unchanged",
        )
        _check((reward[~counted] == 0).all(), group, "a non-counting action must give reward 0")


class _ThreadCheckedCall:
    """``func(*args, **kwargs)`` after checking the thread count; pickled with cloudpickle.

    cloudpickle lets the wrapped function travel by value, which matters when it has
    been replaced in its own module by this wrapper (plain pickle would then fail).
    """

    def __init__(self, func: Callable[..., Any], num_threads: int) -> None:
        self.func = func
        self.num_threads = num_threads

    def __getstate__(self) -> bytes:
        return cloudpickle.dumps((self.func, self.num_threads))

    def __setstate__(self, state: bytes) -> None:
        self.func, self.num_threads = pickle.loads(state)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        actual = torch.get_num_threads()
        if actual != self.num_threads:
            raise AssertionError(
                THREAD_COUNT_ERROR.format(expected=self.num_threads, actual=actual)
            )
        return self.func(*args, **kwargs)


def decorate_thread_sub_func(func: Callable[..., Any], num_threads: int) -> Callable[..., Any]:
    """Wrap ``func`` so that each call first asserts ``torch.get_num_threads() == num_threads``.

    The wrapper pickles through cloudpickle, so it can replace a worker entry point of a
    spawned process.

    Examples:
        >>> import torch
        >>> checked = decorate_thread_sub_func(lambda x: x + 1, torch.get_num_threads())
        >>> checked(1)
        2
    """
    return _ThreadCheckedCall(func, num_threads)

"""``check_env_specs``: does the data an env produces agree with its specs?"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch
from tensordict import LazyStackedTensorDict, TensorDictBase
from tensordict.utils import NestedKey

if TYPE_CHECKING:
    from rlcore._env_base import EnvBase

__all__ = ["check_env_specs"]

KEYS_MISMATCH = (
    "The keys of the specs and data do not match:\n"
    "- keys present in the data but not in the specs: {real_only},\n"
    "- keys present in the specs but not in the data: {fake_only}."
)
SHAPE_MISMATCH = (
    "The shapes of the data and specs don't match for key {key!r}: spec gives {fake}, "
    "data has {real}."
)
DTYPE_MISMATCH = (
    "The dtypes of the data and specs don't match for key {key!r}: spec gives {fake}, "
    "data has {real}."
)
NOT_IN_SPEC = (
    "The {where} data for the {name} spec is not in the spec's domain: key {key!r} = {value}"
)

ROLLOUT_STEPS = 3


def _leaf_items(data: TensorDictBase) -> dict[NestedKey, torch.Tensor | None]:
    """Leaves of ``data`` (``None`` for heterogeneous entries of lazy stacks)."""
    items = {}
    for key in data.keys(True, True):
        try:
            items[key] = data.get(key)
        except RuntimeError:
            items[key] = None
    return items


def _with_next(key: NestedKey) -> tuple[str, ...]:
    return ("next", key) if isinstance(key, str) else ("next", *key)


def check_env_specs(
    env: EnvBase,
    return_contiguous: bool = True,
    check_dtype: bool = True,
    seed: int | None = None,
) -> None:
    """Runs a short rollout and checks its keys, shapes, dtypes and values against the specs.

    Args:
        env: the env to check.
        return_contiguous: passed to ``rollout`` (False for heterogeneous envs).
        check_dtype: compare dtypes too.
        seed: when given, seeds the env (the global RNG is restored afterwards).

    Raises:
        AssertionError: naming the first key whose data disagrees with the specs.

    Examples:
        >>> check_env_specs(env)  # returns None, or raises naming the first mismatch
    """
    if seed is not None:
        devices = [env.device] if env.device is not None and env.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):
            torch.manual_seed(seed)
            env.set_seed(seed)
            check_env_specs(env, return_contiguous=return_contiguous, check_dtype=check_dtype)
        return
    fake = env.fake_tensordict()
    real = env.rollout(
        ROLLOUT_STEPS, return_contiguous=return_contiguous, break_when_any_done=False
    )
    steps = real.batch_size[-1]
    fake = LazyStackedTensorDict.lazy_stack([fake.clone() for _ in range(steps)], fake.batch_dims)
    # state entries may or may not be echoed under "next": ignore them there
    ignored = {_with_next(key) for key in env.state_keys}
    real_items = {k: v for k, v in _leaf_items(real).items() if _tuple(k) not in ignored}
    fake_items = {k: v for k, v in _leaf_items(fake).items() if _tuple(k) not in ignored}
    if set(real_items) != set(fake_items):
        raise AssertionError(
            KEYS_MISMATCH.format(
                real_only=set(real_items) - set(fake_items),
                fake_only=set(fake_items) - set(real_items),
            )
        )
    for key, real_value in real_items.items():
        fake_value = fake_items[key]
        if not isinstance(real_value, torch.Tensor) or not isinstance(fake_value, torch.Tensor):
            continue
        if real_value.shape != fake_value.shape:
            raise AssertionError(
                SHAPE_MISMATCH.format(key=key, fake=fake_value.shape, real=real_value.shape)
            )
        if check_dtype and real_value.dtype != fake_value.dtype:
            raise AssertionError(
                DTYPE_MISMATCH.format(key=key, fake=fake_value.dtype, real=real_value.dtype)
            )
    last = real[..., -1]
    checks = (
        ("root", "action", env.full_action_spec, last),
        ("root", "state", env.full_state_spec, last),
        ("root", "done", env.full_done_spec, last),
        ("root", "observation", env.full_observation_spec, last),
        ("next", "reward", env.full_reward_spec, last.get("next")),
        ("next", "done", env.full_done_spec, last.get("next")),
        ("next", "observation", env.full_observation_spec, last.get("next")),
    )
    for where, name, spec, data in checks:
        for key in spec.keys(True, True):
            try:
                value = data.get(key)
            except RuntimeError:  # heterogeneous entry of a lazy stack: check the whole group
                value = data.select(*spec.keys(True, True))
                if not spec.is_in(value):
                    raise AssertionError(
                        NOT_IN_SPEC.format(where=where, name=name, key=key, value=value)
                    ) from None
                break
            leaf = spec[key]
            if getattr(leaf, "mask", None) is not None:
                # an action mask describes the next step: the last action may be masked by now
                leaf = leaf.clone()
                leaf.update_mask(None)
            if not leaf.is_in(value):
                raise AssertionError(
                    NOT_IN_SPEC.format(where=where, name=name, key=key, value=value)
                )


def _tuple(key: NestedKey) -> tuple[str, ...]:
    return (key,) if isinstance(key, str) else tuple(key)

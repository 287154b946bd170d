"""Every env path checks a step's input by the same rules (``rlcore.step_inputs``).

For each env kind of ``_contract_cases.KINDS`` and each path that applies to it (a single
env's ``step``, ``step_and_maybe_reset``, ``rollout`` through its stepper and through the
general path, a ``TransformedEnv`` around it; ``SerialEnv`` on both of its paths,
``ParallelEnv`` under fork and spawn, ``GymEnv(name, num_envs=N)``, ``MultiThreadedEnv``; each
batched one through ``step`` and ``rollout``):

- a missing action leaf raises ``KeyError`` naming it, with the shape and dtype expected;
- a wrongly shaped action raises ``ValueError`` naming the key, the shape given and the shape
  expected;
- values the action spec's dtype cannot represent raise ``ValueError`` naming the key: a
  fractional float into an integer action, an integer out of the dtype's range, a float that
  overflows, a complex value with an imaginary part;
- a wrongly shaped state leaf raises as an action does;
- an env that ignores its action (``_action_required = False``) steps without one.

The envs are the ones ``test_contract_paths.py`` rolls out (kept for the session): a refused
input never reaches them.
"""

from __future__ import annotations

import re

import pytest
import torch
from _contract_cases import (
    HAS_ENVPOOL,
    KINDS,
    NUM_ENVS,
    SPAWN_KINDS,
    Kind,
    build,
    disable_stepper,
    kept,
    kind_params,
    parallel_env,
    serial_env,
)

from rlcore import EnvBase
from rlcore.step_inputs import BAD_DTYPE, BAD_SHAPE, MISSING_ACTION
from rltransforms import TransformedEnv

SINGLE = ("step", "step_and_maybe_reset", "rollout", "rollout-general", "transformed")
SERIAL = ("serial-step", "serial-step-general", "serial-rollout")
PARALLEL = ("parallel-step", "parallel-rollout")
LIBRARY = ("vector-step", "vector-rollout", "envpool-step", "envpool-rollout")
PATHS = SINGLE + SERIAL + PARALLEL + LIBRARY


def _applies(kind: Kind, path: str) -> bool:
    if path in ("rollout-general", "serial-step-general"):
        return kind.stepper  # the general path of an env offering a stepper
    if path.startswith("vector"):
        return kind.vector is not None
    if path.startswith("envpool"):
        return HAS_ENVPOOL and kind.name == "cartpole"
    return True


def _cases(kinds: list) -> list:
    """``(kind, path, method)`` params: every path that applies to each kind, ParallelEnv's
    under fork (and spawn for ``SPAWN_KINDS``)."""
    out = []
    for param in kinds:
        (kind,) = param.values
        for path in PATHS:
            if not _applies(kind, path):
                continue
            parallel = path in PARALLEL
            methods = ["fork", "spawn"] if kind.name in SPAWN_KINDS else ["fork"]
            for method in methods if parallel else [None]:
                ids = "-".join(filter(None, (path, param.id, method)))
                out.append(pytest.param(kind, path, method, id=ids, marks=param.marks))
    return out


def _names(predicate) -> list[str]:
    return [name for name, kind in KINDS.items() if predicate(kind, _spec(kind))]


_SPECS: dict[str, tuple] = {}


def _spec(kind: Kind) -> tuple:
    """``(first action key, its spec, _action_required, state keys)`` of ``kind``'s env."""
    if kind.name not in _SPECS:
        if not kind.requires:
            return ("action", None, True, [])
        env = build(kind)
        key = env.action_keys[0]
        _SPECS[kind.name] = (key, env.full_action_spec[key], env._action_required, env.state_keys)
        env.close()
    return _SPECS[kind.name]


REQUIRED = kind_params(_names(lambda kind, spec: spec[2]))
INTEGER = kind_params(
    _names(lambda kind, spec: spec[1] is not None and not spec[1].dtype.is_floating_point)
)
WITH_STATE = kind_params(_names(lambda kind, spec: bool(spec[3])))
IGNORING = kind_params(_names(lambda kind, spec: not spec[2]))


# ---------------------------------------------------------------------- envs and runs
def _env(config, kind: Kind, path: str, method: str | None) -> EnvBase:
    """The env ``path`` runs (the paths file's, kept for the session)."""
    if path in ("step", "step_and_maybe_reset", "rollout"):
        return kept(config, ("single", kind.name, "rollout"), lambda: build(kind))
    if path == "rollout-general":
        return kept(config, ("single", kind.name, "general"), lambda: disable_stepper(build(kind)))
    if path == "transformed":
        return kept(
            config, ("single", kind.name, "transformed"), lambda: TransformedEnv(build(kind))
        )
    if path.startswith("serial"):
        stepper = path != "serial-step-general" and kind.stepper
        name = "stepper" if stepper else "general"
        return kept(config, ("serial", kind.name, name), lambda: serial_env(kind, stepper))
    if path.startswith("parallel"):
        return parallel_env(config, kind, method)
    if path.startswith("vector"):
        return kept(
            config,
            ("vector", kind.name, "stepper"),
            lambda: kind.make(num_envs=NUM_ENVS, **kind.vector),
        )
    from rllibs import MultiThreadedEnv

    return kept(config, ("envpool", "stepper"), lambda: MultiThreadedEnv(NUM_ENVS, "CartPole-v1"))


def _run(env: EnvBase, path: str, spoil) -> None:
    """Give ``env`` a root spoiled by ``spoil`` (its action set first) the way ``path`` does."""

    def policy(td):
        return spoil(td.update(env.full_action_spec.zero()))

    if path.endswith("rollout") or path == "rollout-general":
        env.rollout(3, policy, break_when_any_done=False)
    elif path == "step_and_maybe_reset":
        env.step_and_maybe_reset(policy(env.reset()))
    else:
        env.step(policy(env.reset()))


def _leaf(env: EnvBase, role: str = "action") -> tuple:
    """``(key, where, shape, dtype)`` of ``env``'s first leaf of ``role`` (its batch included)."""
    if role == "action":
        key, spec = env.action_keys[0], env.full_action_spec
    else:
        key, spec = env.state_keys[0], env.full_state_spec
    return key, f"{type(env).__name__}.step", tuple(spec[key].shape), spec[key].dtype


def _why(value: torch.Tensor, dtype: torch.dtype) -> str:
    """What ``dtype`` cannot represent in ``value`` (the message's explanation)."""
    if value.is_complex():
        return "non-zero imaginary parts"
    if dtype.is_floating_point:
        return "values overflow to infinity"
    if value.is_floating_point() and bool((value != value.trunc()).any()):
        return "non-integer values"
    info = torch.iinfo(dtype)
    low, high = value.min().item(), value.max().item()
    return f"min {low}, max {high}; {dtype} holds {info.min} to {info.max}"


def _unrepresentable(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """Values of ``shape`` that ``dtype`` cannot hold (whatever its kind)."""
    if dtype == torch.float64:
        return torch.full(shape, 1 + 1j, dtype=torch.complex128)
    if dtype.is_floating_point:
        return torch.full(shape, 1e300, dtype=torch.float64)
    return torch.full(shape, 0.5)


def _out_of_range(shape: tuple, dtype: torch.dtype) -> torch.Tensor:
    """Whole values just past ``dtype``'s largest (an integer dtype)."""
    if dtype == torch.int64:
        return torch.full(shape, 2.0**64, dtype=torch.float64)
    return torch.full(shape, torch.iinfo(dtype).max + 1, dtype=torch.int64)


# ---------------------------------------------------------------------- the checks
@pytest.mark.parametrize(("kind", "path", "method"), _cases(REQUIRED))
def test_a_missing_action_raises_a_key_error_naming_it(request, kind, path, method):
    env = _env(request.config, kind, path, method)
    key, where, shape, dtype = _leaf(env)
    message = MISSING_ACTION.format(where=where, key=key, shape=shape, dtype=dtype)
    with pytest.raises(KeyError, match=re.escape(message)):
        _run(env, path, lambda td: td.del_(key))


@pytest.mark.parametrize(("kind", "path", "method"), _cases(kind_params()))
def test_a_wrongly_shaped_action_raises_naming_the_key_and_both_shapes(request, kind, path, method):
    env = _env(request.config, kind, path, method)
    key, where, shape, dtype = _leaf(env)
    bad = torch.zeros(*shape, 2, dtype=dtype)
    message = BAD_SHAPE.format(
        where=where, role="action", key=key, got=tuple(bad.shape), expected=shape
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        _run(env, path, lambda td: td.set(key, bad))


@pytest.mark.parametrize(("kind", "path", "method"), _cases(kind_params()))
def test_values_the_action_dtype_cannot_represent_raise_naming_the_key(request, kind, path, method):
    """A fractional float into an integer action, a float32 overflow, an imaginary part."""
    env = _env(request.config, kind, path, method)
    key, where, shape, dtype = _leaf(env)
    bad = _unrepresentable(shape, dtype)
    message = BAD_DTYPE.format(
        where=where, role="action", key=key, got=bad.dtype, dtype=dtype, why=_why(bad, dtype)
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        _run(env, path, lambda td: td.set(key, bad))


@pytest.mark.parametrize(("kind", "path", "method"), _cases(INTEGER))
def test_an_integer_action_out_of_the_dtype_range_raises_naming_the_key(
    request, kind, path, method
):
    env = _env(request.config, kind, path, method)
    key, where, shape, dtype = _leaf(env)
    bad = _out_of_range(shape, dtype)
    message = BAD_DTYPE.format(
        where=where, role="action", key=key, got=bad.dtype, dtype=dtype, why=_why(bad, dtype)
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        _run(env, path, lambda td: td.set(key, bad))


@pytest.mark.parametrize(("kind", "path", "method"), _cases(WITH_STATE))
def test_a_wrongly_shaped_state_raises_naming_the_key_and_both_shapes(request, kind, path, method):
    env = _env(request.config, kind, path, method)
    key, where, shape, dtype = _leaf(env, "state")
    bad = torch.zeros(*shape, 2, dtype=dtype)
    message = BAD_SHAPE.format(
        where=where, role="state", key=key, got=tuple(bad.shape), expected=shape
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        _run(env, path, lambda td: td.set(key, bad))


@pytest.mark.parametrize(("kind", "path", "method"), _cases(IGNORING))
def test_an_env_that_ignores_its_action_steps_without_one(request, kind, path, method):
    env = _env(request.config, kind, path, method)
    env.set_seed(7)
    key = env.action_keys[0]
    _run(env, path, lambda td: td.del_(key))  # no KeyError: the env is stepped

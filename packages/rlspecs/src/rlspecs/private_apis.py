"""The one place where rlstack touches private APIs of tensordict and torch.

The env step path (``EnvBase.step``, ``step_mdp``, ``rollout``, the batched envs) runs a
handful of tensordict operations per step on small trees, where tensordict's public calls
spend most of their time validating keys, shapes and devices that we already know are right.
Each function here is the private call that skips that work, next to the public call it stands
in for; when a tensordict or torch release changes one of them, this module is the only file
to fix, and ``tests/test_private_apis.py`` is where it shows.

The packages of rlstack (and nobody else) import this module; it is public only so that
siblings need not reach into each other's private modules.

Examples:
    >>> import torch
    >>> from tensordict import TensorDict
    >>> from rlspecs.private_apis import td_entries, td_new
    >>> td = td_new({"a": torch.zeros(2)}, batch_size=torch.Size([2]), device=None)
    >>> sorted(td_entries(td))
    ['a']
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict, TensorDictBase

__all__ = [
    "foreach_copy_",
    "parse_to_device",
    "td_entries",
    "td_get_str",
    "td_has_names",
    "td_is_locked",
    "td_new",
    "td_set_str",
]


def td_new(
    source: dict[str, Any], batch_size: torch.Size, device: torch.device | None
) -> TensorDict:
    """A ``TensorDict`` around ``source`` (str keys; tensors or tensordicts), unchecked.

    Public equivalent: ``TensorDict(source, batch_size=batch_size, device=device)``, which
    checks every leaf's shape and device and casts them; callers here built every leaf with
    the right shape on the right device, so the checks are pure cost (about 1 µs a leaf).
    Values that are plain dicts are not converted: pass tensordicts.
    """
    # TensorDict._new_unsafe(source, batch_size, device, nested=False) sets exactly these four
    # instance attributes (tests/test_private_apis.py compares them with its); setting them
    # here skips its keyword handling, compile check and per-key copy loop (0.7 -> 0.3 µs, on
    # every step of every path)
    if device is not None and type(device) is not torch.device:
        device = torch.device(device)
    td = _new_tensordict(TensorDict)
    td.__dict__.update(
        _device=device, _tensordict=dict(source), _batch_size=batch_size, _td_dim_names=None
    )
    return td


_new_tensordict = TensorDict.__new__


def td_entries(td: TensorDict) -> dict[str, Any]:
    """The live ``{str key: tensor or tensordict}`` storage of a plain ``TensorDict``.

    Public equivalent: ``dict(td.items())`` (a copy) or ``td.get(key)`` per key. Reading the
    storage avoids one call through tensordict's key parsing per key on the step path. Writing
    into the returned dict writes into ``td`` without any check: only do it with values of the
    right batch shape and device, on an unlocked ``td``.
    """
    return td._tensordict


def td_get_str(td: TensorDictBase, key: str, default: Any = None) -> Any:
    """``td.get(key, default)`` for a single str key, without key parsing."""
    # Public equivalent: td.get(key, default), which unravels the key and dispatches on its type.
    return td._get_str(key, default)


def td_set_str(td: TensorDictBase, key: str, value: Any) -> None:
    """``td.set(key, value)`` for a str key and a value already of ``td``'s batch shape and device."""
    # Public equivalent: td.set(key, value), which validates the shape, device and type of value.
    if type(td) is TensorDict and not td._is_locked:
        # what _set_str(key, value, inplace=False, validated=True) does for an unlocked plain
        # TensorDict, without its keyword call (a third of a µs, twice a step)
        td._tensordict[key] = value
    else:
        td._set_str(key, value, inplace=False, validated=True, non_blocking=False)


def td_has_names(td: TensorDictBase) -> bool:
    """Whether ``td`` carries dimension names."""
    # Public equivalent: any(n is not None for n in td.names), which builds the list of names.
    return td._td_dim_names is not None


def td_is_locked(td: TensorDictBase) -> bool:
    """Whether ``td`` is locked."""
    # Public equivalent: td.is_locked, a property that walks up to the lock's owner.
    return td._is_locked


def foreach_copy_(dsts: list[torch.Tensor], srcs: list[torch.Tensor]) -> None:
    """``dst.copy_(src)`` for each pair, in one call."""
    # Public equivalent: a Python loop of dst.copy_(src); one fused call dispatches once.
    torch._foreach_copy_(dsts, srcs)


def parse_to_device(*args: Any, **kwargs: Any) -> torch.device | None:
    """The device an ``nn.Module.to(*args, **kwargs)`` call moves to, or None."""
    # Public equivalent: none; nn.Module.to parses its arguments with this same function.
    device, _, _, _ = torch._C._nn._parse_to(*args, **kwargs)
    return device

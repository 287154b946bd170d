"""The metaclass of ``EnvBase``: the constructor flags every env takes, ``auto_reset=True``
(torchrl 0.4's) and ``spec_locked=True`` (current torchrl's)."""

from __future__ import annotations

import abc
from typing import Any

from rlcore import _plugins

__all__ = ["EnvMeta"]

REPLACE_WITHOUT_AUTO_RESET = (
    "{cls}: auto_reset_replace={replace!r} only applies with auto_reset=True; pass "
    "auto_reset=True too, or drop auto_reset_replace"
)


class EnvMeta(abc.ABCMeta):
    """Builds the env, then wraps it in an ``AutoResetEnv`` when built with ``auto_reset=True``
    (from ``rltransforms``, found when needed: ``pip install rltransforms``).

    An ``abc.ABCMeta``, as torchrl 0.4's env metaclass is: an env class may also derive from
    ``abc.ABC`` (or a ``typing.Protocol``) without a metaclass conflict.

    ``auto_reset_replace`` (default True) is the ``AutoResetTransform``'s ``replace``.
    ``spec_locked=True`` locks the specs once built (``EnvBase.set_spec_lock_``); the default,
    False, is the seed era's: specs stay editable in place. Only construction goes through
    here: unpickling and copies build the env without these flags.
    """

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        auto_reset = kwargs.pop("auto_reset", False)
        replace = kwargs.pop("auto_reset_replace", None)
        spec_locked = kwargs.pop("spec_locked", False)
        env = super().__call__(*args, **kwargs)
        if spec_locked:
            env.set_spec_lock_(True)
        if not auto_reset:
            if replace is not None:
                raise ValueError(
                    REPLACE_WITHOUT_AUTO_RESET.format(cls=cls.__name__, replace=replace)
                )
            return env
        found = _plugins.transforms(f"{cls.__name__}(..., auto_reset=True)")
        replace = True if replace is None else replace
        return found.AutoResetEnv(env, found.AutoResetTransform(replace=replace))

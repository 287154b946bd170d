"""The torchrl 0.4 options both sync collectors take: checks and conversions done once."""

from __future__ import annotations

import warnings
from collections.abc import Callable

from tensordict import TensorDictBase
from tensordict.nn import InteractionType

PostProc = Callable[[TensorDictBase], TensorDictBase]

DEFAULT_EXPLORATION_TYPE = InteractionType.RANDOM

_BAD_INIT_RANDOM = "init_random_frames must be an int or None, got {value!r}."
_BAD_POSTPROC = "postproc must be a callable taking and returning a tensordict, got {type}."
_POSTPROC_RETURNED = "postproc must return a tensordict, it returned {type}."
_NO_RESET_WHEN_DONE = (
    "reset_when_done=False is not supported: done envs are always reset (torchrl 0.4 "
    "deprecated the option and raises a ValueError too); drop the argument."
)
_BAD_EXPLORATION = (
    "exploration_type must be one of {names} (tensordict.nn.InteractionType, which is "
    "rlmodules.ExplorationType), got {value!r}."
)
_BAD_EXPLORATION_MODE = "exploration_mode must be one of {names}, got {value!r}."
_EXPLORATION_CONFLICT = (
    "exploration_mode={mode!r} and exploration_type=ExplorationType.{type} disagree; pass exploration_type "
    "alone (exploration_mode is its deprecated alias)."
)
_EXPLORATION_MODE_DEPRECATED = (
    "exploration_mode is deprecated (as in torchrl 0.4); pass exploration_type=ExplorationType.{name} "
    "instead."
)


def exploration_from_args(
    exploration_type: InteractionType, exploration_mode: str | None
) -> InteractionType:
    """The exploration type the collector uses, from ``exploration_type`` and its deprecated alias."""
    names = [t.name for t in InteractionType]
    if not isinstance(exploration_type, InteractionType):
        raise TypeError(_BAD_EXPLORATION.format(names=names, value=exploration_type))
    if exploration_mode is None:
        return exploration_type
    try:
        from_mode = InteractionType.from_str(exploration_mode)
    except (ValueError, AttributeError, TypeError):
        values = [t.value for t in InteractionType]
        raise ValueError(
            _BAD_EXPLORATION_MODE.format(names=values, value=exploration_mode)
        ) from None
    if exploration_type not in (DEFAULT_EXPLORATION_TYPE, from_mode):
        raise ValueError(
            _EXPLORATION_CONFLICT.format(mode=exploration_mode, type=exploration_type.name)
        )
    warnings.warn(
        _EXPLORATION_MODE_DEPRECATED.format(name=from_mode.name), DeprecationWarning, stacklevel=3
    )
    return from_mode


def check_reset_when_done(reset_when_done: bool) -> None:
    """Raises for ``reset_when_done=False``, which torchrl 0.4 refuses too."""
    if not reset_when_done:
        raise ValueError(_NO_RESET_WHEN_DONE)


def check_init_random_frames(value: int | None) -> int:
    """``init_random_frames`` as an int (``None`` and negative values: no random frames)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(_BAD_INIT_RANDOM.format(value=value))
    return max(value, 0)


def check_postproc(postproc: PostProc | None) -> None:
    """Raises unless ``postproc`` is None or callable."""
    if postproc is not None and not callable(postproc):
        raise TypeError(_BAD_POSTPROC.format(type=type(postproc).__name__))


def apply_postproc(postproc: PostProc, batch: TensorDictBase) -> TensorDictBase:
    """``postproc(batch)``, checked to be a tensordict."""
    out = postproc(batch)
    if not isinstance(out, TensorDictBase):
        raise TypeError(_POSTPROC_RETURNED.format(type=type(out).__name__))
    return out

"""What ``EnvBase`` finds in packages built on ``rlcore``, which it cannot import directly.

- The transforms (``append_transform``, ``auto_reset=True``) live in ``rltransforms``, which
  depends on ``rlcore``: it is imported by name when first needed, and its absence is an
  ``ImportError`` saying what to install.
- The gym registration (``register_gym``) lives in ``rllibs`` (and needs gymnasium): it is
  found through the ``rlcore.register_gym`` entry-point group, where ``rllibs`` declares
  ``gymnasium = "rllibs._register_gym:register_gym"``.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["ENTRY_POINT_GROUP", "find_gym_registration", "transforms"]

TRANSFORMS_PACKAGE = "rltransforms"
NO_TRANSFORMS = (
    "{what} needs the transforms, which live in the rltransforms package (not installed here); "
    "install it with: pip install rltransforms"
)

ENTRY_POINT_GROUP = "rlcore.register_gym"
NO_GYM_PLUGIN = (
    "{what} needs rllibs and gymnasium (no package declares a {group!r} entry point); "
    'install them with: pip install --find-links dist "rllibs[gym]" (dist: the wheelhouse '
    "that `nox -s build` makes; see the installing page)"
)
BROKEN_GYM_PLUGIN = (
    "{what}: the {group!r} entry point {value!r} could not be loaded ({err}); reinstall it "
    'with: pip install --find-links dist "rllibs[gym]"'
)


def find_gym_registration(what: str = "EnvBase.register_gym") -> Callable[..., Any]:
    """Return the registered gym registration function (``rllibs``'), or raise an ``ImportError``."""
    found = sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda ep: ep.name)
    if not found:
        raise ImportError(NO_GYM_PLUGIN.format(what=what, group=ENTRY_POINT_GROUP))
    # "gymnasium" (rllibs') first: a plugin of another name is used only when it is alone
    entry = next((ep for ep in found if ep.name == "gymnasium"), found[0])
    try:
        return entry.load()
    except ImportError as err:
        raise ImportError(
            BROKEN_GYM_PLUGIN.format(what=what, group=ENTRY_POINT_GROUP, value=entry.value, err=err)
        ) from err


def transforms(what: str) -> ModuleType:
    """The ``rltransforms`` module, or an ``ImportError`` naming ``what`` needs it.

    Examples:
        >>> try:
        ...     found = transforms("EnvBase.append_transform").TransformedEnv is not None
        ... except ImportError as err:  # rltransforms is not installed: the error says so
        ...     found = "pip install rltransforms" in str(err)
        >>> found
        True
    """
    try:
        return importlib.import_module(TRANSFORMS_PACKAGE)
    except ImportError as err:
        if err.name != TRANSFORMS_PACKAGE:
            raise  # rltransforms is there but broken: its own error says why
        raise ImportError(NO_TRANSFORMS.format(what=what)) from err

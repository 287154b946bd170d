"""``EnvBase.register_gym``'s lookup: the gym registration lives in a plugin, not in ``rlcore``.

``rlcore`` cannot depend on ``rllibs`` (which depends on it) nor on gymnasium, so the
registration function is found through the ``rlcore.register_gym`` entry-point group:
``rllibs`` declares ``gymnasium = "rllibs._register_gym:register_gym"`` in its metadata.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from typing import Any

__all__ = ["ENTRY_POINT_GROUP", "find_gym_registration"]

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

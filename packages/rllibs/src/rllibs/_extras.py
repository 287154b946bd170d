"""Optional backends: cheap availability flags and lazy imports with install hints."""

from __future__ import annotations

import importlib.util
from types import ModuleType

import rlcore

__all__ = ["HAS_DMC", "HAS_ENVPOOL", "HAS_GYM", "import_optional", "missing_extra"]

# find_spec only locates the package: nothing heavy is imported by `import rllibs`
HAS_GYM: bool = importlib.util.find_spec("gymnasium") is not None
HAS_DMC: bool = (
    importlib.util.find_spec("dm_control") is not None
    and importlib.util.find_spec("mujoco") is not None
)
HAS_ENVPOOL: bool = importlib.util.find_spec("envpool") is not None


def missing_extra(what: str, module: str, extra: str) -> str:
    """The error text for ``what`` needing ``module`` from the extra ``rllibs[extra]``.

    It names the extra and a pip command for the extra's own requirements, which works however
    rllibs was installed (see ``rlcore.missing_extra_message``).

    Examples:
        >>> "rllibs[gym]" in missing_extra("GymEnv", "gymnasium", "gym")
        True
    """
    return rlcore.missing_extra_message(what, module, "rllibs", extra)


def import_optional(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise an ``ImportError`` with ``missing_extra``'s text.

    Examples:
        >>> import_optional("math", "gym", "GymEnv").__name__
        'math'
    """
    return rlcore.import_optional(module, "rllibs", extra, what)

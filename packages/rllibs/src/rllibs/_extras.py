"""Optional backends: cheap availability flags and lazy imports with install hints."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

__all__ = ["HAS_DMC", "HAS_ENVPOOL", "HAS_GYM", "import_optional"]

# find_spec only locates the package: nothing heavy is imported by `import rllibs`
HAS_GYM: bool = importlib.util.find_spec("gymnasium") is not None
HAS_DMC: bool = (
    importlib.util.find_spec("dm_control") is not None
    and importlib.util.find_spec("mujoco") is not None
)
HAS_ENVPOOL: bool = importlib.util.find_spec("envpool") is not None

MISSING_EXTRA = (
    '{what} requires the "{module}" package; install it with: pip install "rllibs[{extra}]"'
)


def import_optional(module: str, extra: str, what: str) -> ModuleType:
    """Import ``module`` or raise an ``ImportError`` naming the ``rllibs`` extra that provides it.

    Examples:
        >>> import_optional("math", "gym", "GymEnv").__name__
        'math'
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(MISSING_EXTRA.format(what=what, module=module, extra=extra)) from err

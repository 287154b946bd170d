"""Optional dependencies (a package's extras): lazy imports whose failure says what to install."""

from __future__ import annotations

import importlib
import importlib.metadata
import re
from types import ModuleType

__all__ = ["import_optional", "missing_extra_message"]

_EXTRA_MARKER = re.compile(r"""extra\s*==\s*["']([^"']+)["']""")


def _extra_requirements(package: str, extra: str) -> list[str]:
    """The third-party requirements ``package[extra]`` adds, from the installed metadata."""
    try:
        requires = importlib.metadata.requires(package) or []
    except importlib.metadata.PackageNotFoundError:
        return []
    out = []
    for line in requires:
        requirement, _, marker = line.partition(";")
        found = _EXTRA_MARKER.search(marker)
        name = re.split(r"[\s\[<>=!~;]", requirement.strip(), maxsplit=1)[0]
        if found and found.group(1) == extra and name != package:
            out.append(requirement.strip())
    return out


def missing_extra_message(what: str, module: str, package: str, extra: str) -> str:
    """The error text for ``what`` needing ``module``, which ``package[extra]`` provides.

    The command it names installs the extra's own requirements (read from ``package``'s
    metadata), which works however ``package`` itself was installed: from an index, a
    wheelhouse or a checkout.

    Examples:
        >>> print(missing_extra_message("GymEnv", "gymnasium", "not-installed", "gym"))
        GymEnv requires the "gymnasium" package (the extra not-installed[gym]); install it with: pip install "not-installed[gym]"
    """
    requirements = _extra_requirements(package, extra)
    command = " ".join(f'"{r}"' for r in requirements) or f'"{package}[{extra}]"'
    return (
        f'{what} requires the "{module}" package (the extra {package}[{extra}]); '
        f"install it with: pip install {command}"
    )


def import_optional(module: str, package: str, extra: str, what: str) -> ModuleType:
    """Import ``module``, or raise an ``ImportError`` naming the command that installs it.

    Args:
        module: the module to import, e.g. ``"gymnasium"``.
        package: our distribution whose extra provides it, e.g. ``"rllibs"``.
        extra: the extra's name, e.g. ``"gym"``.
        what: what needs it, for the message, e.g. ``"GymEnv"``.

    Examples:
        >>> import_optional("math", "rllibs", "gym", "GymEnv").__name__
        'math'
    """
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(missing_extra_message(what, module, package, extra)) from err

"""Where torch comes from: its CPU build by default, a CUDA build on request.

The version is pinned once, in ``constraints.txt``. PyPI's Linux wheel of that version is the
CUDA build (several GB), so a plain install puts CUDA torch into every virtualenv. The CPU build
(``2.13.0+cpu``) is on the PyTorch CPU index, which this repository names here, and a machine
may also keep it in a local wheel directory (pip's ``find-links``), which is tried first.

``RLSTACK_TORCH`` chooses the build:

- ``cpu`` (default): exactly ``torch==<pin>+cpu``: a local wheel directory that holds it
  (``RLSTACK_TORCH_FIND_LINKS``, else the ``find-links`` pip is configured with), else the
  PyTorch CPU index. Neither: an error that says so (never a silent CUDA download).
- ``cuda``: ``torch==<pin>`` from PyPI, its CUDA build, for machines with a GPU (``nox -s cuda``).

    python tools/torch_source.py        # prints the requirement and the arguments chosen
"""

from __future__ import annotations

import os
import pathlib
import re
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass

ROOT = pathlib.Path(__file__).resolve().parent.parent
CONSTRAINTS = ROOT / "constraints.txt"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
FLAVOURS = ("cpu", "cuda")

NO_CPU_TORCH = (
    "The CPU build of torch ({requirement}) was found neither in a local wheel directory "
    "({dirs}) nor on the PyTorch CPU index ({index}: {why}). Give a directory holding it with "
    "RLSTACK_TORCH_FIND_LINKS=<dir>, or install the CUDA build with RLSTACK_TORCH=cuda."
)
BAD_FLAVOUR = "RLSTACK_TORCH={value!r}: expected one of {flavours}"


@dataclass(frozen=True)
class TorchSource:
    """The torch requirement to install first, and the installer arguments that find it.

    Examples:
        >>> source = TorchSource("cuda", "torch==2.13.0", ())
        >>> source.install_args()
        ['torch==2.13.0']
    """

    flavour: str
    requirement: str
    args: tuple[str, ...]

    def install_args(self) -> list[str]:
        """Arguments of ``pip install`` / ``uv pip install`` that install this torch."""
        return [*self.args, self.requirement]

    def constraint(self) -> str:
        """The constraint line that keeps this build when the rest is installed."""
        return self.requirement


def pinned_version(constraints: pathlib.Path = CONSTRAINTS) -> str:
    """The torch version ``constraints.txt`` pins (``torch==X``).

    Examples:
        >>> bool(re.fullmatch(r"[0-9.]+", pinned_version()))
        True
    """
    for line in constraints.read_text().splitlines():
        match = re.match(r"\s*torch\s*==\s*([0-9][0-9A-Za-z.]*)", line)
        if match:
            return match.group(1)
    raise RuntimeError(f"{constraints} pins no torch version (a line 'torch==X' is expected)")


def configured_find_links() -> list[str]:
    """The local wheel directories: ``RLSTACK_TORCH_FIND_LINKS``, else pip's ``find-links``."""
    explicit = os.environ.get("RLSTACK_TORCH_FIND_LINKS")
    if explicit:
        return [d for d in re.split(r"[\s" + os.pathsep + "]+", explicit) if d]
    value = os.environ.get("PIP_FIND_LINKS", "")
    if not value:
        try:
            value = subprocess.run(
                [sys.executable, "-m", "pip", "config", "get", "global.find-links"],
                capture_output=True,
                text=True,
                timeout=30,
            ).stdout
        except (OSError, subprocess.SubprocessError):
            value = ""
    return [d for d in value.split() if d and not d.startswith(("http:", "https:"))]


def _python_tag(python_version: tuple[int, int]) -> str:
    return f"cp{python_version[0]}{python_version[1]}"


def local_wheel(dirs: list[str], version: str, python_version: tuple[int, int]) -> str | None:
    """The first directory of ``dirs`` holding ``torch-<version>`` for that Python, or None."""
    tag = _python_tag(python_version)
    for directory in dirs:
        path = pathlib.Path(directory.removeprefix("file://"))
        if any(path.glob(f"torch-{version}-{tag}-{tag}-*.whl")):
            return str(path)
    return None


def _index_reachable(url: str) -> str | None:
    """None when ``url`` answers, else why not."""
    try:
        with urllib.request.urlopen(f"{url}/torch/", timeout=10):
            return None
    except (urllib.error.URLError, OSError) as err:
        return str(getattr(err, "reason", err))


def chosen_flavour() -> str:
    """``RLSTACK_TORCH`` (``cpu`` when unset)."""
    flavour = os.environ.get("RLSTACK_TORCH", "cpu").strip().lower() or "cpu"
    if flavour not in FLAVOURS:
        raise RuntimeError(BAD_FLAVOUR.format(value=flavour, flavours=", ".join(FLAVOURS)))
    return flavour


def torch_source(
    python_version: tuple[int, int] | None = None, flavour: str | None = None
) -> TorchSource:
    """The torch to install for ``python_version`` (default: this interpreter's).

    ``flavour``: ``"cpu"`` or ``"cuda"`` (default: ``RLSTACK_TORCH``, else ``"cpu"``).
    """
    python_version = python_version or sys.version_info[:2]
    flavour = flavour or chosen_flavour()
    if flavour not in FLAVOURS:
        raise RuntimeError(BAD_FLAVOUR.format(value=flavour, flavours=", ".join(FLAVOURS)))
    version = pinned_version()
    if flavour == "cuda":
        return TorchSource("cuda", f"torch=={version}", ())
    requirement = f"torch=={version}+cpu"
    dirs = configured_find_links()
    found = local_wheel(dirs, f"{version}+cpu", python_version)
    if found is not None:
        return TorchSource("cpu", requirement, ("--find-links", found))
    why = _index_reachable(CPU_INDEX)
    if why is None:
        return TorchSource("cpu", requirement, ("--index-url", CPU_INDEX))
    raise RuntimeError(
        NO_CPU_TORCH.format(
            requirement=requirement, dirs=", ".join(dirs) or "none", index=CPU_INDEX, why=why
        )
    )


if __name__ == "__main__":
    chosen = torch_source()
    print(f"{chosen.flavour}: {shlex.join(chosen.install_args())}")

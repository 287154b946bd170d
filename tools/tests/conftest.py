"""The suite's own checks (run by ``nox -s lint``): tools/ modules import from here."""

from __future__ import annotations

import pathlib
import sys

TOOLS = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(TOOLS))

pytest_plugins = ["pytester"]

"""Sessions for the monorepo: one per package, plus integration, lint, demo, bench and docs.

Each package session installs that package alone (with its declared dependencies, resolved
from the local checkout for our own packages) into a fresh virtualenv, which proves its
dependency edges, then runs its ``tests/``. Every install goes through ``constraints.txt``.

    nox                  # every default session: lint, each package, integration, docs
    nox -s rlspecs       # one package
    nox -s demo          # the README's demo
"""

from __future__ import annotations

import pathlib

import nox
import tomllib
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).parent
PACKAGES_DIR = ROOT / "packages"
CONSTRAINTS = ("-c", str(ROOT / "constraints.txt"))
PYTHON = "3.11"

nox.options.reuse_existing_virtualenvs = True
nox.options.error_on_missing_interpreters = True
nox.options.sessions = [
    "lint",
    "rlspecs",
    "rlcore",
    "rlmocks",
    "rlbatched",
    "rllibs",
    "rlmodules",
    "rlcollectors",
    "downstream",
    "integration",
    "docs",
    "bench_smoke",
]

# Extras a package's own tests need, and our packages its tests use without depending on them.
TEST_EXTRAS = {"rllibs": "[all]", "rlcollectors": "[progress]"}
TEST_LOCAL_DEPS = {
    "rlbatched": ["rlmocks"],
    "rllibs": ["rlbatched", "rlmocks"],
    "rlcollectors": ["rlbatched", "rlmocks", "rlmodules"],
}
TEST_TOOLS = ["pytest>=8", "hypothesis>=6", "pytest-timeout>=2.3"]


# ----------------------------------------------------------------------------- Helpers


def _pyproject(name: str) -> dict:
    return tomllib.loads((PACKAGES_DIR / name / "pyproject.toml").read_text())


def _local_packages() -> list[str]:
    return sorted(p.parent.name for p in PACKAGES_DIR.glob("*/pyproject.toml"))


def _local_closure(names: list[str]) -> list[str]:
    """``names`` and every package of ours they depend on, lowest first."""
    local = set(_local_packages())
    ordered: list[str] = []

    def visit(name: str) -> None:
        if name in ordered:
            return
        for req in _pyproject(name)["project"].get("dependencies", []):
            dep = Requirement(req).name
            if dep in local:
                visit(dep)
        ordered.append(name)

    for name in names:
        visit(name)
    return ordered


def _install_local(session: nox.Session, names: list[str], extras: dict[str, str]) -> None:
    targets = [f"{PACKAGES_DIR / n}{extras.get(n, '')}" for n in _local_closure(names)]
    session.install(*CONSTRAINTS, *targets)


def _package_session(name: str):
    def run(session: nox.Session) -> None:
        _install_local(session, [name, *TEST_LOCAL_DEPS.get(name, [])], TEST_EXTRAS)
        session.install(*CONSTRAINTS, *TEST_TOOLS)
        session.run("pytest", str(PACKAGES_DIR / name / "tests"), "-q", *session.posargs)

    run.__doc__ = f"Install {name} alone with its declared dependencies and run its tests."
    return run


# ----------------------------------------------------------------------------- Sessions

for _name in _local_packages():
    nox.session(name=_name, python=PYTHON)(_package_session(_name))


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """Every package with its extras; the cross-package suite in integration_tests/."""
    _install_local(session, _local_packages(), {"rllibs": "[all]"})
    session.install(*CONSTRAINTS, *TEST_TOOLS, "pytest-rerunfailures>=14", "pyyaml", "packaging")
    # Workers start with spawn by default; the second run gives the seed's ParallelEnv fixture
    # the fork start method, so both are exercised (see ../shared/spec/MOCKS.md, conftest).
    session.run("pytest", "integration_tests", "-q", *session.posargs)
    session.run(
        "pytest", "integration_tests/test_env.py", "-q", "--mp_fork_if_no_cuda", *session.posargs
    )


@nox.session(python=PYTHON)
def downstream(session: nox.Session) -> None:
    """A downstream project's tests, with only rlspecs, rlcore and rlmocks installed."""
    _install_local(session, ["rlmocks"], {})
    session.install(*CONSTRAINTS, *TEST_TOOLS)
    session.run("pytest", "integration_tests/downstream", "-q", *session.posargs)


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, the private-API boundary and the dependency-edge check."""
    session.install("ruff==0.17.6")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", str(ROOT / "tools" / "check_private_apis.py"), str(ROOT))
    checker = ROOT.parent / "shared" / "tools" / "check_edges.py"
    if checker.exists():
        session.run("python", str(checker), str(ROOT))
    else:
        session.warn(f"{checker} not found: dependency-edge check skipped")


@nox.session(python=PYTHON)
def docs(session: nox.Session) -> None:
    """Build the documentation site (mkdocs --strict) and run every example on its pages."""
    _install_local(session, _local_packages(), {"rllibs": "[gym,atari,dmc]"})
    session.install(*CONSTRAINTS, "-r", str(ROOT / "docs" / "requirements.txt"))
    env = {"NO_MKDOCS_2_WARNING": "1"}
    session.run("mkdocs", "build", "--strict", "-f", str(ROOT / "docs" / "mkdocs.yml"), env=env)
    session.run(
        "pytest", str(ROOT / "docs"), "-q", "-p", "no:cacheprovider", *session.posargs, env=env
    )


def _bench_install(session: nox.Session) -> None:
    # torchrl (pinned with its tensordict in constraints.txt) runs beside ours in one process;
    # envpool is optional: pip's exit code 1 (no wheel here) leaves its column out.
    _install_local(session, ["rlbatched", "rllibs"], {"rllibs": "[gym]"})
    session.install(*CONSTRAINTS, "torchrl", "matplotlib")
    session.run_install(
        "python", "-m", "pip", "install", *CONSTRAINTS, "envpool", success_codes=[0, 1]
    )


@nox.session(python=PYTHON, default=False)
def bench(session: nox.Session) -> None:
    """Side-by-side benchmarks vs torchrl and gymnasium; writes benchmarks/results/."""
    _bench_install(session)
    session.run("python", str(ROOT / "benchmarks" / "run.py"), *session.posargs)


@nox.session(python=PYTHON)
def bench_smoke(session: nox.Session) -> None:
    """Every benchmark case with tiny counts (times mean nothing); results go to a temp dir."""
    _bench_install(session)
    out = session.create_tmp()
    session.run("python", str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", out)


@nox.session(python=PYTHON, default=False)
def demo(session: nox.Session) -> None:
    """The README's demo: a random-policy rollout of a real env in a ParallelEnv."""
    _install_local(session, ["rlbatched", "rllibs"], {"rllibs": "[gym,mujoco,dmc]"})
    session.install(*CONSTRAINTS, "tqdm")
    session.run("python", str(ROOT / "examples" / "demo.py"), *session.posargs)

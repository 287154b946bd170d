"""Sessions for the monorepo: one per package, plus integration, lint, demo, bench and docs.

Each package session installs that package alone (with its declared dependencies, resolved
from the local checkout for our own packages) into a fresh virtualenv, which proves its
dependency edges, then runs its ``tests/``. Every install goes through ``constraints.txt``.
A reused virtualenv skips an install whose inputs (arguments, constraints, our sources) have
not changed since the last run.

    nox                  # every default session: lint, each package, integration, docs, ...
    nox -s rlspecs       # one package
    nox -s build         # wheels and sdists of every package into dist/
    nox -s packages_py   # the package sessions on the other Pythons (3.10, 3.12, 3.13)
    nox -s demo          # the README's demo
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import tempfile

import nox
import tomllib
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).parent
PACKAGES_DIR = ROOT / "packages"
CONSTRAINTS = ("-c", str(ROOT / "constraints.txt"))
PYTHON = "3.11"
OTHER_PYTHONS = ["3.10", "3.12", "3.13"]
UMBRELLA = "rlstack"  # the meta-package: no code, no tests, only extras

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
    "rlcollectors_ray",
    "downstream",
    "integration",
    "docs",
    "bench_smoke",
    "build",
    "wheelhouse",
    "tensordict_latest",
    "tensordict_min",
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
    """Our code packages (the umbrella has none)."""
    return sorted(
        p.parent.name for p in PACKAGES_DIR.glob("*/pyproject.toml") if p.parent.name != UMBRELLA
    )


def _interpreter(version: str) -> str:
    """``version``'s interpreter: on PATH, else pyenv's (its shims only see the active version)."""
    root = pathlib.Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser()
    found = sorted(
        root.glob(f"versions/{version}.*/bin/python{version}"),
        key=lambda p: [int(x) for x in p.parts[-3].split(".") if x.isdigit()],
    )
    return str(found[-1]) if found else version


def _fingerprint(args: tuple[str, ...]) -> str:
    """A digest of an install's arguments, the constraints and every source file of ours."""
    digest = hashlib.sha256("\0".join(args).encode())
    digest.update((ROOT / "constraints.txt").read_bytes())
    for path in sorted(PACKAGES_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and "tests" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _share_identical_files(session: nox.Session) -> None:
    """Hard-links each file of the session's venv to one copy per content, shared by all venvs.

    Every package session has a venv of its own (that is what proves its dependency edges),
    and each holds torch and its company: 17 venvs took 23 GB, more than a CI machine may have
    free. Files of the same content (and mode) become links to one copy in a store beside the
    venvs, so torch is on disk once (the 17 take 6 GB). pip never writes into an
    installed file (it unlinks and writes anew), so a shared copy cannot change under another
    venv; don't edit files inside ``.nox`` venvs in place. Store entries no venv links to any
    more are deleted. A filesystem without hard links leaves the venvs as they are.
    """
    venv = pathlib.Path(session.virtualenv.location)
    store = venv.parent / ".shared-files"
    store.mkdir(exist_ok=True)
    for entry in store.iterdir():
        if entry.stat().st_nlink == 1:
            entry.unlink()
    linked = stored = 0
    for path in venv.rglob("*"):
        if path.is_symlink() or not path.is_file():
            continue
        info = path.stat()
        if info.st_size < 4096 or info.st_nlink > 1:  # small, or linked already
            continue
        with path.open("rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
        copy = store / f"{digest}-{info.st_mode & 0o7777:o}"
        try:
            if not copy.exists():
                os.link(path, copy)
                stored += info.st_size
                continue
            temp = path.with_name(f".{path.name}.shared")
            os.link(copy, temp)
            os.replace(temp, path)
        except OSError as err:
            session.warn(f"venv files not shared ({err}): each venv keeps its own copies")
            return
        linked += info.st_size
    session.log(
        f"venv files shared: {linked / 2**30:.1f} GiB linked to copies other venvs have, "
        f"{stored / 2**30:.1f} GiB new to the store"
    )


def _install(session: nox.Session, *args: str) -> None:
    """``session.install(*args)``, skipped when a reused venv already has exactly that install."""
    marker = (
        pathlib.Path(session.virtualenv.location)
        / f".installed-{hashlib.sha256(' '.join(args).encode()).hexdigest()[:16]}"
    )
    stamp = _fingerprint(args)
    if marker.exists() and marker.read_text() == stamp:
        session.log(f"unchanged since the last run, not reinstalled: {' '.join(args)[:120]}")
        return
    session.install(*args)
    _share_identical_files(session)
    # `nox -R` (--no-install) makes session.install a no-op on a reused venv: no marker then,
    # or a later plain run would skip an install that never happened. nox has no public flag.
    if not getattr(session._runner.global_config, "no_install", False):
        marker.write_text(stamp)


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
    _install(session, *CONSTRAINTS, *targets)


def _package_session(name: str):
    def run(session: nox.Session) -> None:
        _install_local(session, [name, *TEST_LOCAL_DEPS.get(name, [])], TEST_EXTRAS)
        _install(session, *CONSTRAINTS, *TEST_TOOLS)
        session.run("pytest", str(PACKAGES_DIR / name / "tests"), "-q", *session.posargs)

    run.__doc__ = f"Install {name} alone with its declared dependencies and run its tests."
    return run


def _run_package_tests(session: nox.Session, names: list[str]) -> None:
    """Each package's ``tests/`` in its own pytest run (their conftests are independent).

    Every package runs even when one fails, so a matrix session reports all its failures.
    """
    failed = []
    for name in names:
        try:
            session.run("pytest", str(PACKAGES_DIR / name / "tests"), "-q", *session.posargs)
        except nox.command.CommandFailed:
            failed.append(name)
    if failed:
        session.error(f"tests failed in: {', '.join(failed)}")


def _declared_tensordict_floor() -> str:
    """The lowest tensordict every package accepts (the ``>=`` of their declarations)."""
    floors = set()
    for name in _local_packages():
        for req in _pyproject(name)["project"].get("dependencies", []):
            parsed = Requirement(req)
            if parsed.name == "tensordict":
                floors |= {spec.version for spec in parsed.specifier if spec.operator == ">="}
    if len(floors) != 1:
        raise RuntimeError(f"packages declare different tensordict floors: {sorted(floors)}")
    return floors.pop()


def _tensordict_session(session: nox.Session, version: str | None) -> None:
    """Every package with its test needs, then tensordict replaced by ``version`` (None: newest)."""
    constraints = pathlib.Path(session.create_tmp()) / "constraints-no-tensordict.txt"
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    constraints.write_text("\n".join(x for x in lines if not x.startswith("tensordict")) + "\n")
    names = _local_packages()
    targets = [f"{PACKAGES_DIR / n}{TEST_EXTRAS.get(n, '')}" for n in _local_closure(names)]
    _install(session, "-c", str(constraints), *targets, *TEST_TOOLS)
    # --no-deps past our own upper bound: the point is to see the next release break us here
    wanted = f"tensordict=={version}" if version else "tensordict"
    session.install("-c", str(constraints), "--upgrade", "--no-deps", wanted)
    _share_identical_files(session)
    session.run("python", "-c", "import tensordict; print('tensordict', tensordict.__version__)")
    _run_package_tests(session, names)


# ----------------------------------------------------------------------------- Sessions

for _name in _local_packages():
    nox.session(name=_name, python=PYTHON)(_package_session(_name))


@nox.session(default=False)
@nox.parametrize("python", [_interpreter(v) for v in OTHER_PYTHONS], ids=OTHER_PYTHONS)
def packages_py(session: nox.Session) -> None:
    """Every package's tests on the other Pythons (one venv per Python, all packages in it).

    PyPI has no CPU-only torch wheel for these Pythons, so torch comes as its default (CUDA)
    build, which runs on the CPU: about 1 minute and 4.7 GB per Python.
    """
    names = _local_packages()
    _install_local(session, names, TEST_EXTRAS)
    _install(session, *CONSTRAINTS, *TEST_TOOLS)
    _run_package_tests(session, names)


@nox.session(python=PYTHON)
def tensordict_latest(session: nox.Session) -> None:
    """Every package's tests against the newest tensordict on the index."""
    _tensordict_session(session, None)


@nox.session(python=PYTHON)
def tensordict_min(session: nox.Session) -> None:
    """Every package's tests against the oldest tensordict our packages declare."""
    _tensordict_session(session, _declared_tensordict_floor())


@nox.session(python=PYTHON)
def integration(session: nox.Session) -> None:
    """Every package with its extras; the cross-package suite in integration_tests/."""
    # rlcollectors[ray]: RayCollector's docstring example runs in test_docstring_examples
    _install_local(session, _local_packages(), {"rllibs": "[all]", "rlcollectors": "[ray]"})
    _install(
        session,
        *CONSTRAINTS,
        *TEST_TOOLS,
        "pytest-rerunfailures>=14",
        "pyyaml",
        "packaging",
        "tqdm",
    )
    # the README's demo (examples/demo.py: start-method choice, real runs, its summary)
    session.run("pytest", "examples", "-q", *session.posargs)
    # Workers start with spawn by default; the second run gives the seed's ParallelEnv fixture
    # the fork start method, so both are exercised (see ../shared/spec/MOCKS.md, conftest).
    session.run("pytest", "integration_tests", "-q", *session.posargs)
    session.run(
        "pytest", "integration_tests/test_env.py", "-q", "--mp_fork_if_no_cuda", *session.posargs
    )


@nox.session(python=PYTHON)
def rlcollectors_ray(session: nox.Session) -> None:
    """rlcollectors[ray]: RayCollector's tests (tests_ray/) on a real local Ray and cluster."""
    _install_local(session, ["rlcollectors", "rlmocks"], {"rlcollectors": "[ray]"})
    _install(session, *CONSTRAINTS, *TEST_TOOLS)
    tests = PACKAGES_DIR / "rlcollectors" / "tests_ray"
    session.run("pytest", str(tests), "-q", *session.posargs)


@nox.session(python=PYTHON)
def downstream(session: nox.Session) -> None:
    """A downstream project's tests, with only rlspecs, rlcore and rlmocks installed."""
    _install_local(session, ["rlmocks"], {})
    _install(session, *CONSTRAINTS, *TEST_TOOLS)
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
    _install_local(
        session, _local_packages(), {"rllibs": "[gym,atari,dmc]", "rlcollectors": "[ray]"}
    )
    _install(session, *CONSTRAINTS, "-r", str(ROOT / "docs" / "requirements.txt"))
    env = {"NO_MKDOCS_2_WARNING": "1"}
    session.run("mkdocs", "build", "--strict", "-f", str(ROOT / "docs" / "mkdocs.yml"), env=env)
    session.run(
        "pytest", str(ROOT / "docs"), "-q", "-p", "no:cacheprovider", *session.posargs, env=env
    )


def _bench_install(session: nox.Session) -> None:
    # torchrl (pinned with its tensordict in constraints.txt) runs beside ours in one process;
    # envpool is optional: pip's exit code 1 (no wheel here) leaves its column out.
    # rlcollectors[ray]: case 9 (RayCollector) is skipped without ray.
    _install_local(
        session,
        ["rlbatched", "rllibs", "rlcollectors"],
        {"rllibs": "[gym]", "rlcollectors": "[ray]"},
    )
    _install(session, *CONSTRAINTS, "torchrl", "matplotlib")
    session.run_install(
        "python", "-m", "pip", "install", *CONSTRAINTS, "envpool", success_codes=[0, 1]
    )
    _share_identical_files(session)


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
    # create_tmp points TMPDIR into the venv, where Ray's workers refuse to start (case 9)
    ray_tmp = {"RAY_TMPDIR": tempfile.gettempdir()}
    session.run("python", str(ROOT / "benchmarks" / "run.py"), "--quick", "--out", out, env=ray_tmp)


def _umbrella_pins_match() -> list[str]:
    """Mismatches between the umbrella's pins and each package's own version."""
    import re

    versions = {}
    for name in _local_packages():
        text = (PACKAGES_DIR / name / "src" / name / "_version.py").read_text()
        versions[name] = re.search(r'__version__ = "([^"]+)"', text).group(1)
    project = _pyproject(UMBRELLA)["project"]
    reqs = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        reqs += extra
    problems = []
    for req in map(Requirement, reqs):
        if req.name in versions and str(req.specifier) != f"=={versions[req.name]}":
            problems.append(f"{UMBRELLA} pins {req}, but {req.name} is {versions[req.name]}")
    return problems


@nox.session(python=PYTHON)
def build(session: nox.Session) -> None:
    """A wheel and an sdist of every package and of the umbrella into dist/, then twine check."""
    problems = _umbrella_pins_match()
    if problems:
        session.error("; ".join(problems))
    _install(session, "build>=1.2", "twine>=5")
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for name in [*_local_packages(), UMBRELLA]:
        session.run(
            "python", "-m", "build", "--outdir", str(dist), str(PACKAGES_DIR / name), silent=True
        )
    built = sorted(dist.iterdir())
    session.run("twine", "check", "--strict", *map(str, built))
    for path in built:
        session.log(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


@nox.session(python=PYTHON)
def wheelhouse(session: nox.Session) -> None:
    """Install from dist/ into fresh venvs with one pip command each, as a user would; roll out."""
    wheels = {p.name.split("-")[0] for p in (ROOT / "dist").glob("*.whl")}
    if wheels < {*_local_packages(), UMBRELLA}:
        session.error("dist/ lacks wheels: run `nox -s build` first")
    session.run(
        "python",
        str(ROOT / "tools" / "check_wheelhouse.py"),
        "--dist",
        str(ROOT / "dist"),
        "--constraints",
        str(ROOT / "constraints.txt"),
    )


@nox.session(python=PYTHON, default=False)
def demo(session: nox.Session) -> None:
    """The README's demo: a random-policy rollout of a real env in a ParallelEnv."""
    _install_local(session, ["rlbatched", "rllibs"], {"rllibs": "[gym,mujoco,dmc]"})
    _install(session, *CONSTRAINTS, "tqdm")
    session.run("python", str(ROOT / "examples" / "demo.py"), *session.posargs)

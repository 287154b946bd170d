"""Sessions for the monorepo: each package alone, the integration suite, docs, wheels, lint.

    nox                  # every default session, two at a time on two cores (README's command)
    nox -s dev           # the contributor's loop: lint and every package's fast tests
    nox -s rlspecs       # one package alone
    nox -s cuda          # every CUDA case, on a GPU machine (installs the CUDA build of torch)
    nox -s demo          # the README's demo
    nox -l               # every session

**Configurations.** Every test runs once per configuration that differs:

- each package alone (``nox -s <name>``): the package and its declared dependencies only, as
  ``pip install <name>`` gives a user, so with the newest tensordict it accepts (no pin);
- ``tensordict_min``: every package's tests against the oldest tensordict they declare;
- the shared *full* venv (``full_env``: every package with every extra, torchrl for the
  benchmarks, the docs tools; tensordict as ``constraints.txt`` pins it, the one torchrl
  0.14.1 ships with): ``integration`` (spawn, the default start method), ``integration_fork``
  (every test that takes the fork fixture, under fork), ``rlcollectors_ray``, ``docs`` and
  ``bench_smoke`` all run in it;
- ``build`` then ``wheelhouse``: wheels, installed into fresh venvs as a user would.

**Installs** go through uv (``nox[uv]``), with bytecode compiled at install time
(``UV_COMPILE_BYTECODE``): with ``PYTHONDONTWRITEBYTECODE=1`` a venv without valid ``.pyc``
files recompiles torch in every process. ``tools/check_bytecode.py`` checks each venv after
its install. A reused venv skips an install whose inputs (arguments, constraints, our sources)
have not changed. Torch is installed first from ``tools/torch_source.py`` (the CPU build by
default; ``RLSTACK_TORCH=cuda`` for the CUDA one); every install is under ``constraints.txt``.

**Python**: the interpreter that runs nox when it is 3.10-3.13, else the newest of those found
on PATH or in pyenv.

**Every pytest run** loads ``tools/pytest_rlstack.py`` (a per-test timeout is required, the
``slow`` marker, ``--cuda-only``) and reports skip reasons (``-rs``).
"""

from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import sys
import tempfile

import nox

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nox's own dependency
    import tomli as tomllib
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).parent
TOOLS = ROOT / "tools"
sys.path.insert(0, str(TOOLS))

import torch_source  # noqa: E402  (tools/ is not a package)

PACKAGES_DIR = ROOT / "packages"
CONSTRAINTS_FILE = ROOT / "constraints.txt"
SUPPORTED_PYTHONS = ("3.13", "3.12", "3.11", "3.10")
UMBRELLA = "rlstack"  # the meta-package: no code, no tests, only extras
TIMEOUT = "300"  # seconds per test, unless a test says otherwise (@pytest.mark.timeout)

# Extras a package's own tests need, and our packages its tests use without depending on them.
TEST_EXTRAS = {"rllibs": "[all]", "rlcollectors": "[progress]"}
TEST_LOCAL_DEPS = {
    "rlcore": ["rlmocks"],
    "rltransforms": ["rlmocks", "rlbatched", "rllibs"],  # transforms in batched envs and on GymEnv
    "rlbatched": ["rlmocks", "rltransforms"],
    "rllibs": ["rlbatched", "rlmocks", "rltransforms"],
    "rlmodules": ["rltransforms"],  # LSTMModule's primers
    "rlcollectors": ["rlbatched", "rlmocks", "rlmodules"],
}
TEST_TOOLS = ["pytest>=8", "hypothesis>=6", "pytest-timeout>=2.3"]
FULL_EXTRAS = {"rllibs": "[all]", "rlcollectors": "[ray,progress]"}
FULL_TOOLS = [
    *TEST_TOOLS,
    "pytest-rerunfailures>=14",
    "pyyaml",
    "packaging",
    "tqdm",
    "torchrl",  # the benchmarks' reference, pinned with its tensordict in constraints.txt
    "matplotlib",  # the benchmarks' chart
    "-r",
    str(ROOT / "docs" / "requirements.txt"),
]


def _session_python() -> str:
    """This interpreter when supported, else the newest supported one on PATH or in pyenv."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" in SUPPORTED_PYTHONS:
        return sys.executable
    pyenv = pathlib.Path(os.environ.get("PYENV_ROOT", "~/.pyenv")).expanduser()
    for version in SUPPORTED_PYTHONS:
        found = shutil.which(f"python{version}") or next(
            iter(sorted(pyenv.glob(f"versions/{version}.*/bin/python{version}"), reverse=True)),
            None,
        )
        if found:
            return str(found)
    raise RuntimeError(f"nox: no Python {', '.join(SUPPORTED_PYTHONS)} found")


PYTHON = _session_python()

nox.options.default_venv_backend = "uv"
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True
# two sessions at a time on two cores: most tests keep one core busy (a spawned worker's
# import the other), so a second session fills the idle one
nox.options.parallel = max(1, min(os.cpu_count() or 1, 4))
nox.options.sessions = [
    # longest first: the parallel scheduler starts them in this order
    "full_env",
    "integration",
    "tensordict_min",
    "integration_fork",
    "rlbatched",
    "rlcore",
    "rltransforms",
    "docs",
    "rlcollectors_ray",
    "bench_smoke",
    "rllibs",
    "rlcollectors",
    "rlmocks",
    "rlspecs",
    "rlworkers",
    "rlmodules",
    "build",
    "wheelhouse",
    "lint",
]


# ----------------------------------------------------------------------------- helpers


def _pyproject(name: str) -> dict:
    return tomllib.loads((PACKAGES_DIR / name / "pyproject.toml").read_text())


def _local_packages() -> list[str]:
    """Our code packages (the umbrella has none)."""
    return sorted(
        p.parent.name for p in PACKAGES_DIR.glob("*/pyproject.toml") if p.parent.name != UMBRELLA
    )


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


def _fingerprint(args: tuple[str, ...]) -> str:
    """A digest of an install's arguments, the constraints and every source file of ours."""
    digest = hashlib.sha256("\0".join(args).encode())
    digest.update(CONSTRAINTS_FILE.read_bytes())
    digest.update((TOOLS / "torch_source.py").read_bytes())
    for path in sorted(PACKAGES_DIR.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and "tests" not in path.parts:
            digest.update(str(path.relative_to(ROOT)).encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _venv_python_version(session: nox.Session) -> tuple[int, int]:
    out = session.run("python", "-c", "import sys; print(*sys.version_info[:2])", silent=True)
    major, minor = out.split()
    return int(major), int(minor)


def _pinned_name(line: str) -> str | None:
    text = line.split("#", 1)[0].strip()
    return Requirement(text).name if text else None


def _constraints(
    session: nox.Session, source: torch_source.TorchSource | None, drop: tuple[str, ...] = ()
) -> list[str]:
    """``-c`` arguments: constraints.txt, less the pins of ``drop``, plus the torch build."""
    lines = CONSTRAINTS_FILE.read_text().splitlines()
    kept = [line for line in lines if _pinned_name(line) not in drop]
    if source is not None:
        kept.append(source.constraint())
    path = pathlib.Path(session.create_tmp()) / f"constraints-{'-'.join(drop) or 'all'}.txt"
    path.write_text("\n".join(kept) + "\n")
    return ["-c", str(path)]


def _install(
    session: nox.Session,
    *args: str,
    ours: list[str] = (),
    drop: tuple[str, ...] = (),
    flavour: str | None = None,
    with_torch: bool = True,
) -> None:
    """``uv pip install`` under the constraints (less ``drop``), bytecode compiled, torch first
    from its source; skipped when a reused venv already has exactly this install.

    ``ours``: our packages among ``args``, rebuilt from the checkout whenever the install runs;
    ``with_torch=False``: a venv of tools that need no torch.
    """
    flavour = flavour or torch_source.chosen_flavour()
    key = (*args, *drop, flavour)
    venv = pathlib.Path(session.virtualenv.location)
    marker = venv / f".installed-{hashlib.sha256(' '.join(key).encode()).hexdigest()[:16]}"
    stamp = _fingerprint(key)
    if marker.exists() and marker.read_text() == stamp:
        session.log(f"unchanged since the last run, not reinstalled: {' '.join(args)[:120]}")
        return
    env = {"UV_COMPILE_BYTECODE": "1"}
    source = None
    if with_torch:
        source = torch_source.torch_source(_venv_python_version(session), flavour)
    constraints = _constraints(session, source, drop)
    if source is not None:
        session.install(*constraints, *source.install_args(), env=env)
    reinstall = [arg for name in ours for arg in ("--reinstall-package", name)]
    session.install(*constraints, *args, *reinstall, env=env)
    if with_torch:
        session.run("python", str(TOOLS / "check_bytecode.py"), "python", silent=True)
    # `nox -R` (--no-install) makes session.install a no-op on a reused venv: no marker then,
    # or a later plain run would skip an install that never happened (nox has no public flag)
    if not session._runner.global_config.no_install:
        marker.write_text(stamp)


def _install_local(
    session: nox.Session,
    names: list[str],
    extras: dict[str, str],
    *more: str,
    editable: bool = False,
    **kwargs,
) -> None:
    """Our packages ``names`` with their closure of ours (``extras`` per package) and ``more``."""
    closure = _local_closure(names)
    targets = [f"{PACKAGES_DIR / n}{extras.get(n, '')}" for n in closure]
    if editable:
        targets = [arg for target in targets for arg in ("-e", target)]
    _install(session, *targets, *more, ours=closure, **kwargs)


PYTEST = ("-m", "pytest", "-p", "pytest_rlstack", f"--timeout={TIMEOUT}", "-q", "-rs")


def _pytest(session: nox.Session, *args: str, full: bool = False, **kwargs) -> None:
    """pytest with the suite plugin, a per-test timeout and the skip reasons shown; in the
    session's venv, or in the full venv (``full=True``)."""
    env = {**(_full_venv_env() if full else {}), **kwargs.pop("env", {})}
    env["PYTHONPATH"] = str(TOOLS)
    python = str(FULL_VENV / "bin" / "python") if full else "python"
    args = (*PYTEST, "-p", "no:cacheprovider", *args, *session.posargs)
    session.run(python, *args, env=env, external=full, **kwargs)


def _pytest_full(session: nox.Session, *args: str, **kwargs) -> None:
    """``_pytest`` in the full venv (made by ``full_env``)."""
    _pytest(session, *args, full=True, **kwargs)


def _package_tests(session: nox.Session, names: list[str], *args: str) -> None:
    """Each package's ``tests/`` in its own pytest run (their conftests are independent);
    every package runs even when one fails, so one session reports all its failures."""
    failed = []
    for name in names:
        try:
            _pytest(session, str(PACKAGES_DIR / name / "tests"), *args)
        except nox.command.CommandFailed:
            failed.append(name)
    if failed:
        session.error(f"tests failed in: {', '.join(failed)}")


def _declared_floor(dist: str) -> str:
    """The lowest version of ``dist`` every package accepts (the ``>=`` of their declarations)."""
    floors = set()
    for name in _local_packages():
        for req in _pyproject(name)["project"].get("dependencies", []):
            parsed = Requirement(req)
            if parsed.name == dist:
                floors |= {spec.version for spec in parsed.specifier if spec.operator == ">="}
    if len(floors) != 1:
        raise RuntimeError(f"packages declare different {dist} floors: {sorted(floors)}")
    return floors.pop()


FULL_VENV = ROOT / ".nox" / "full_env"


def _full_venv_env() -> dict[str, str]:
    """Environment variables that run commands in the full venv (made by ``full_env``)."""
    if not (FULL_VENV / "bin" / "python").exists():
        raise RuntimeError("the full venv does not exist: run `nox -s full_env` first")
    path = f"{FULL_VENV / 'bin'}{os.pathsep}{os.environ['PATH']}"
    return {"VIRTUAL_ENV": str(FULL_VENV), "PATH": path}


def _in_full_venv(session: nox.Session, program: str, *args: str, **kwargs) -> None:
    """``program`` (a script of the full venv: python, mkdocs, ...) run in the full venv."""
    env = {**_full_venv_env(), **kwargs.pop("env", {})}
    session.run(str(FULL_VENV / "bin" / program), *args, env=env, external=True, **kwargs)


# ----------------------------------------------------------------------------- package sessions


def _package_session(name: str):
    def run(session: nox.Session) -> None:
        # no tensordict pin: the newest release each package accepts, as pip gives a user
        _install_local(
            session,
            [name, *TEST_LOCAL_DEPS.get(name, [])],
            TEST_EXTRAS,
            *TEST_TOOLS,
            drop=("tensordict",),
        )
        _pytest(session, str(PACKAGES_DIR / name / "tests"))
        if name == "rlmocks":
            # a downstream project's own tests: the same install (rlspecs, rlcore, rlmocks)
            _pytest(session, str(ROOT / "integration_tests" / "downstream"))

    run.__doc__ = f"{name} alone with its declared dependencies (newest tensordict): its tests."
    return run


for _name in _local_packages():
    nox.session(name=_name, python=PYTHON, allow_parallel=True)(_package_session(_name))


@nox.session(python=PYTHON, allow_parallel=True)
def tensordict_min(session: nox.Session) -> None:
    """Every package's fast tests against the oldest tensordict our packages declare.

    The ``slow`` tests (spawn and forkserver variants, fresh interpreters) test how processes
    start, which does not depend on the tensordict version; the package sessions run them.
    """
    floor = _declared_floor("tensordict")
    _install_local(
        session,
        _local_packages(),
        TEST_EXTRAS,
        *TEST_TOOLS,
        f"tensordict=={floor}",
        drop=("tensordict",),
    )
    session.run("python", "-c", "import tensordict; print('tensordict', tensordict.__version__)")
    _package_tests(session, _local_packages(), "-m", "not slow")


# ----------------------------------------------------------------------------- the full venv


@nox.session(python=PYTHON, allow_parallel=True)
def full_env(session: nox.Session) -> None:
    """The venv the cross-package sessions share: every package with every extra, the tools."""
    _install_local(session, _local_packages(), FULL_EXTRAS, *FULL_TOOLS)


@nox.session(python=False, requires=["full_env"], allow_parallel=True)
def integration(session: nox.Session) -> None:
    """The cross-package suite (spawn, the default start method) and the README demo's tests."""
    _pytest_full(session, "examples")
    _pytest_full(session, "integration_tests", "--ignore=integration_tests/downstream")


@nox.session(python=False, requires=["full_env"], allow_parallel=True)
def integration_fork(session: nox.Session) -> None:
    """Every integration test that takes the seed's ParallelEnv fixture, under fork."""
    _pytest_full(
        session,
        "integration_tests",
        "--ignore=integration_tests/downstream",
        "--mp_fork_if_no_cuda",
        "--only-fork-fixture",
    )


@nox.session(python=False, requires=["full_env"], allow_parallel=True)
def rlcollectors_ray(session: nox.Session) -> None:
    """rlcollectors[ray]: RayCollector's tests (tests_ray/) on a real local Ray and cluster."""
    # Ray's temp dir: one per pytest run, outside the venv (tools/pytest_rlstack.py)
    _pytest_full(session, str(PACKAGES_DIR / "rlcollectors" / "tests_ray"))


@nox.session(python=False, requires=["full_env"], allow_parallel=True)
def docs(session: nox.Session) -> None:
    """Build the documentation site (mkdocs --strict) and run every example on its pages."""
    env = {"NO_MKDOCS_2_WARNING": "1"}
    _in_full_venv(
        session, "mkdocs", "build", "--strict", "-f", str(ROOT / "docs" / "mkdocs.yml"), env=env
    )
    _pytest_full(session, str(ROOT / "docs"), env=env)


@nox.session(python=False, requires=["full_env"], allow_parallel=True)
def bench_smoke(session: nox.Session) -> None:
    """Every benchmark case with tiny counts (times mean nothing); results go to a temp dir."""
    out = tempfile.mkdtemp(prefix="bench-smoke-")
    _in_full_venv(
        session,
        "python",
        str(ROOT / "benchmarks" / "run.py"),
        "--quick",
        "--out",
        out,
        # a Ray of its own (not one a session beside it started), outside the venv: Ray's
        # workers refuse to start inside one
        env={"RAY_TMPDIR": tempfile.mkdtemp(prefix="ray-", dir="/tmp")},
    )


@nox.session(python=False, requires=["full_env"], default=False)
def bench(session: nox.Session) -> None:
    """Side-by-side benchmarks vs torchrl and gymnasium; writes benchmarks/results/."""
    _in_full_venv(session, "python", str(ROOT / "benchmarks" / "run.py"), *session.posargs)


# ----------------------------------------------------------------------------- wheels


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


@nox.session(python=PYTHON, allow_parallel=True)
def build(session: nox.Session) -> None:
    """A wheel and an sdist of every package and of the umbrella into dist/, then twine check."""
    problems = _umbrella_pins_match()
    if problems:
        session.error("; ".join(problems))
    _install(session, "build[uv]>=1.2", "twine>=5", with_torch=False)
    dist = ROOT / "dist"
    shutil.rmtree(dist, ignore_errors=True)
    for name in [*_local_packages(), UMBRELLA]:
        session.run(
            "python",
            "-m",
            "build",
            "--installer",
            "uv",
            "--outdir",
            str(dist),
            str(PACKAGES_DIR / name),
            silent=True,
        )
    built = sorted(dist.iterdir())
    session.run("twine", "check", "--strict", *map(str, built))
    for path in built:
        session.log(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


@nox.session(python=PYTHON, requires=["build"], allow_parallel=True)
def wheelhouse(session: nox.Session) -> None:
    """Install from dist/ into fresh venvs with one pip command each, as a user would; roll out."""
    wheels = {p.name.split("-")[0] for p in (ROOT / "dist").glob("*.whl")}
    if wheels < {*_local_packages(), UMBRELLA}:
        session.error("dist/ lacks wheels: run `nox -s build` first")
    session.run(
        "python",
        str(TOOLS / "check_wheelhouse.py"),
        "--dist",
        str(ROOT / "dist"),
        "--constraints",
        str(CONSTRAINTS_FILE),
    )


# ----------------------------------------------------------------------------- lint, dev, cuda

LINT_TOOLS = ["ruff==0.17.6", "pytest>=8", "pytest-timeout>=2.3", "nox[uv]>=2026.10"]


def _lint_checks(session: nox.Session) -> None:
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("python", str(TOOLS / "check_private_apis.py"), str(ROOT))
    # layers: declared package edges, rlcore importing no transform or wrapper, no module
    # importing upward or in a circle
    session.run("python", str(TOOLS / "check_layers.py"), str(ROOT))
    shared = ROOT.parent / "shared" / "tools"
    for checker, args in (("check_edges.py", [str(ROOT)]), ("check_done_rule.py", _srcs())):
        if (shared / checker).exists():
            session.run("python", str(shared / checker), *args)
        else:
            session.warn(f"{shared / checker} not found: that check is skipped")
    _pytest(session, str(TOOLS / "tests"))


def _srcs() -> list[str]:
    return [str(path) for path in sorted(PACKAGES_DIR.glob("*/src"))]


@nox.session(python=PYTHON, allow_parallel=True)
def lint(session: nox.Session) -> None:
    """ruff, the private-API boundary, dependency edges and layers, the done rule stated once,
    and the suite's own checks."""
    _install(session, *LINT_TOOLS, with_torch=False)
    _lint_checks(session)


@nox.session(python=PYTHON, default=False)
def dev(session: nox.Session) -> None:
    """The contributor's loop: lint, then every package's fast tests (``-m "not slow"``).

    One venv holds every package, installed editable (a source change needs no reinstall);
    the full run (``nox``) runs the slow tests too, and each package alone.
    """
    _install_local(session, _local_packages(), FULL_EXTRAS, *TEST_TOOLS, *LINT_TOOLS, editable=True)
    _lint_checks(session)
    _package_tests(session, _local_packages(), "-m", "not slow")


@nox.session(python=PYTHON, default=False)
def cuda(session: nox.Session) -> None:
    """Every CUDA case of every suite, with torch's CUDA build, on a machine with a GPU.

    Fails without a CUDA device (``--cuda-only``), so it cannot pass by skipping everything.
    """
    _install_local(
        session,
        _local_packages(),
        FULL_EXTRAS,
        *TEST_TOOLS,
        "pytest-rerunfailures>=14",
        flavour="cuda",
    )
    _package_tests(session, _local_packages(), "--cuda-only")
    _pytest(session, "integration_tests", "--ignore=integration_tests/downstream", "--cuda-only")


@nox.session(python=PYTHON, default=False)
def demo(session: nox.Session) -> None:
    """The README's demo: a random-policy rollout of a real env in a ParallelEnv."""
    _install_local(session, ["rlbatched", "rllibs"], {"rllibs": "[gym,mujoco,dmc]"}, "tqdm")
    session.run("python", str(ROOT / "examples" / "demo.py"), *session.posargs)

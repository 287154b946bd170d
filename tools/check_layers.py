#!/usr/bin/env python3
"""Check the layering of the packages: who may import whom, inside and across packages.

Fails (exit status 1, one line per problem) when:

- a package imports one of ours it does not declare (``[project].dependencies`` or an extra),
  also lazily, inside a function;
- rlcore imports a transform or a wrapper (``rltransforms``, ``rllibs``, ``rlbatched``): the
  env base finds them by name (``rlcore._plugins``), it never imports them;
- a module imports one of its package's modules upward: each package lists its modules in
  layers, lowest first, in its ``pyproject.toml`` (``[tool.rlstack] layers``); a module may
  import modules of its own layer or below. Every module must be listed;
- two modules of a package import each other, directly or through others (an import circle),
  whatever their layers. Imports made only for type checking (``if TYPE_CHECKING:``) are
  left out: they never run.

    python tools/check_layers.py [REPO_ROOT]
"""

from __future__ import annotations

import ast
import pathlib
import re
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: nox's own dependency
    import tomli as tomllib

ENV_BASE_PACKAGE = "rlcore"
NEVER_IN_ENV_BASE = ("rltransforms", "rllibs", "rlbatched", "rlcollectors", "rlmocks")


def _dist(requirement: str) -> str:
    return re.split(r"[\s\[<>=!~;@(]", requirement.strip(), maxsplit=1)[0].lower()


def _imports(path: pathlib.Path, package: str) -> list[tuple[str, int]]:
    """``(module, line)`` of every import that runs (absolute names, within and across packages)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    typing_only = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.dump(node.test):
            typing_only.update(id(inner) for inner in ast.walk(node))
    out = []
    for node in ast.walk(tree):
        if id(node) in typing_only:
            continue
        if isinstance(node, ast.Import):
            out += [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = _package_of(path, package, node.level)
                module = f"{anchor}.{node.module}" if node.module else anchor
                if node.module is None:
                    out += [(f"{module}.{alias.name}", node.lineno) for alias in node.names]
                else:
                    out.append((module, node.lineno))
            elif node.module:
                out.append((node.module, node.lineno))
                out += [(f"{node.module}.{alias.name}", node.lineno) for alias in node.names]
    return out


def _package_of(path: pathlib.Path, package: str, level: int) -> str:
    """The dotted package a relative import of ``level`` starts from, for a module at ``path``."""
    parts = list(path.with_suffix("").parts)
    index = len(parts) - 1 - parts[::-1].index(package)
    dotted = parts[index:]
    if path.name == "__init__.py":
        dotted = dotted[:-1]
        level -= 1
    return ".".join(dotted[: len(dotted) - level])


def _module_name(path: pathlib.Path, src: pathlib.Path) -> str:
    rel = path.relative_to(src).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for other in sorted(graph.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on_stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                other = stack.pop()
                on_stack.discard(other)
                component.append(other)
                if other == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(10000)
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def check_package(root: pathlib.Path, package_dir: pathlib.Path, ours: set[str]) -> list[str]:
    """The problems of one package (see the module docstring)."""
    project = tomllib.loads((package_dir / "pyproject.toml").read_text())
    name = project["project"]["name"]
    src = package_dir / "src" / name
    if not src.exists():
        return []
    declared = {_dist(r) for r in project["project"].get("dependencies", [])}
    for extra in project["project"].get("optional-dependencies", {}).values():
        declared |= {_dist(r) for r in extra}
    layers = project.get("tool", {}).get("rlstack", {}).get("layers")
    problems = []
    modules = {_module_name(p, src): p for p in sorted(src.rglob("*.py"))}
    if layers is None:
        problems.append(f"{name}: no [tool.rlstack] layers in its pyproject.toml")
        layers = [sorted(modules)]
    layer_of = {}
    for depth, layer in enumerate(layers):
        for module in layer:
            layer_of[module] = depth
    for module in sorted(set(modules) - set(layer_of)):
        if module:  # the package's __init__ stands above every layer
            problems.append(f"{name}: module {module!r} is in no layer of [tool.rlstack] layers")
    for module in sorted(set(layer_of) - set(modules)):
        problems.append(f"{name}: layer lists {module!r}, which does not exist")
    graph: dict[str, set[str]] = {module: set() for module in modules}
    for module, path in modules.items():
        where = path.relative_to(root)
        for imported, line in _imports(path, name):
            top = imported.split(".")[0]
            if top in ours and top != name and top not in declared:
                problems.append(f"{where}:{line}: {name} imports {top}, which it does not declare")
            if name == ENV_BASE_PACKAGE and top in NEVER_IN_ENV_BASE:
                problems.append(
                    f"{where}:{line}: rlcore imports {top}: the env base finds packages built on "
                    "it by name (rlcore._plugins), it never imports them"
                )
            if top != name:
                continue
            target = imported[len(name) + 1 :]
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if not target or target == module:
                continue
            graph[module].add(target)
            if module and target in layer_of and module in layer_of:
                if layer_of[target] > layer_of[module]:
                    problems.append(
                        f"{where}:{line}: {name}.{module} (layer {layer_of[module]}) imports "
                        f"{name}.{target} (layer {layer_of[target]}), which is above it"
                    )
    graph.pop("", None)
    for deps in graph.values():
        deps.discard("")
    for cycle in _cycles(graph):
        problems.append(f"{name}: import circle between {', '.join(cycle)}")
    return problems


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[1] if len(argv) > 1 else ".").resolve()
    package_dirs = sorted(p.parent for p in (root / "packages").glob("*/pyproject.toml"))
    ours = {
        tomllib.loads((p / "pyproject.toml").read_text())["project"]["name"] for p in package_dirs
    }
    problems = []
    for package_dir in package_dirs:
        problems += check_package(root, package_dir, ours)
    for problem in problems:
        print(problem)
    print(f"layers: {len(package_dirs)} packages checked, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

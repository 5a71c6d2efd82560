"""The package's rooms import one way only: down the layers below, never up, and no cycle.

Every module's imports (module level, inside functions and under TYPE_CHECKING alike) are read
with ast, so a lazy upward import is caught too. docs/design.md ("What each package owns") shows
the same layers.
"""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "regressbisect"

LAYERS: dict[str, int] = {
    # 0: what everything may use; the protocol is what a probe imports as regressbisect.report,
    # the contract what the tool and a probe agree on (the shim loads it by path)
    "regressbisect": 0,
    "regressbisect.errors": 0,
    "regressbisect.samples": 0,
    "regressbisect.probe.protocol": 0,
    "regressbisect.probe.contract": 0,
    "regressbisect.jsonio": 0,
    "regressbisect.metric": 0,
    "regressbisect.version": 0,
    "regressbisect.tomlread": 0,
    # 1: every setting's default and validation (the search's settings take their defaults here)
    "regressbisect.config": 1,
    # 2: parts that know nothing of running a probe: pure search and statistics, rendering of
    # report dicts, git, the store, the workloads
    "regressbisect.search": 2,
    "regressbisect.render": 2,
    "regressbisect.git": 2,
    "regressbisect.store": 2,
    "regressbisect.workload": 2,
    # 3: facts of the machine the probes run on
    "regressbisect.machine": 3,
    # 4: running one probe (locally or on Slurm), its isolation, setup and venvs
    "regressbisect.probe": 4,
    # 4: the environments of `deps`: their pins, builds (with uv) and the releases between two
    "regressbisect.deps": 4,
    # 5: the three hunts and what they share
    "regressbisect.hunts": 5,
    # 6: the command line
    "regressbisect.cli": 6,
    "regressbisect.__main__": 6,
    # 7: throw-away repositories and fake machines for the tests and scripts/
    "regressbisect.testing": 7,
}


def room(module: str) -> str:
    """The longest LAYERS key that is `module` or a package above it."""
    parts = module.split(".")
    for n in range(len(parts), 0, -1):
        name = ".".join(parts[:n])
        if name in LAYERS:
            return name
    raise KeyError(module)


def module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE_DIR.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path) -> set[str]:
    """Every regressbisect module `path` imports, absolute or relative, anywhere in the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # `from regressbisect.x import y` may name the submodule regressbisect.x.y
            found.update(f"{target}.{alias.name}" for alias in node.names)
    return {m for m in found if m == "regressbisect" or m.startswith("regressbisect.")}


@functools.lru_cache(maxsize=1)
def package_modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE_DIR.rglob("*.py")}


def resolve(module: str, known: dict[str, Path]) -> str | None:
    """The module an import names (a `from x import name` of a non-module resolves to x)."""
    while module and module not in known:
        module = module.rpartition(".")[0]
    return module or None


def import_graph() -> dict[str, set[str]]:
    known = package_modules()
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        targets = {resolve(m, known) for m in imported_modules(path)}
        graph[name] = {t for t in targets if t and t != name}
    return graph


def test_every_module_has_a_layer():
    assert [m for m in package_modules() if _no_room(m)] == []


def _no_room(module: str) -> bool:
    try:
        room(module)
    except KeyError:
        return True
    return False


def test_imports_go_down_the_layers_only():
    upward = []
    for source, targets in sorted(import_graph().items()):
        for target in sorted(targets):
            a, b = room(source), room(target)
            # a room may use any room of its own layer or a lower one (never in a cycle: below)
            if LAYERS[b] <= LAYERS[a]:
                continue
            upward.append(f"{source} (layer {LAYERS[a]}) imports {target} (layer {LAYERS[b]})")
    assert upward == []


def test_no_import_cycles():
    graph = import_graph()
    # `regressbisect/__init__` runs before any submodule; a package's import of its own
    # submodules is no cycle of logic, so package inits are left out of the cycle walk
    graph = {m: {t for t in ts if not _is_package(t)} for m, ts in graph.items() if not _is_package(m)}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def walk(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                walk(nxt, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            walk(node, [])
    assert cycles == []


def _is_package(module: str) -> bool:
    return package_modules()[module].name == "__init__.py"


@pytest.mark.parametrize("source, target", [
    ("regressbisect.search.bisect", "regressbisect.hunts.commits"),
    ("regressbisect.probe.runner", "regressbisect.hunts.common"),
    ("regressbisect.store", "regressbisect.probe.runner"),
])
def test_an_upward_import_is_caught(source, target):
    """The check itself can fail: these imports would break the layering."""
    assert LAYERS[room(target)] > LAYERS[room(source)]


@pytest.mark.parametrize("module, below", [
    ("regressbisect.store", "regressbisect.render"),      # the store keeps what renderers show
    ("regressbisect.config", "regressbisect.probe"),      # settings are checked before any probe
])
def test_a_lower_room_imports_nothing_of_a_room_it_feeds(module, below):
    """Rooms of layer 0 to 2 that feed another: strict JSON (jsonio) and the metric regex (metric)
    live below both."""
    imported = {resolve(m, package_modules()) for m in imported_modules(package_modules()[module])}
    assert sorted(m for m in imported if m and room(m).startswith(below)) == []


SCRIPTS_DIR = PACKAGE_DIR.parent / "scripts"


def _top_level_imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_scripts_import_the_package_and_their_shared_module_never_tests():
    """scripts/ sits above the package: it may import regressbisect and scripts/_common.py
    (which puts the repository on sys.path once), never tests/, and sets up no path of its own."""
    wrong = []
    for path in sorted(SCRIPTS_DIR.glob("*.py")):
        if "tests" in _top_level_imports(path):
            wrong.append(f"{path.name} imports tests")
        if path.name != "_common.py" and "sys.path.insert" in path.read_text(encoding="utf-8"):
            wrong.append(f"{path.name} puts a path on sys.path itself (import _common)")
    assert wrong == []

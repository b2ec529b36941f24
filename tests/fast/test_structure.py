"""The package's shape, checked: no import cycles between its modules (imports inside functions
and under `if TYPE_CHECKING:` count), no import that runs up a layer, no module over 400 lines,
and the domain (everything outside defs/, runs/, cli/, definitions.py and launch.py) importable
without Dagster."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Collection
from pathlib import Path

from project import ROOT

PACKAGE = ROOT / "endless_assets"
MAX_LINES = 400


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


# The layers, lowest first (docs/pipeline.md shows the same order). A module may import its own
# room and the rooms of lower layers, never a higher one. A room is a package directly under
# endless_assets/ (store, sandbox, ...) or a top-level module (models, launch, ...).
LAYERS: list[tuple[str, ...]] = [
    (
        "endless_assets",
        "models",
        "solver_id",
        "taxonomy",
        "batch_calendar",
        "instance",
        "processes",
    ),
    ("store",),
    ("sampling",),
    ("sandbox",),
    ("settings",),
    ("llm",),
    ("generation", "agent"),
    ("interop",),
    ("decontamination",),
    ("stages",),
    ("report", "serve", "testing"),
    ("defs", "runs"),
    ("definitions", "launch"),
    ("cli",),
]

# Imports that run up a layer on purpose, each with its reason: (importer prefix, imported
# prefix) -> why.
UPWARD: dict[tuple[str, str], str] = {}


def imports(tree: ast.AST, mods: Collection[str]) -> set[str]:
    """The modules of `mods` a module's source imports, wherever the import stands: inside
    functions (they run when called, and close a circle as surely) and under `if TYPE_CHECKING:`
    (a dependency all the same, and a circle the type checker walks) included."""
    deps = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("endless_"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                deps.add(candidate if candidate in mods else node.module)
        elif isinstance(node, ast.Import):
            deps |= {a.name for a in node.names if a.name.startswith("endless_assets")}
    return {d for d in deps if d in mods}


def import_graph() -> dict[str, set[str]]:
    """Every import between the package's modules (see `imports`)."""
    mods = modules()
    return {
        name: imports(ast.parse(path.read_text()), mods) - {name} for name, path in mods.items()
    }


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def layer_of(module: str) -> int:
    for i, rooms in enumerate(LAYERS):
        if room(module) in rooms:
            return i
    raise KeyError(f"{module}: its room {room(module)!r} is in no layer of LAYERS")


def upward_imports(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    return sorted(
        (a, b)
        for a, deps in graph.items()
        for b in deps
        if layer_of(b) > layer_of(a)
        and not any(a.startswith(x) and b.startswith(y) for x, y in UPWARD)
    )


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_module_imports_itself_through_others():
    assert cycles(import_graph()) == []


def test_the_graph_counts_imports_inside_functions_and_under_type_checking():
    tree = ast.parse(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n"
        "    from endless_assets.cli import app\n"
        "def f():\n"
        "    from endless_assets.store import lake\n"
    )
    mods = {"endless_assets.cli", "endless_assets.store", "endless_assets.store.lake"}
    assert imports(tree, mods) == {"endless_assets.cli", "endless_assets.store.lake"}


def test_the_pipeline_guide_lists_the_same_layers():
    guide = (PACKAGE.parent / "docs" / "pipeline.md").read_text()
    section = guide.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    listed = [
        tuple(re.findall(r"`([a-z_]+)(?:/|\.py)`", line.split(":", 1)[0]))
        for line in section.splitlines()
        if re.match(r"\d+\. ", line)
    ]
    unnamed = ("endless_assets",)  # the package itself
    ours = [tuple(r for r in rooms if r not in unnamed) for rooms in LAYERS]
    assert listed == ours


def test_every_module_has_a_layer():
    unplaced = set()
    for name in modules():
        try:
            layer_of(name)
        except KeyError:
            unplaced.add(room(name))
    assert unplaced == set()


def test_no_module_imports_a_higher_layer():
    assert upward_imports(import_graph()) == []


def test_every_listed_upward_import_still_happens():
    graph = import_graph()
    happening = {
        (x, y)
        for x, y in UPWARD
        for a, deps in graph.items()
        for b in deps
        if a.startswith(x) and b.startswith(y) and layer_of(b) > layer_of(a)
    }
    assert happening == set(UPWARD)


def test_no_module_is_longer_than_four_hundred_lines():
    long = {
        str(path.relative_to(PACKAGE.parent)): n
        for path in modules().values()
        if (n := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_domain_imports_without_dagster():
    domain = sorted(
        name
        for name in modules()
        if not name.startswith(("endless_assets.defs", "endless_assets.runs", "endless_assets.cli"))
        and name not in ("endless_assets.definitions", "endless_assets.launch")
    )
    script = (
        "import importlib, sys\n"
        f"for name in {domain!r}:\n"
        "    importlib.import_module(name)\n"
        "print(sorted(m for m in sys.modules if m == 'dagster' or m.startswith('dagster.')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"

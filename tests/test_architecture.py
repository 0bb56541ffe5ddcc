"""The direction of imports between ckptprof's packages, read from the source (every import, at the top of a
module or inside a function): the layering the design promises, held so that a move cannot quietly undo it."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ckptprof"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(path: Path) -> Iterator[str]:
    """Every ckptprof module ``path`` imports (``from ckptprof.x import y`` names ``ckptprof.x.y`` where y is a
    module, else ``ckptprof.x``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = module_name(path).split(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names if alias.name.split(".")[0] == "ckptprof")
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - node.level + (1 if path.name == "__init__.py" else 0)]
                source = ".".join([*base, node.module] if node.module else base)
            else:
                source = node.module or ""
            if source.split(".")[0] != "ckptprof":
                continue
            # `from pkg import module` depends on the module; `from pkg import name` on what pkg defines
            for alias in node.names:
                candidate = f"{source}.{alias.name}"
                yield candidate if candidate in MODULES else source


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}
GRAPH = {name: sorted(set(imported(path)) & set(MODULES)) for name, path in MODULES.items()}


def room(module: str) -> str:
    """The package a module lives in (``ckptprof.loader.strategies.vllm`` -> ``loader``), or the module itself."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def arrows(frm: str, to: str) -> list[str]:
    return [f"{a} -> {b}" for a, deps in GRAPH.items() if room(a) == frm for b in deps if room(b) == to]


def test_the_graph_is_read() -> None:
    # a reader that found nothing would pass every rule below
    assert len(MODULES) > 80
    assert "ckptprof.loader.plan" in GRAPH["ckptprof.loader.worker"]
    assert "ckptprof.loader.strategies" in GRAPH["ckptprof.loader.worker"]


def test_nothing_imports_the_command_line() -> None:
    inward = [
        f"{a} -> {b}"
        for a, deps in GRAPH.items()
        if room(a) not in ("cli", "__main__")
        for b in deps
        if room(b) == "cli"
    ]
    assert inward == []


@pytest.mark.parametrize(
    ("frm", "to"),
    [
        ("loader", "run"),
        ("loader", "analysis"),
        ("loader", "render"),
        ("loader", "cli"),
        ("loader", "probe"),
        ("analysis", "loader"),
        ("analysis", "probe"),
        ("render", "loader"),
        ("render", "probe"),
        ("probe", "loader"),
        ("probe", "analysis"),
        ("checkpoint", "loader"),
        ("session", "loader"),
        # the run package owns a run: the command line reaches the loader and the releases only through it
        ("cli", "loader"),
        ("cli", "engines"),
        ("run", "cli"),
        ("run", "render"),
        ("analysis", "run"),
        ("render", "run"),
        ("probe", "run"),
        ("checkpoint", "run"),
        ("session", "run"),
        ("api", "run"),
    ],
)
def test_a_lower_room_never_imports_a_higher_one(frm: str, to: str) -> None:
    assert arrows(frm, to) == []


@pytest.mark.parametrize("alone", ["engines", "bootlog"])
def test_the_release_facts_and_the_log_reader_stand_alone(alone: str) -> None:
    allowed = {alone, "errors", "engines"}
    outward = [
        f"{a} -> {b}" for a, deps in GRAPH.items() if room(a) == alone for b in deps if room(b) not in allowed
    ]
    assert outward == []


def test_the_package_root_is_imported_by_nothing_inside_it() -> None:
    # `import ckptprof` must stay light, and a module that reads the version from the root imports the API with it
    inward = [a for a, deps in GRAPH.items() if "ckptprof" in deps and a != "ckptprof"]
    assert inward == []


def test_no_circle_of_imports() -> None:
    # Tarjan's strongly connected components over every import, function-level ones included
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in GRAPH[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for name in sorted(GRAPH):
        if name not in index:
            visit(name)
    assert circles == []

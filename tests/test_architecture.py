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
        # api.py is the stage runner's public face over run/: run/ never reaches back up to it
        ("run", "api"),
        # watch/ observes a live server from outside: it never replays, probes, renders or runs a replay
        ("watch", "loader"),
        ("watch", "run"),
        ("watch", "api"),
        ("watch", "probe"),
        ("watch", "render"),
    ],
)
def test_a_lower_room_never_imports_a_higher_one(frm: str, to: str) -> None:
    assert arrows(frm, to) == []


def test_only_the_entry_points_import_the_run_package() -> None:
    # run/ owns a run: the command line, the API's face, the pytest plugin and the package root start one
    entry = {"cli", "api", "pytest_plugin", "ckptprof", "run"}
    inward = [
        f"{a} -> {b}" for a, deps in GRAPH.items() if room(a) not in entry for b in deps if room(b) == "run"
    ]
    assert inward == []


@pytest.mark.parametrize("alone", ["engines", "bootlog"])
def test_the_release_facts_and_the_log_reader_stand_alone(alone: str) -> None:
    allowed = {alone, "errors", "engines"}
    outward = [
        f"{a} -> {b}" for a, deps in GRAPH.items() if room(a) == alone for b in deps if room(b) not in allowed
    ]
    assert outward == []


# Small pure homes that every layer may use: each imports nothing of ckptprof above it (errors.py at most), so
# that analysis/ can price a load and probe/ and loader/ can parse devices without reaching into one another.
SMALL_HOMES = ("devices", "rates", "units", "optional", "version", "fstypes", "errors")


@pytest.mark.parametrize("home", SMALL_HOMES)
def test_the_small_homes_sit_below_everything(home: str) -> None:
    name = f"ckptprof.{home}"
    assert name in GRAPH
    assert [b for b in GRAPH[name] if b != "ckptprof.errors"] == []


def _defined_in(name: str) -> list[str]:
    """The modules that define a top-level function called ``name``."""
    return sorted(
        module
        for module, path in MODULES.items()
        for node in ast.parse(path.read_text(encoding="utf-8")).body
        if isinstance(node, ast.FunctionDef) and node.name == name
    )


@pytest.mark.parametrize(
    ("function", "home"),
    [
        # the --devices grammar: run/, probe/ and loader/plan.py all parse with it
        ("parse_devices", "ckptprof.devices"),
        ("visible_cuda", "ckptprof.devices"),
        # pricing a load from sampled (bytes, seconds) points: the probe measures them, the verdict prices with them
        ("predicted_seconds", "ckptprof.rates"),
        ("seconds_for", "ckptprof.rates"),
    ],
)
def test_device_parsing_and_the_prediction_formulas_have_one_home(function: str, home: str) -> None:
    assert _defined_in(function) == [home]


# The verdict's steps, lowest first: each imports only steps on a lower level (the remedies and the wording
# never reach for each other), and the package's __init__ re-exports them for every caller.
VERDICT = "ckptprof.analysis.verdict"
VERDICT_LEVELS = {"figures": 0, "completeness": 0, "classify": 1, "wording": 2, "remedies": 2, "compose": 3}


def test_the_verdict_is_split_into_its_steps() -> None:
    steps = {m.removeprefix(f"{VERDICT}.") for m in MODULES if m.startswith(f"{VERDICT}.")}
    assert steps == set(VERDICT_LEVELS)


@pytest.mark.parametrize("step", sorted(VERDICT_LEVELS))
def test_a_verdict_step_imports_only_the_steps_below_it(step: str) -> None:
    upward = [
        b
        for b in GRAPH[f"{VERDICT}.{step}"]
        if (b == VERDICT or b.startswith(f"{VERDICT}."))
        and VERDICT_LEVELS.get(b.removeprefix(f"{VERDICT}."), 99) >= VERDICT_LEVELS[step]
    ]
    assert upward == []


def test_callers_take_the_verdict_from_the_package_not_its_steps() -> None:
    # the steps may move again; ``ckptprof.analysis.verdict`` is the name other modules (and users) hold
    reaching_in = [
        f"{a} -> {b}"
        for a, deps in GRAPH.items()
        if not (a == VERDICT or a.startswith(f"{VERDICT}."))
        for b in deps
        if b.startswith(f"{VERDICT}.")
    ]
    assert reaching_in == []


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

"""lnbench's import structure: no import circle among its modules nor among its folders, each folder in one layer
(lnbench.layers.LAYERS), no module importing one that stands in a higher layer, and no command importing another
command's modules. Every import counts: top
level, inside functions and under `if TYPE_CHECKING:`, `import lnbench.x`, `from lnbench.x import y` and relative
imports. Parsed with `ast`, so nothing is imported to check it."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

from lnbench.layers import EXEMPT, LAYERS, SHARED, command_of, layer_of

PACKAGE = Path(__file__).resolve().parent.parent / "lnbench"


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the lnbench package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = module_files()


def _owner(name: str) -> str:
    """The lnbench module that `name` (a module, or a name inside one) lives in."""
    while name not in MODULES:
        name = name.rpartition(".")[0]
    return name


def imports_in(source: str, module: str, is_package: bool = False) -> list[tuple[str, int]]:
    """(imported lnbench module, line) for every import statement in `source`, the text of `module`, wherever
    the statement stands (module level, function, class, `if`)."""
    package = module if is_package else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(_owner(a.name), node.lineno) for a in node.names if a.name.split(".")[0] == "lnbench"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:                   # relative: `from . import x`, `from ..perf import y`
                parts = package.split(".")
                base = parts[: len(parts) - (node.level - 1)]
                source_module = ".".join(base + ([node.module] if node.module else []))
            else:
                source_module = node.module or ""
            if source_module.split(".")[0] != "lnbench":
                continue
            for alias in node.names:         # `from lnbench.x import y`: y may be a submodule
                name = f"{source_module}.{alias.name}"
                found.append((name if name in MODULES else _owner(source_module), node.lineno))
    return sorted({(target, line) for target, line in found if target != module}, key=lambda e: (e[1], e[0]))


def imports_of(module: str) -> list[tuple[str, int]]:
    path = MODULES[module]
    return imports_in(path.read_text(encoding="utf-8"), module, path.name == "__init__.py")


GRAPH = {module: imports_of(module) for module in MODULES}


def test_the_import_parser_sees_every_kind_of_import():
    edges = {target for target, _ in GRAPH["lnbench.perf.command"]}
    assert "lnbench.measure.protocol" in edges                 # from lnbench.measure.protocol import ...
    assert "lnbench.measure.load" in edges                     # from lnbench.measure import load (a submodule)
    assert "lnbench.flydsl.launch" in {t for t, _ in GRAPH["lnbench.backends.flydsl_backend"]}   # in a function
    assert "lnbench.emu.ops_vector" in {t for t, _ in GRAPH["lnbench.emu.semantics"]}            # in a function


def test_the_import_parser_resolves_relative_and_nested_imports():
    source = """
import os
import lnbench.measure.timing
from . import kernel_stats
from .. import errors
from ..perf.protocol import PerfProtocol
from lnbench.measure import stats, cache
def f():
    from lnbench.output.tables import plain_number
    import lnbench
"""
    found = imports_in(source, "lnbench.measure.load")
    assert [t for t, _ in found] == ["lnbench.measure.timing", "lnbench.measure.kernel_stats", "lnbench.errors",
                                     "lnbench.perf.protocol", "lnbench.measure.cache", "lnbench.measure.stats",
                                     "lnbench.output.tables", "lnbench"]
    assert [t for t, _ in imports_in("from . import timing", "lnbench.measure", is_package=True)] == \
        ["lnbench.measure.timing"]


def _cycle() -> list[str] | None:
    """One import circle among lnbench's modules (its modules in order, first repeated at the end), or None. Imports
    under `if TYPE_CHECKING:` count: a circle the type checker reads is a circle (issue 56)."""
    return find_cycle({m: {t for t, _line in GRAPH[m] if (m, t) not in EXEMPT} for m in GRAPH})


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One circle of the directed graph `edges` (its nodes in order, the first repeated at the end), or None: a
    depth-first search in sorted order."""
    state: dict[str, int] = {}            # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_circle():
    cycle = _cycle()
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def test_a_circle_through_type_checking_imports_is_a_circle(monkeypatch):
    """The launch profile's type imported back from the scheduler, as it once was, only for the type checker."""
    source = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lnbench.emu.machine import LaunchProfile\n"
    edges = imports_in(source, "lnbench.emu.profile")
    assert edges == [("lnbench.emu.machine", 3)]
    monkeypatch.setitem(GRAPH, "lnbench.emu.profile", [*GRAPH["lnbench.emu.profile"], *edges])
    assert {"lnbench.emu.machine", "lnbench.emu.profile"} <= set(_cycle() or [])


def folder_of(module: str) -> str:
    """The folder (package below lnbench) a module stands in, or the module itself when it is loose."""
    parts = module.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or (len(parts) == 2 and module in PACKAGES) else module


PACKAGES = {m for m, path in MODULES.items() if path.name == "__init__.py"}


def _folder_cycle(graph: dict[str, list[tuple[str, int]]]) -> list[str] | None:
    """One circle among lnbench's folders (a folder importing, through its modules, a folder that imports it back),
    or None."""
    edges: dict[str, set[str]] = {}
    for module, targets in graph.items():
        for target, _line in targets:
            if (module, target) not in EXEMPT and folder_of(module) != folder_of(target):
                edges.setdefault(folder_of(module), set()).add(folder_of(target))
    return find_cycle(edges)


def test_no_import_circle_between_folders():
    cycle = _folder_cycle(GRAPH)
    assert cycle is None, "folder circle: " + " -> ".join(cycle or [])


def test_the_folder_circle_check_sees_one(monkeypatch):
    """output (layer 0) importing the run machinery back, as output.claims once did (run.eta imports output)."""
    monkeypatch.setitem(GRAPH, "lnbench.output.claims", [*GRAPH["lnbench.output.claims"], ("lnbench.run.processes", 1)])
    assert set(_folder_cycle(GRAPH) or []) == {"lnbench.output", "lnbench.run"}


def test_each_folder_stands_in_one_layer():
    """LAYERS names folders and loose modules only, so every module of a folder has the folder's layer."""
    assert [key for key in LAYERS if key.count(".") > 1] == []
    assert [key for key in LAYERS if key != "lnbench" and key not in MODULES] == []
    by_folder: dict[str, set[int | None]] = {}
    for module in MODULES:
        by_folder.setdefault(folder_of(module), set()).add(layer_of(module))
    assert {folder: layers for folder, layers in by_folder.items() if len(layers) != 1} == {}


def test_every_module_has_a_layer():
    assert [m for m in MODULES if layer_of(m) is None] == []
    assert layer_of("lnbench.undeclared_module") is None        # the package's own layer covers only its __init__


def test_no_module_imports_a_higher_layer():
    upward = [f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)}) at line {line}"
              for m in GRAPH for t, line in GRAPH[m]
              if (m, t) not in EXEMPT and layer_of(t) > layer_of(m)]
    assert not upward, "\n".join(upward)


def _cross_command() -> list[str]:
    out = []
    for module in GRAPH:
        for target, line in GRAPH[module]:
            mine, theirs = command_of(module), command_of(target)
            if mine and theirs and mine != theirs and (mine, target) not in SHARED:
                out.append(f"{module} imports {target} (another command's module) at line {line}")
    return out


def test_no_command_imports_another_commands_modules():
    crossing = _cross_command()
    assert not crossing, "\n".join(crossing)


@pytest.mark.parametrize("edge", sorted(EXEMPT) + sorted(SHARED))
def test_each_exemption_is_still_needed(edge):
    importer, target = edge
    users = [m for m in GRAPH if m == importer or m.startswith(importer + ".")]
    assert any(target in {t for t, _ in GRAPH[m]} for m in users), f"{importer} no longer imports {target}: drop it"


def test_the_checks_catch_an_upward_import_a_circle_and_a_cross_command_import(monkeypatch):
    """The rules fail where they should: a measurement module importing a command, a two-module circle, and
    abi importing perf's worker entry."""
    monkeypatch.setitem(GRAPH, "lnbench.measure.stats", [*GRAPH["lnbench.measure.stats"], ("lnbench.perf.command", 1)])
    with pytest.raises(AssertionError, match="lnbench.measure.stats .layer 6. imports lnbench.perf.command"):
        test_no_module_imports_a_higher_layer()
    monkeypatch.setitem(GRAPH, "lnbench.errors", [("lnbench.output.files", 1)])      # outputs imports errors
    assert set(_cycle() or []) == {"lnbench.errors", "lnbench.output.files"}
    monkeypatch.setitem(GRAPH, "lnbench.abi.command", [*GRAPH["lnbench.abi.command"], ("lnbench.perf.worker_main", 1)])
    assert _cross_command() == ["lnbench.abi.command imports lnbench.perf.worker_main (another command's module) "
                                "at line 1"]

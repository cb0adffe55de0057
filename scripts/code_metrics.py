"""The structure figures of an issue's closing note, for any checkout (--root DIR, default this one).

    python scripts/code_metrics.py [--root DIR] [--no-timing]          # issue 56 (the default)
    python scripts/code_metrics.py --issue 39 [--root DIR] [--no-trace]

Issue 56 (the house renovated): the duplicate pairs `duplicates` finds in lnbench/ and tests/ (its first line);
whether results/records.py's Record has the mapping protocol (a Mapping/MutableMapping base, __getitem__) and how
UNSET is annotated; the `row["…"]` reads (the text, as the issue counted them) and the column declarations
written out in more than one results/ class; functions taking `**options: Any` that pass them to a record
class; import circles (strongly connected groups, TYPE_CHECKING imports included) and imports that point up
the layers of the tree's own lnbench/layers.py; the worker pools opened and worker processes started (call
sites; _processes says what counts); fast_help.py; gc.disable/gc.freeze/os._exit calls; and the median wall
time of `lnbench --help` and `lnbench verify --help` over 5 runs each (ROOT on PYTHONPATH, this Python: compare
trees on one machine at one load). Every figure but the pairs and the times is read off the source with `ast`;
nothing of ROOT is imported.

Issue 39: top-level modules, `dict[str, Any]` annotations, `row["…"]` reads, `--config` declarations, the five
longest functions, and the lnbench modules one small `lnbench perf` run (CPU, torch backend) passes through in
its parent process.

"Passes through" is measured, not read off the code: a profile hook records every call from a module-level
function of one lnbench module to a module-level function of another while the perf command runs (methods,
properties, lambdas and import-time code left out: they read data, they are not stages). It prints the modules
whose functions the run calls, the distinct cross-module calls, and for each module of lnbench.perf the modules
that call into it: a perf run that reads top-down enters each stage's module from the command alone.
"""
from __future__ import annotations

import argparse
import ast
import collections
import importlib.util
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


def static_counts(root: Path) -> dict[str, object]:
    """Counts read off the source tree under root/lnbench."""
    package = root / "lnbench"
    files = sorted(package.rglob("*.py"))
    text = {p: p.read_text(encoding="utf-8") for p in files}
    top = [p.name for p in package.glob("*.py") if p.name not in ("__init__.py", "cli.py")]
    functions: list[tuple[int, str]] = []
    for path, source in text.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                functions.append((lines, f"{path.relative_to(root)}:{node.lineno} {node.name}"))
    functions.sort(reverse=True)
    return {
        "top-level modules (besides __init__, cli)": len(top),
        "dict[str, Any]": sum(s.count("dict[str, Any]") for s in text.values()),
        'row["…"] reads': sum(len(re.findall(r'\brow\["', s)) for s in text.values()),
        "--config declared": sum(len(re.findall(r'option\(\s*"--config"', s)) for s in text.values()),
        "longest five functions (lines)": [f"{n} {where}" for n, where in functions[:5]],
    }


_TRACER = r'''
import collections, sys, threading
from click.testing import CliRunner
edges = collections.Counter()
def hook(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    if "." in code.co_qualname or code.co_name.startswith("<"):
        return                          # methods, properties, lambdas, comprehensions, import-time code
    callee = frame.f_globals.get("__name__", "")
    caller_frame = frame.f_back
    caller = caller_frame.f_globals.get("__name__", "") if caller_frame else ""
    if callee.startswith("lnbench") and caller.startswith("lnbench") and callee != caller:
        edges[(caller, caller_frame.f_code.co_name, callee, code.co_name)] += 1
from lnbench.cli import main
import lnbench.perf.command  # the command's imports happen before the hook
args = sys.argv[1:]
sys.setprofile(hook); threading.setprofile(hook)
result = CliRunner().invoke(main, args, catch_exceptions=False)
sys.setprofile(None); threading.setprofile(None)
for (a, af, b, bf), n in sorted(edges.items()):
    print(f"EDGE {a} {af} {b} {bf} {n}")
print("EXIT", result.exit_code)
'''


def perf_trace(root: Path) -> dict[str, object]:
    """Run one tiny perf in a subprocess under the profile hook; summarise its cross-module calls."""
    with tempfile.TemporaryDirectory() as out:
        args = ["perf", "--device", "cpu", "--backend", "torch", "--op", "fwd", "--mode", "hot", "--dtype", "f32",
                "--shapes", "8x64", "-P", "1", "-R", "3", "--warmup-s", "0", "--min-warmup-calls", "1",
                "--target-run-s", "0.001", "--min-iters", "1", "--max-iters", "2", "--quiet",
                "--csv", str(Path(out) / "perf.csv")]
        env = {**os.environ, "PYTHONPATH": str(root), "LNBENCH_RESULTS_DIR": out}
        done = subprocess.run([sys.executable, "-c", _TRACER, *args], cwd=root, env=env, capture_output=True,
                              text=True, timeout=600)
    if "EXIT" not in done.stdout:
        raise SystemExit(f"perf trace failed:\n{done.stderr[-2000:]}")
    edges = [line.split()[1:5] for line in done.stdout.splitlines() if line.startswith("EDGE ")]
    exit_code = done.stdout.rsplit("EXIT", 1)[1].strip()
    modules = {m for a, _, b, _ in edges for m in (a, b)}
    callers: dict[str, set[str]] = collections.defaultdict(set)
    for a, _, b, _ in edges:
        callers[b].add(a)
    perf = sorted((m for m in callers if m.startswith("lnbench.perf.")), key=lambda m: (-len(callers[m]), m))
    return {"perf: exit code": exit_code, "perf: lnbench modules whose functions it calls": len(modules),
            "perf: cross-module calls (distinct caller -> callee functions)": len(edges),
            "perf: each lnbench.perf module, the modules that call into it": [
                f"{m.removeprefix('lnbench.perf.')} <- {', '.join(sorted(c.removeprefix('lnbench.') for c in callers[m]))}"
                for m in perf]}



# ---------------------------------------------------------------- issue 56: the house renovated
# Every figure is read off ROOT's files (ast, nothing of ROOT imported), but for the duplicate pairs (the
# `duplicates` command on PATH, run in ROOT/lnbench and ROOT/tests) and the --help wall times (ROOT's `lnbench`
# entry point run with ROOT first on PYTHONPATH).

#: the project's own pool class (lnbench.measure.pool.Pool) and the standard library's process pools
POOL_NAMES = {"Pool", "ProcessPoolExecutor"}


def _modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every module under ROOT/lnbench."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _import_graph(modules: dict[str, Path]) -> dict[str, list[tuple[str, int]]]:
    """module -> (imported lnbench module, line) for every import statement wherever it stands (module level,
    functions, `if TYPE_CHECKING:`), relative ones resolved; tests/test_layering.py's reading of an import."""
    def owner(name: str) -> str:
        while name not in modules and "." in name:
            name = name.rpartition(".")[0]
        return name

    graph: dict[str, list[tuple[str, int]]] = {}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {(owner(a.name), node.lineno) for a in node.names if a.name.split(".")[0] == "lnbench"}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    parts = package.split(".")
                    base = parts[: len(parts) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                if source.split(".")[0] != "lnbench":
                    continue
                for alias in node.names:
                    name = f"{source}.{alias.name}"
                    found.add((name if name in modules else owner(source), node.lineno))
        graph[module] = sorted((t, line) for t, line in found if t != module)
    return graph


def _circles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """The import circles: each strongly connected group of two or more modules (Tarjan), sorted."""
    adjacency = {m: sorted({t for t, _ in edges if t in graph}) for m, edges in graph.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for nxt in adjacency[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(adjacency) + 100))
    for module in sorted(adjacency):
        if module not in index:
            visit(module)
    return sorted(groups)


def _layers(package: Path) -> Any:
    """ROOT's lnbench/layers.py, loaded from its file alone (it imports nothing of lnbench); None without one."""
    path = package / "layers.py"
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location("_measured_layers", path)
    assert spec is not None and spec.loader is not None
    layers = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(layers)
    return layers


def _folder(module: str) -> str:
    """The top-level folder or module of lnbench a module stands in: lnbench.run.device -> lnbench.run."""
    return ".".join(module.split(".")[:2])


def _spans(modules: dict[str, Path], layers: Any) -> list[str]:
    """Folders whose modules stand in more than one layer of the layer table."""
    held: dict[str, set[int]] = collections.defaultdict(set)
    for module in modules:
        if (layer := layers.layer_of(module)) is not None:
            held[_folder(module)].add(layer)
    return [f"{f.removeprefix('lnbench.')}/ holds layers {', '.join(map(str, sorted(ls)))}"
            for f, ls in sorted(held.items()) if len(ls) > 1]


def _folder_arrows(graph: dict[str, list[tuple[str, int]]], layers: Any) -> list[str]:
    """Imports from one folder up to a folder of a higher layer, a folder taken at the layer the table gives it
    (`lnbench.run`, not its modules' own entries such as `lnbench.run.device`): "folders are layers". Distinct
    (folder -> folder) pairs, the first import named; an EXEMPT import is an arrow too (marked)."""
    def level(module: str) -> int | None:
        return layers.LAYERS.get(_folder(module), layers.LAYERS.get(module))

    first: dict[tuple[str, str], str] = {}
    for module, edges in sorted(graph.items()):
        for target, line in edges:
            a, b = level(module), level(target)
            if a is not None and b is not None and b > a and _folder(module) != _folder(target):
                pair = (_folder(module), _folder(target))
                mark = " (EXEMPT)" if (module, target) in getattr(layers, "EXEMPT", {}) else ""
                first.setdefault(pair, f"{pair[0]} ({a}) -> {pair[1]} ({b}): {module} line {line}{mark}")
    return [first[pair] for pair in sorted(first)]


def _call_name(node: ast.Call) -> str:
    """`a.b.c(...)` -> "a.b.c", `f(...)` -> "f" ("" for any other callee)."""
    parts = []
    func: ast.expr = node.func
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    if isinstance(func, ast.Name):
        parts.append(func.id)
        return ".".join(reversed(parts))
    return ".".join(reversed(parts)) if parts else ""


def _mentions(node: ast.AST, dotted: str) -> bool:
    """Does `node` hold the expression `dotted` (e.g. sys.executable)?"""
    return any(isinstance(n, (ast.Attribute, ast.Name)) and ast.unparse(n) == dotted for n in ast.walk(node))


def _record_class(records: Path) -> dict[str, object]:
    """Record's mapping protocol and UNSET's annotation in results/records.py."""
    out: dict[str, object] = {"Record has the mapping protocol": "no Record class",
                              "UNSET annotated": "no UNSET"}
    if not records.exists():
        return out
    tree = ast.parse(records.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == "Record":
            bases = [ast.unparse(b).rpartition(".")[2] for b in node.bases]
            mapping = [b for b in bases if b in ("Mapping", "MutableMapping")]
            dunders = [f.name for f in node.body if isinstance(f, ast.FunctionDef)
                       and f.name in ("__getitem__", "__setitem__", "__delitem__", "__iter__", "__len__")]
            why = ", ".join([f"base {b}" for b in mapping] + [f"defines {d}" for d in dunders
                                                                 if d == "__getitem__"])
            out["Record has the mapping protocol"] = f"yes ({why}, line {node.lineno})" if why else "no"
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == "UNSET":
            out["UNSET annotated"] = f"{ast.unparse(node.annotation)} (line {node.lineno})"
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "UNSET" for t in node.targets):
            out["UNSET annotated"] = f"not annotated (line {node.lineno})"
    return out


def _repeated_columns(files: list[Path]) -> str:
    """Field declarations (`name: type = ...` in a class body) of `files` written out in more than one class: how
    many distinct declarations, and how often they stand in all."""
    seen: dict[str, set[str]] = collections.defaultdict(set)
    for path in files:
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef):
                for field in node.body:
                    if isinstance(field, ast.AnnAssign):
                        text = " ".join((ast.get_source_segment(source, field) or "").split())
                        seen[text].add(f"{path.name}:{node.name}")
    repeated = {text: where for text, where in seen.items() if len(where) > 1}
    return f"{len(repeated)} declarations stand {sum(len(w) for w in repeated.values())} times"


def _options_constructors(files: dict[Path, str], root: Path) -> list[str]:
    """Calls of an options record (a class named *Options) with `**name` inside a function taking `**name: Any`
    (a click command's callback): the click options reach the record unchecked by mypy."""
    out = []
    for path, source in files.items():
        for node in ast.walk(ast.parse(source)):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.args.kwarg is None:
                continue
            kw = node.args.kwarg
            if kw.annotation is None or ast.unparse(kw.annotation) not in ("Any", "typing.Any"):
                continue
            for call in ast.walk(node):
                if isinstance(call, ast.Call) and _call_name(call).endswith("Options") and any(
                        k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kw.arg
                        for k in call.keywords):
                    out.append(f"{path.relative_to(root)}:{call.lineno} {_call_name(call)}(**{kw.arg}) "
                               f"in {node.name}")
    return _by_place(out)


def _by_place(places: list[str]) -> list[str]:
    """`path:line ...` entries in file order, then line order."""
    def key(place: str) -> tuple[str, int]:
        path, _, rest = place.partition(":")
        digits = re.match(r"\d*", rest)
        return path, int(digits.group() or 0) if digits else 0
    return sorted(places, key=key)


def _imported_names(tree: ast.AST, module: str) -> dict[str, str]:
    """Name bound by an import anywhere in a module -> the dotted thing it names (`from a.b import C` -> a.b.C,
    `import a.b as x` -> a.b; relative imports resolved against `module`, a module's dotted name)."""
    out = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update({(a.asname or a.name.split(".")[0]): (a.name if a.asname else a.name.split(".")[0])
                        for a in node.names})
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: -node.level]
                base = ".".join(parts + ([node.module] if node.module else []))
            out.update({(a.asname or a.name): f"{base}.{a.name}" for a in node.names})
    return out


def _processes(files: dict[Path, str], root: Path) -> dict[str, list[str]]:
    """Where lnbench opens a worker pool or starts a worker process (call sites):
    pools: a call of Pool (the project's, multiprocessing's or a context's) or ProcessPoolExecutor, each with the
    class it calls (resolved through the module's imports: how many kinds of pool there are);
    starts: os.fork() and a call of the project's own `fork` helper (a pre-fork), multiprocessing's Process(...),
    and subprocess.Popen(...) whose arguments run this Python (sys.executable) -- a worker; Popen of any other
    program is not counted."""
    out: dict[str, list[str]] = {"pools": [], "kinds": [], "starts": []}
    for path, source in files.items():
        tree = ast.parse(source)
        module = ".".join(path.relative_to(root).with_suffix("").parts)
        names = _imported_names(tree, module)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _call_name(node)
            head, _, rest = name.partition(".")
            resolved = names.get(head, f"{module}.{head}") + (f".{rest}" if rest else "")
            last = name.rpartition(".")[2]
            where = f"{path.relative_to(root)}:{node.lineno} {name}"
            if last in POOL_NAMES:
                out["pools"].append(f"{where} ({resolved})")
                out["kinds"].append(resolved)
            elif name == "os.fork" or (last == "fork" and resolved.startswith("lnbench.")) \
                    or (last == "Process" and ("multiprocessing" in source or "get_context" in name)) \
                    or (last == "Popen" and _mentions(node, "sys.executable")):
                out["starts"].append(where)
    return {"pools": _by_place(out["pools"]), "kinds": sorted(set(out["kinds"])), "starts": _by_place(out["starts"])}


def _tricks(files: dict[Path, str], root: Path) -> dict[str, list[str]]:
    """Calls of gc.disable, gc.freeze and os._exit in lnbench/."""
    out: dict[str, list[str]] = {"gc.disable": [], "gc.freeze": [], "os._exit": []}
    for path, source in files.items():
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Call) and _call_name(node) in out:
                out[_call_name(node)].append(f"{path.relative_to(root)}:{node.lineno}")
    return {name: _by_place(places) for name, places in out.items()}


def duplicate_pairs(folder: Path, most: int) -> str:
    """The first line of `duplicates` run in `folder`: its count of pairs ("?" where the command is missing)."""
    if shutil.which("duplicates") is None:
        return "? (no `duplicates` command on PATH)"
    done = subprocess.run(["duplicates", "--most", str(most), "--seconds", "60"], cwd=folder, capture_output=True,
                          text=True, timeout=300)
    first = (done.stdout.splitlines() or ["?"])[0]
    hit = re.match(r"(\d+) pairs? of places", first)
    return hit.group(1) if hit else ("0" if first.startswith("no duplicates") else f"? ({first})")


def help_times(root: Path, runs: int = 5) -> dict[str, str]:
    """Median wall seconds of `lnbench --help` and `lnbench verify --help` over `runs` runs each (after one untimed
    run), through ROOT's entry point (pyproject's [project.scripts] lnbench), ROOT first on PYTHONPATH, this
    Python."""
    entry = "lnbench.cli:main"
    pyproject = root / "pyproject.toml"
    if pyproject.exists():
        hit = re.search(r'^lnbench\s*=\s*"([\w.]+:\w+)"', pyproject.read_text(encoding="utf-8"), re.MULTILINE)
        entry = hit.group(1) if hit else entry
    module, func = entry.split(":")
    # argv[0] as the installed script's (a file named lnbench: lnbench.cli.COMMAND_LINE), the import from ROOT
    script = Path(sys.executable).with_name("lnbench")
    code = f"import sys; sys.argv[0] = {str(script)!r}; from {module} import {func}; sys.exit({func}())"
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = {"load average (1 min) before the --help runs": f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs"}
    for words in (["--help"], ["verify", "--help"]):
        times = []
        subprocess.run([sys.executable, "-c", code, *words], cwd=root, env=env, capture_output=True, timeout=120)
        for _ in range(runs):                # (after one untimed run: the tree's bytecode caches written)
            start = time.perf_counter()
            done = subprocess.run([sys.executable, "-c", code, *words], cwd=root, env=env, capture_output=True,
                                  text=True, timeout=120)
            times.append(time.perf_counter() - start)
            if done.returncode != 0:
                raise SystemExit(f"lnbench {' '.join(words)} exited {done.returncode}:\n{done.stderr[-2000:]}")
        out[f"lnbench {' '.join(words)} (median of {runs}, s)"] = (
            f"{statistics.median(times):.3f} (min {min(times):.3f}, max {max(times):.3f})")
    return out


def issue56(root: Path, timings: bool = True) -> dict[str, object]:
    """Every figure issue 56 names, for the checkout at root."""
    package = root / "lnbench"
    files = {p: p.read_text(encoding="utf-8") for p in sorted(package.rglob("*.py"))}
    figures: dict[str, object] = {
        "duplicate pairs in lnbench/": duplicate_pairs(package, 40),
        "duplicate pairs in tests/": duplicate_pairs(root / "tests", 20),
    }
    figures.update(_record_class(package / "results" / "records.py"))
    figures['row["…"] reads in lnbench/ (the text `row["`)'] = sum(s.count('row["') for s in files.values())
    diagnosis = files.get(package / "verify" / "diagnosis.py", "")
    figures['row["…"] reads in verify/diagnosis.py'] = diagnosis.count('row["')
    rows = package / "results" / "rows.py"
    if rows.exists():
        figures["results/rows.py lines"] = len(files[rows].splitlines())
        figures["column declarations repeated across rows.py's classes"] = _repeated_columns([rows])
    figures["column declarations repeated across results/'s classes"] = _repeated_columns(
        sorted((package / "results").glob("*.py")))
    figures["options constructors fed `**options: Any`"] = _options_constructors(files, root)
    modules = _modules(package)
    graph = _import_graph(modules)
    layers = _layers(package)
    exempt = getattr(layers, "EXEMPT", {})
    circles = _circles({m: [(t, line) for t, line in edges if (m, t) not in exempt] for m, edges in graph.items()})
    figures["import circles (TYPE_CHECKING imports included, EXEMPT left out)"] = [" <-> ".join(g) for g in circles]
    if layers is None:
        figures["arrows back up between folders"] = "? (no lnbench/layers.py)"
    else:
        figures["folders holding several layers (layers.py)"] = _spans(modules, layers)
        figures["arrows back up between folders (distinct folder pairs)"] = _folder_arrows(graph, layers)
        figures["arrows back up, module by module (layers.py, EXEMPT left out: tests/test_layering.py)"] = [
            f"{m} ({layers.layer_of(m)}) -> {t} ({layers.layer_of(t)}) line {line}"
            for m, edges in graph.items() for t, line in edges
            if (m, t) not in exempt and None not in (layers.layer_of(m), layers.layer_of(t))
            and layers.layer_of(t) > layers.layer_of(m)]
    figures["results/ importing the CLI (cli, cli_common)"] = [
        f"{m} -> {t} line {line}" for m, edges in graph.items() if m.startswith("lnbench.results")
        for t, line in edges if t in ("lnbench.cli", "lnbench.cli_common")]
    figures["emu/ importing the run machinery (lnbench.run.*)"] = [
        f"{m} -> {t} line {line}" for m, edges in graph.items() if m.startswith("lnbench.emu")
        for t, line in edges if t.startswith("lnbench.run")]
    processes = _processes(files, root)
    figures["worker pools opened (Pool, ProcessPoolExecutor call sites)"] = processes["pools"]
    figures["kinds of worker pool (the classes those sites call)"] = processes["kinds"]
    figures["worker processes started (os.fork, lnbench's fork helper, Process, Popen of sys.executable)"] = \
        processes["starts"]
    figures["fast_help.py present"] = "yes" if (package / "fast_help.py").exists() else "no"
    for name, where in _tricks(files, root).items():
        figures[f"{name} calls"] = where
    if timings:
        figures.update(help_times(root))
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--issue", type=int, choices=(39, 56), default=56, help="whose figures (default 56)")
    parser.add_argument("--no-trace", action="store_true", help="issue 39: skip the perf run")
    parser.add_argument("--no-timing", action="store_true", help="issue 56: skip the --help wall times")
    args = parser.parse_args()
    root = args.root.resolve()
    if args.issue == 56:
        figures = issue56(root, timings=not args.no_timing)
        print(f"issue 56 figures of {root} ({_revision(root)})")
    else:
        figures = static_counts(root)
        if not args.no_trace:
            figures.update(perf_trace(root))
    for name, value in figures.items():
        if isinstance(value, list):
            print(f"{name}: {len(value)}" if args.issue == 56 else f"{name}:")
            for item in value:
                print(f"    {item}")
        else:
            print(f"{name}: {value}")


def _revision(root: Path) -> str:
    """The checkout's commit (and `+changes` where its tree differs from it), or `not a git checkout`."""
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return "not a git checkout"
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                           capture_output=True, text=True).stdout.strip()
    return head.stdout.strip() + (" +changes" if dirty else "")


if __name__ == "__main__":
    main()

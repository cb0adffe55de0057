"""The structure figures of issue 39's closing note, for any checkout: top-level modules, `dict[str, Any]`
annotations, `row["…"]` reads, `--config` declarations, the five longest functions, and the lnbench modules one
small `lnbench perf` run (CPU, torch backend) passes through in its parent process.

    python scripts/code_metrics.py [--root DIR] [--no-trace]

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
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--no-trace", action="store_true", help="skip the perf run")
    args = parser.parse_args()
    figures = static_counts(args.root)
    if not args.no_trace:
        figures.update(perf_trace(args.root))
    for name, value in figures.items():
        if isinstance(value, list):
            print(f"{name}:")
            for item in value:
                print(f"    {item}")
        else:
            print(f"{name}: {value}")


if __name__ == "__main__":
    main()

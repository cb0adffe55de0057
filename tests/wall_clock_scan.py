"""Find the places in test files where a test reads the machine's clock to judge speed, or sleeps to wait.

A test that compares a wall-clock duration with a constant encodes the speed of the machine it was written on
(a fresh or loaded machine fails it), and a sleep that waits "long enough" for something to happen is the same
bet. This module reads test files as Python syntax trees and reports, per test function:

- `clock`: an `assert` whose expression reads the clock (`time.monotonic()`, `time.time()`,
  `time.perf_counter()`, their `_ns` forms) or a name assigned from an expression that does, or that compares
  a duration a run measured (an attribute or key named in MEASURED: `r.duration_s < 1.0`) with a number;
- `sleep`: a call of `time.sleep` (or a bare `sleep` imported from time).

Code inside strings (a child process's program) is not read. tests/test_no_wall_clock.py keeps the list of the
places allowed, each with its reason.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

CLOCKS = {"monotonic", "time", "perf_counter", "monotonic_ns", "time_ns", "perf_counter_ns"}
#: fields in which lnbench's runs report wall seconds they measured (workers' turns, lock waits)
MEASURED = {"duration_s", "waited_s", "elapsed_s", "stream_s", "kernel_s", "lock_wait_s"}


@dataclass(frozen=True)
class Finding:
    """One place: the file's name, the enclosing test (or helper) function, the kind, the line."""
    file: str
    function: str
    kind: str
    line: int


def _is_clock_call(node: ast.AST) -> bool:
    """time.monotonic() and friends (also `from time import monotonic` called bare)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute) and func.attr in CLOCKS:
        return isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id in CLOCKS - {"time"}


def _is_sleep_call(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    if isinstance(func, ast.Attribute):
        return func.attr == "sleep" and isinstance(func.value, ast.Name) and func.value.id == "time"
    return isinstance(func, ast.Name) and func.id == "sleep"


def _reads_clock(node: ast.AST, clocked: set[str]) -> bool:
    return any(_is_clock_call(n) or (isinstance(n, ast.Name) and n.id in clocked) for n in ast.walk(node))


def _measured_field(node: ast.AST) -> bool:
    """`x.duration_s` or `x["duration_s"]`: a duration the code under test measured."""
    if isinstance(node, ast.Attribute):
        return node.attr in MEASURED
    return (isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant)
            and node.slice.value in MEASURED)


def _compares_measured_with_number(test: ast.AST) -> bool:
    for compare in (n for n in ast.walk(test) if isinstance(n, ast.Compare)):
        sides = [compare.left, *compare.comparators]
        numbers = any(isinstance(s, ast.Constant) and isinstance(s.value, (int, float)) or isinstance(s, ast.BinOp)
                      for s in sides)
        if numbers and any(_measured_field(n) for s in sides for n in ast.walk(s)):
            return True
    return False


def _clocked_names(function: ast.AST) -> set[str]:
    """Names assigned (in this function) from an expression that reads the clock, followed through assignments."""
    clocked: set[str] = set()
    changed = True
    while changed:
        changed = False
        for node in ast.walk(function):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if _reads_clock(node.value, clocked):
                    for target in targets:
                        for name in ast.walk(target):
                            if isinstance(name, ast.Name) and name.id not in clocked:
                                clocked.add(name.id)
                                changed = True
    return clocked


def scan_source(text: str, file: str) -> list[Finding]:
    """The findings of one file's source text."""
    tree = ast.parse(text)
    found: list[Finding] = []
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    for function in functions:
        clocked = _clocked_names(function)
        inner = {id(n) for f in ast.walk(function) if f is not function
                 and isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) for n in ast.walk(f)}
        for node in ast.walk(function):
            if id(node) in inner:
                continue                      # reported under the nested function itself
            if isinstance(node, ast.Assert) and (_reads_clock(node.test, clocked)
                                                 or _compares_measured_with_number(node.test)):
                found.append(Finding(file, function.name, "clock", node.lineno))
            elif _is_sleep_call(node):
                found.append(Finding(file, function.name, "sleep", node.lineno))
    return found


def scan_folder(folder: Path) -> list[Finding]:
    """The findings of every test_*.py and helper module in `folder` (not this scanner)."""
    return [f for path in sorted(folder.glob("*.py")) if path.name != Path(__file__).name
            for f in scan_source(path.read_text(encoding="utf-8"), path.name)]

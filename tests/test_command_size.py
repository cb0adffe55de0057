"""Every CLI command body stays thin: at most 40 lines, docstring excluded (issue #22 item 3).

A command builds a plan, runs it and hands rows to renderers; option checks, config merging and
table code live in their own modules, so a long command body means that work has crept back in.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "lnbench"
COMMAND_MODULES = (
    "perf/command.py",
    "abi/command.py",
    "verify/command.py",
    "compare/command.py",
    "inspect/command.py",
    "merge/command.py",
    "plot/command.py",
    "env/command.py",
    "config/command.py",
    "history/command.py",
)
MAX_BODY_LINES = 40


def _is_command(node: ast.FunctionDef) -> bool:
    if node.name.endswith("_command"):
        return True
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Attribute) and target.attr == "command":
            return True
    return False


def _body_lines(node: ast.FunctionDef) -> int:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    if not body:
        return 0
    return body[-1].end_lineno - body[0].lineno + 1


def command_bodies() -> dict[str, int]:
    """Map "module:function" to the body length of every command function."""
    sizes: dict[str, int] = {}
    for rel in COMMAND_MODULES:
        tree = ast.parse((ROOT / rel).read_text(), filename=rel)
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and _is_command(node):
                sizes[f"{rel}:{node.name}"] = _body_lines(node)
    return sizes


def test_every_module_has_a_command() -> None:
    found = {key.split(":")[0] for key in command_bodies()}
    assert found == set(COMMAND_MODULES)


@pytest.mark.parametrize("name,lines", sorted(command_bodies().items()))
def test_command_body_is_thin(name: str, lines: int) -> None:
    assert lines <= MAX_BODY_LINES, f"{name} body is {lines} lines (limit {MAX_BODY_LINES})"

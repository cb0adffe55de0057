"""`lnbench --help` and every `lnbench CMD --help` without importing torch, pandas or numpy (lnbench.fast_help),
with the same text as the real commands print."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

from lnbench import cli
from lnbench.fast_help import HEAVY, wants_only_help

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100", "LNBENCH_FAST_HELP": "1"}
COMMAND_LINES = [[], *([name] for name in cli.COMMANDS), ["config", "show"]]


def _fast(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lnbench.cli", *args], capture_output=True, text=True, env=ENV,
                          cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def real_help() -> dict[str, str]:
    """Every help text with the real packages, from one fresh process (click caches a command's help option
    from its first context, so a test process that invoked commands on their own shows other option names)."""
    code = ("import json, sys\nfrom click.testing import CliRunner\nfrom lnbench import cli\n"
            f"lines = {COMMAND_LINES!r}\n"
            "print(json.dumps({' '.join(a): CliRunner().invoke(cli.main, [*a, '--help'], terminal_width=78).output "
            "for a in lines}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                         env={**ENV, "LNBENCH_FAST_HELP": "0"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("args", COMMAND_LINES, ids=lambda a: " ".join(a) or "lnbench")
def test_fast_help_prints_the_real_help(args, real_help):
    fast = _fast([*args, "--help"])
    assert fast.returncode == 0 and fast.stderr == "", fast.stderr
    assert fast.stdout.replace("python -m lnbench.cli", "lnbench") == real_help[" ".join(args)].replace(
        "main", "lnbench", 1), fast.stdout


def test_help_imports_no_heavy_package():
    code = ("import sys; sys.argv = ['lnbench', 'perf', '--help']\nimport lnbench.cli\n"
            "from lnbench.cli import COMMANDS\nimport importlib\n"
            "[getattr(importlib.import_module(m), a) for m, a, _ in COMMANDS.values()]\n"
            f"print([n for n in {HEAVY!r} if type(sys.modules.get(n)).__name__ == 'module'])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_a_command_line_that_runs_a_command_runs_it_for_real():
    # `--help` here is the value of --config: the command runs (with the real packages), and fails on that file
    out = _fast(["config", "show", "--config", "--help"])
    assert out.returncode == 2 and "config file not found: --help" in out.stderr, out.stderr


def test_only_help_words_on_the_entry_point_count():
    assert wants_only_help(["/usr/bin/lnbench", "perf", "--help"]) and wants_only_help(["lnbench"])
    assert wants_only_help(["/x/lnbench/cli.py", "--version"]) and not wants_only_help(["/x/other/cli.py", "-h"])
    assert not wants_only_help(["lnbench", "perf", "--shapes", "8x64"])
    assert not wants_only_help(["pytest", "-h"])
    assert not wants_only_help(["/venv/lib/python3.11/site-packages/pytest/__main__.py"])   # bare `python -m pytest`
    assert wants_only_help(["/venv/lib/python3.11/site-packages/lnbench/cli.py", "perf", "-h"])


def test_the_command_table_matches_the_commands():
    for name, (module, attribute, short) in cli.COMMANDS.items():
        command = cli.main.get_command(click.Context(cli.main), name)
        assert command.name == name and command.help.startswith(short), name

"""`lnbench --help` and every `lnbench CMD --help` as the user sees them, and what they import: the subcommands are
loaded lazily (lnbench.cli.COMMANDS), and a command module's top imports no torch, pandas, numpy, FlyDSL, SQLAlchemy,
SciPy or matplotlib (those are imported inside the functions that run the command)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from lnbench import cli

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
COMMAND_LINES = [[], *([name] for name in cli.COMMANDS), ["config", "show"]]
#: what no --help may import (each costs 0.2-5 s here)
HEAVY = ("torch", "pandas", "numpy", "flydsl", "triton", "liger_kernel", "tinygrad", "matplotlib", "scipy",
         "sqlalchemy", "alembic", "msgpack")

#: runs the command line as the `lnbench` script does (cli.COMMAND_LINE: the collector, exit_now), and at its exit
#: (the atexit handlers run before exit_now's os._exit) prints which heavy packages were imported
_HELP_SCRIPT = """
import atexit, json, os, sys
sys.argv = [os.path.join(os.path.dirname(sys.executable), "lnbench"), *sys.argv[1:]]
atexit.register(lambda: print(json.dumps(sorted(n for n in {heavy!r} if n in sys.modules)), file=sys.stderr))
from lnbench.cli import main
main()
"""


def _lnbench(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _HELP_SCRIPT.format(heavy=HEAVY), *args], capture_output=True,
                          text=True, env=ENV, cwd=ROOT, timeout=120)


@pytest.fixture(scope="module")
def in_process_help() -> dict[str, str]:
    """Every help text from click's test runner at the width click gives a terminal of $COLUMNS=100 (78), in one
    fresh process (click caches a command's help option from its first context, so a test process that invoked
    commands on their own shows other option names)."""
    code = ("import json, sys\nfrom click.testing import CliRunner\nfrom lnbench import cli\n"
            f"lines = {COMMAND_LINES!r}\n"
            "print(json.dumps({' '.join(a): CliRunner().invoke(cli.main, [*a, '--help'], terminal_width=78).output "
            "for a in lines}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300, env=ENV)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("args", COMMAND_LINES, ids=lambda a: " ".join(a) or "lnbench")
def test_every_help_prints_its_text_exits_0_and_imports_no_heavy_package(args, in_process_help):
    done = _lnbench([*args, "--help"])
    *noise, imported = done.stderr.splitlines() or [""]
    assert done.returncode == 0 and noise == [], done.stderr
    assert json.loads(imported) == [], f"`lnbench {' '.join(args)} --help` imported {imported}"
    assert done.stdout.startswith(f"Usage: lnbench {' '.join(args)}".rstrip() + " ["), done.stdout
    assert done.stdout == in_process_help[" ".join(args)].replace("Usage: main", "Usage: lnbench", 1), done.stdout
    if len(args) == 1:
        short = cli.COMMANDS[args[0]][2]
        assert " ".join(short.split()) in " ".join(done.stdout.split()), short


def test_the_command_list_names_every_command_with_its_short_help():
    out = CliRunner().invoke(cli.main, ["--help"], terminal_width=200).output
    commands = out.split("Commands:", 1)[1].splitlines()
    listed = {line.split()[0]: " ".join(line.split()[1:]) for line in commands if line.strip()}
    assert listed == {name: short for name, (_, _, short) in cli.COMMANDS.items()}


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_an_unknown_option_is_one_line_and_exit_2(name):
    done = _lnbench([name, "--bogus"])
    *lines, _ = done.stderr.splitlines()         # (the last: the imports, which verify's pre-fork makes here)
    assert done.returncode == 2 and done.stdout == "", done.stdout
    assert len(lines) == 1 and lines[0].startswith("lnbench: error: No such option '--bogus'."), done.stderr
    assert lines[0].endswith(f"(see `lnbench {name} --help`)"), done.stderr


def test_a_command_line_that_runs_a_command_runs_it():
    # `--help` here is the value of --config: the command runs, and fails on that file
    done = _lnbench(["config", "show", "--config", "--help"])
    assert done.returncode == 2 and "config file not found: --help" in done.stderr, done.stderr


def test_the_command_table_matches_the_commands():
    for name, (module, attribute, short) in cli.COMMANDS.items():
        command = cli.main.get_command(click.Context(cli.main), name)
        assert command is not None and command.name == name and (command.help or "").startswith(short), name

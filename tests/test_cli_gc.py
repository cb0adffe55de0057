"""The command line keeps Python's garbage collector off while it imports, and turns it back on (with the imports'
objects frozen out of its passes) once the command's module is in (lnbench.cli)."""
from __future__ import annotations

import subprocess
import sys

_SCRIPT = """
import gc, os, sys
sys.argv = [os.path.join(os.path.dirname(sys.executable), "lnbench"), "config", "show"]
before = gc.isenabled()
import click
import lnbench.cli as cli
during = gc.isenabled()
cli.main.get_command(click.Context(cli.main), "config")
print(before, during, gc.isenabled(), gc.get_freeze_count() > 0)
"""


def test_the_command_line_imports_with_the_collector_off_and_runs_the_command_with_it_on():
    done = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "True", "True"]


def test_a_library_import_leaves_the_collector_alone():
    script = "import gc, lnbench.cli; print(gc.isenabled(), gc.get_freeze_count())"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "0"]


def test_a_process_that_only_names_its_argv_lnbench_is_not_the_command_line(tmp_path):
    """A test that sets sys.argv to `lnbench ...` before its first import of lnbench.cli (tests/test_results_model.py
    alone) is not the installed script, whose argv[0] is its file's path: its commands return to it instead of
    ending its process (with os._exit, the test run ended silently, status 0)."""
    script = "import sys; sys.argv = ['lnbench', 'config', 'show']; import lnbench.cli as cli; print(cli.COMMAND_LINE)"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False"]

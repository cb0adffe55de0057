"""The command line ends its process without the interpreter's teardown of torch and MLIR (lnbench.cli.exit_now):
the atexit handlers still run, the output is complete, the exit status is the command's."""
from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from lnbench import cli

_SCRIPT = """
import atexit, os, sys
sys.argv = [os.path.join(os.path.dirname(sys.executable), "lnbench"), *sys.argv[1:]]
atexit.register(lambda: print("atexit ran"))
from lnbench.cli import main
main()
"""


def _lnbench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _SCRIPT, *args], capture_output=True, text=True, timeout=120)


def test_a_command_exits_with_its_output_and_the_atexit_handlers_run():
    done = _lnbench("config", "show")
    assert done.returncode == 0, done.stderr
    assert "[verify]" in done.stdout
    assert done.stdout.rstrip().endswith("atexit ran")


def test_a_usage_error_keeps_its_status_and_line():
    done = _lnbench("verify", "--dtype", "bogus")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == ["lnbench: error: unknown dtype 'bogus'; choose from f32, f16, bf16"]
    assert done.stdout.strip() == "atexit ran"


def test_a_message_exits_with_status_one_on_stderr(monkeypatch):
    script = "import sys; sys.argv = ['lnbench']; from lnbench.cli import exit_now; print('out'); exit_now('gone')"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout, done.stderr) == (1, "out\n", "gone\n")


def test_another_running_thread_gets_the_interpreters_exit(monkeypatch):
    """A non-daemon thread still running: sys.exit, so the interpreter waits for it as it would."""
    worker = threading.Thread(target=lambda: None)
    monkeypatch.setattr(threading, "enumerate", lambda: [threading.main_thread(), worker])
    monkeypatch.setattr(worker, "is_alive", lambda: True)
    with pytest.raises(SystemExit) as exited:
        cli.exit_now(3)
    assert exited.value.code == 3

"""The environment a user brings: an ASCII-only terminal, empty or odd LNBENCH_* values, an unusable cache."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from lnbench.run.device import emulator_status


def _lnbench(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lnbench.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1", **env}, timeout=300)


VERIFY = ["verify", "--device", "cpu", "--backend", "torch", "--dtype", "f32", "--shapes", "2x5"]


def test_an_ascii_terminal_gets_the_table_and_the_results(tmp_path):
    """γ in the table header used to end a finished run in an encoding error, with no result written."""
    out = _lnbench(VERIFY, tmp_path, PYTHONIOENCODING="ascii", LNBENCH_RESULTS_DIR=str(tmp_path / "r"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "28 rows: 28 PASS" in out.stdout and "Error" not in out.stderr
    assert len(list((tmp_path / "r").glob("verify-*.csv"))) == 1


def test_an_empty_results_dir_variable_counts_as_unset(tmp_path):
    out = _lnbench([*VERIFY, "-q"], tmp_path, LNBENCH_RESULTS_DIR="")
    assert out.returncode == 0, out.stdout + out.stderr
    assert len(list((tmp_path / "results").glob("verify-*.csv"))) == 1
    assert not list(tmp_path.glob("verify-*.csv"))              # not into the current folder itself


def test_lnbench_debug_zero_means_off(tmp_path):
    out = _lnbench(["verify", "--device", "cpu", "--shapes", "0x5"], tmp_path, LNBENCH_DEBUG="0")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    out = _lnbench(["verify", "--device", "cpu", "--shapes", "0x5"], tmp_path, LNBENCH_DEBUG="1")
    assert out.returncode == 2 and "Traceback" in out.stderr


@pytest.mark.skipif(not emulator_status()[0], reason=f"needs the emulator: {emulator_status()[1]}")
def test_an_unusable_emulator_folder_is_one_line(tmp_path):
    blocker = tmp_path / "afile"
    blocker.write_text("")
    out = _lnbench(["verify", "--device", "emu", "--backend", "flydsl", "--dtype", "f32", "--shapes", "1x3"],
                   tmp_path, LNBENCH_EMU_DIR=str(blocker / "emu"), LNBENCH_RESULTS_DIR=str(tmp_path / "r"))
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1, out.stdout + out.stderr
    assert "cannot set up the emulator's folder" in lines[0] and "internal error" not in lines[0]


def test_env_names_lnbench_python_and_the_emulators_packages(tmp_path):
    import platform

    import lnbench
    from lnbench.env.facts import software_facts
    facts = software_facts()
    assert facts["lnbench"] == lnbench.__version__ and facts["python"] == platform.python_version()
    assert "numpy" in facts and "msgpack" in facts

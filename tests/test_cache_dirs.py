"""A home that cannot be written (read-only $HOME in a CI sandbox) still compiles and emulates: lnbench's
per-machine builds and FlyDSL's kernel cache move to a per-user temporary folder; named folders are kept."""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from lnbench.machine import cache_dirs
from lnbench.flydsl import toolkit
from lnbench.results import load_result


@pytest.fixture
def unwritable_home(tmp_path, monkeypatch) -> Path:
    """$HOME below a plain file: nothing can be made there, for root too (unlike permission bits)."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HOME", str(blocker / "home"))
    for var in ("XDG_CACHE_HOME", "LNBENCH_TOOLKIT_DIR", "LNBENCH_EMU_DIR", toolkit.FLYDSL_CACHE_VAR):
        monkeypatch.delenv(var, raising=False)
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    return temp


def test_unwritable_home_moves_the_caches_to_the_temporary_folder(unwritable_home):
    from lnbench.emu import hip

    assert cache_dirs.lnbench_cache_dir().parent == unwritable_home
    assert hip.emu_dir().is_relative_to(unwritable_home)
    assert toolkit.cache_toolkit_dir().is_relative_to(unwritable_home)
    env = toolkit.compile_env("gfx942", compile_only=True)
    assert Path(env[toolkit.FLYDSL_CACHE_VAR]).is_relative_to(unwritable_home)


def test_writable_home_keeps_the_usual_folders(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("XDG_CACHE_HOME", "LNBENCH_TOOLKIT_DIR", toolkit.FLYDSL_CACHE_VAR):
        monkeypatch.delenv(var, raising=False)
    assert toolkit.cache_toolkit_dir() == tmp_path / "home" / ".cache" / "lnbench" / "toolkit"
    assert toolkit.FLYDSL_CACHE_VAR not in toolkit.compile_env("gfx942", compile_only=True)


def test_a_named_cache_folder_is_kept_even_when_it_cannot_be_made(unwritable_home, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "a-file" / "xdg"))
    assert cache_dirs.lnbench_cache_dir() == tmp_path / "a-file" / "xdg" / "lnbench"


@pytest.fixture
def built_emu_dir() -> Path:
    """The emulator's HIP stand-in as this machine has it built (before $HOME is changed)."""
    from lnbench.run.device import emulator_status
    from lnbench.emu import hip

    available, why = emulator_status()
    if not available:
        pytest.skip(f"the emulated device is not available here: {why}")
    return hip.library_path().parent.parent


@pytest.mark.rocm
def test_verify_executes_with_an_unwritable_home(built_emu_dir, unwritable_home, tmp_path):
    """End to end in a fresh process: the toolkit and FlyDSL's kernel cache set up under an unwritable home.
    (The emulator's HIP stand-in, already built here, is reused: building it again costs a minute.)"""
    pytest.importorskip("flydsl")
    env = {**os.environ, "TMPDIR": str(unwritable_home), "LNBENCH_RESULTS_DIR": str(tmp_path / "results"),
           "LNBENCH_EMU_DIR": str(built_emu_dir)}
    out = subprocess.run([sys.executable, "-m", "lnbench.cli", "verify", "--device", "emu", "--backend", "flydsl",
                          "--shapes", "3x8", "--dtype", "f32", "-q"],
                         env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    (written,) = (tmp_path / "results").glob("verify-*.csv")            # the default CSV, in LNBENCH_RESULTS_DIR
    statuses = load_result(written).rows["status"]
    assert len(statuses) and set(statuses) == {"PASS"}, out.stdout
    assert (unwritable_home / f"lnbench-cache-{os.getuid()}" / "toolkit").is_dir()


def test_a_cache_file_is_written_whole_and_an_unwritable_one_leaves_nothing(tmp_path):
    from lnbench.machine.cache_dirs import write_cache_file

    target = tmp_path / "a" / "b.bin"
    write_cache_file(target, b"first")
    write_cache_file(target, b"second")
    assert target.read_bytes() == b"second" and sorted(p.name for p in target.parent.iterdir()) == ["b.bin"]
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    write_cache_file(blocker / "c.bin", b"x")                 # its folder cannot be made: no error, nothing left
    assert blocker.read_text() == "not a folder" and sorted(p.name for p in tmp_path.iterdir()) == ["a", "file"]

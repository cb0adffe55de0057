"""Results reach disk (issue 33, item 3): a run whose output folder cannot take a write stops before the work,
and results that cannot be written where asked (a full disk at the end, or at a checkpoint of a longer run) are
kept in a folder the error line names, never only on the screen. On a real full file system (a small tmpfs,
mounted where the test runs as root) and, so CI always checks the logic, with ENOSPC injected at the write call.
Each test fails on the code before (the work ran, then `No space left on device` with no rows saved), but the
two marked as guards."""
from __future__ import annotations

import errno
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest
from lnbench.errors import LnbenchUsageError
from lnbench.output.claims import sidecar_of
from lnbench.output.files import ResultsNotWritten, check_writable, release_outputs
from lnbench.scaffold.sink import ResultSink
from cli_helpers import invoke

VERIFY = ["verify", "--device", "cpu", "--backend", "torch", "--dtype", "f32", "--shapes", "2x8", "-q"]
ROWS = 28                                    # VERIFY's rows
KEPT = re.compile(r"; the results are kept in (\S+)/ \(([^)]*)\)")
ENOSPC = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))      # $TMPDIR: where failed results are kept
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


def _mount_reason() -> str | None:
    if not sys.platform.startswith("linux"):
        return "tmpfs needs Linux"
    if os.geteuid() != 0:
        return "mounting a tmpfs needs root"
    return None


@pytest.fixture
def small_fs(tmp_path):
    """A real 64 KiB tmpfs at tmp_path/fs (skipped, with the reason, only where it cannot be mounted)."""
    why = _mount_reason()
    if why:
        pytest.skip(why)
    folder = tmp_path / "fs"
    folder.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)], capture_output=True,
                          text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def _fill(folder: Path, leave: int = 0) -> None:
    """Fill the file system of `folder` until at most `leave` bytes (about) can still be written."""
    with open(folder / "filler", "ab") as f:
        block = b"\1" * 1024
        try:
            while True:
                free = os.statvfs(folder).f_bavail * os.statvfs(folder).f_frsize
                if free <= leave:
                    break
                f.write(block)
                f.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC


def _lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.strip()]


def _full(target: Path, line: str, start: str = "lnbench: error: ") -> bool:
    """Is `line` the failure to write `target` for want of space: the write itself, or (when a checkpoint left the
    disk full) the probe of the temporary file the write is made in?"""
    return bool(re.match(f"{start}(cannot write {re.escape(str(target))}|output folder "
                         f"{re.escape(str(target.parent))} cannot take a write .*): No space left on device", line))


def _kept(line: str, tmp_path: Path) -> tuple[Path, list[str]]:
    """The kept folder an error line names (under the test's $TMPDIR) and the file names it lists."""
    found = KEPT.search(line)
    assert found, line
    folder = Path(found.group(1))
    assert folder.parent == tmp_path / "tmp", line
    return folder, found.group(2).split(", ")


def _fails_before_the_work(result, folder: Path) -> None:
    lines = _lines(result.output)
    assert result.exit_code == 2, result.output
    assert len(lines) == 1, result.output                                   # no table, no progress: no work
    assert lines[0].startswith(f"lnbench: error: output folder {folder} cannot take a write (4096-byte probe for "
                               f"x.csv): No space left on device"), lines[0]


# --- before the work ---------------------------------------------------------------------------------------------

def test_a_full_output_folder_stops_the_run_before_the_work(small_fs):
    _fill(small_fs)
    result = invoke(*VERIFY[:-1], "--csv", str(small_fs / "x.csv"))
    _fails_before_the_work(result, small_fs)
    assert sorted(p.name for p in small_fs.iterdir()) == ["filler"]


def test_enospc_at_the_probe_write_stops_the_run_before_the_work(tmp_path, monkeypatch):
    folder = tmp_path / "out"
    real_write = os.write

    def write(fd: int, data: bytes) -> int:
        if os.readlink(f"/proc/self/fd/{fd}").startswith(str(folder)):
            raise ENOSPC
        return real_write(fd, data)

    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc/self/fd to tell the output's descriptor")
    monkeypatch.setattr(os, "write", write)
    result = invoke(*VERIFY[:-1], "--csv", str(folder / "x.csv"))
    _fails_before_the_work(result, folder)
    assert not list(folder.iterdir())


def test_a_read_only_output_folder_stops_the_run_before_the_work(small_fs):
    """(a guard: the temporary file's creation found this before too)"""
    subprocess.run(["mount", "-o", "remount,ro", str(small_fs)], check=True)
    result = invoke(*VERIFY[:-1], "--csv", str(small_fs / "x.csv"))
    lines = _lines(result.output)
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert "Read-only file system" in lines[0] and str(small_fs) in lines[0], lines[0]


# --- at the end of a short run ------------------------------------------------------------------------------------

def _check_kept_at_the_end(result, target: Path, tmp_path: Path) -> None:
    lines = _lines(result.output)
    assert result.exit_code == 2, result.output
    assert _full(target, lines[-1]), result.output
    folder, names = _kept(lines[-1], tmp_path)
    assert names == [target.name]
    frame = pd.read_csv(folder / target.name)
    assert len(frame) == ROWS and frame["complete"].all() and (frame["status"] == "PASS").all()
    assert not target.exists() and not sidecar_of(target).exists()


def test_a_disk_full_at_the_end_keeps_the_rows_in_a_named_file(small_fs, tmp_path):
    _fill(small_fs, leave=8 * 1024)            # the probe fits, the 11 kB CSV does not
    target = small_fs / "x.csv"
    result = invoke(*VERIFY, "--csv", str(target))
    _check_kept_at_the_end(result, target, tmp_path)


def test_enospc_at_the_final_write_keeps_the_rows_in_a_named_file(tmp_path, monkeypatch):
    target = tmp_path / "out" / "x.csv"
    real = pd.DataFrame.to_csv

    def to_csv(frame, path=None, *args, **kwargs):
        if str(path).startswith(str(target.parent)):
            raise ENOSPC
        return real(frame, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)
    result = invoke(*VERIFY, "--csv", str(target))
    _check_kept_at_the_end(result, target, tmp_path)


# --- at a checkpoint of a longer run --------------------------------------------------------------------------

def _row(backend: str) -> dict:
    """A verify row (lnbench.results.VERIFY: its required columns)."""
    return {"backend": backend, "case": "randn", "dtype": "f32", "shape": "2x8", "tensor": "y", "status": "PASS"}


def _meta() -> dict:
    from lnbench.results import VERIFY

    return VERIFY.run()


def test_a_checkpoint_that_fails_keeps_the_rows_and_the_run_goes_on(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("lnbench.scaffold.sink.CHECKPOINT_S", 0.0)
    out = tmp_path / "out"
    full = {"on": True}
    real = pd.DataFrame.to_csv

    def to_csv(frame, path=None, *args, **kwargs):
        if full["on"] and str(path).startswith(str(out)):
            raise ENOSPC
        return real(frame, path, *args, **kwargs)

    csv_path = check_writable(out / "r.csv")
    monkeypatch.setattr(pd.DataFrame, "to_csv", to_csv)
    try:
        with pytest.raises(ResultsNotWritten) as info:
            with ResultSink(csv_path, None, _meta(), total=3) as sink:
                sink.add(0, [_row("a")])                       # the first checkpoint fails: a warning, on we go
                err = capsys.readouterr().err
                assert err.startswith(f"lnbench: warning: cannot write {csv_path}: No space left on device; the "
                                      f"results are kept in "), err
                assert err.rstrip().endswith("; the run goes on") and len(_lines(err)) == 1, err
                folder, _ = _kept(err, tmp_path)
                assert list(pd.read_csv(folder / "r.csv")["backend"]) == ["a"]
                sink.add(1, [_row("b")])                       # later checkpoints update the same folder
                assert list(pd.read_csv(folder / "r.csv")["backend"]) == ["a", "b"]
                assert capsys.readouterr().err == ""           # warned once
                sink.add(2, [_row("c")])
                sink.finish()
    finally:
        release_outputs()
    assert info.value.kept and _kept(str(info.value), tmp_path)[0] == folder
    frame = pd.read_csv(folder / "r.csv")
    assert list(frame["backend"]) == ["a", "b", "c"] and frame["complete"].all()
    assert not csv_path.exists() and not list(out.iterdir())


def test_a_checkpoint_that_fails_then_a_final_write_that_succeeds_leaves_no_kept_copy(tmp_path, monkeypatch):
    monkeypatch.setattr("lnbench.scaffold.sink.CHECKPOINT_S", 0.0)
    out = tmp_path / "out"
    full = {"on": True}
    real = pd.DataFrame.to_csv
    monkeypatch.setattr(pd.DataFrame, "to_csv", lambda frame, path=None, *a, **k: (_ for _ in ()).throw(ENOSPC)
                        if full["on"] and str(path).startswith(str(out)) else real(frame, path, *a, **k))
    csv_path = check_writable(out / "r.csv")
    try:
        with ResultSink(csv_path, None, _meta(), total=2) as sink:
            sink.add(0, [_row("a")])
            assert list((tmp_path / "tmp").glob("lnbench-kept-*/r.csv"))
            full["on"] = False                                 # space came back
            sink.add(1, [_row("b")])
            sink.finish()
    finally:
        release_outputs()
    assert list(pd.read_csv(csv_path)["backend"]) == ["a", "b"]
    assert not list((tmp_path / "tmp").glob("lnbench-kept-*"))


def test_a_usage_error_still_leaves_no_result_file(tmp_path, monkeypatch):
    """(a guard) exit 2 for bad input still removes the checkpoints; a kept copy too."""
    monkeypatch.setattr("lnbench.scaffold.sink.CHECKPOINT_S", 0.0)
    csv_path = check_writable(tmp_path / "out" / "r.csv")
    try:
        with pytest.raises(LnbenchUsageError):
            with ResultSink(csv_path, None, _meta(), total=2) as sink:
                sink.add(0, [_row("a")])
                raise LnbenchUsageError("bad")
    finally:
        release_outputs()
    assert not csv_path.exists() and not list((tmp_path / "tmp").glob("lnbench-kept-*"))


def test_a_real_disk_filling_during_a_longer_run_keeps_every_row(small_fs, tmp_path):
    """A real process: its outputs claimed and probed (the tmpfs had room), then the tmpfs is filled while it is
    stopped; it goes on, warns at its first checkpoint, and ends with exit 2 naming where every row is."""
    target, js = small_fs / "x.csv", small_fs / "x.json"
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp"), "COLUMNS": "200", "OMP_NUM_THREADS": "1"}
    env.pop("LNBENCH_DEBUG", None)
    proc = subprocess.Popen([sys.executable, "-m", "lnbench.cli", *VERIFY[:-2], "2x8,64x256,512x1024", "-q",
                             "--csv", str(target), "--json", str(js)], env=env, cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (sidecar_of(js).exists() and sidecar_of(js).read_text().strip()):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signal.SIGSTOP)
        _fill(small_fs)
        proc.send_signal(signal.SIGCONT)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 2, err
    lines = _lines(err)
    assert _full(target, lines[-1]), err
    # a checkpoint after the fill (when the run still had cases to go: on a quiet machine it may have none)
    # failed, was said once, and the run went on, keeping its rows in the folder the final line names too
    warned = [line for line in lines if line.startswith("lnbench: warning: ")]
    assert len(warned) <= 1, err
    folder, names = _kept(lines[-1], tmp_path)
    assert names == ["x.csv", "x.json"]
    if warned:
        assert _full(target, warned[0], "lnbench: warning: ") and warned[0].endswith("; the run goes on"), err
        assert _kept(warned[0], tmp_path)[0] == folder
    frame = pd.read_csv(folder / "x.csv")
    assert len(frame) == 3 * ROWS and frame["complete"].all()
    assert json.loads((folder / "x.json").read_text())["metadata"]["complete"] is True
    assert "CSV written" not in out
    assert not target.exists() and not js.exists()


# --- rows that cannot be encoded (issue 41) ------------------------------------------------------------------------

def test_a_cell_that_cannot_be_encoded_leaves_every_row_in_the_kept_folder(tmp_path, monkeypatch):
    """One planted cell the CSV encoder refuses: the run's rows are still kept, as JSON lines that always encode,
    and the error line names where; nothing is left at the asked paths."""
    from lnbench.results import frames

    real = frames.csv_cell

    def refuses_one_cell(value):
        if value == "dbias":                 # verify's last tensor: one cell of each case's last row
            raise ValueError("planted: this cell cannot be encoded")
        return real(value)

    monkeypatch.setattr(frames, "csv_cell", refuses_one_cell)
    target, as_json = tmp_path / "out" / "x.csv", tmp_path / "out" / "x.json"
    result = invoke(*VERIFY, "--csv", str(target), "--json", str(as_json))
    lines = _lines(result.output)
    assert result.exit_code == 2 and len(lines) == 1, result.output
    assert lines[0].startswith("lnbench: error: cannot encode the results (ValueError: planted: this cell cannot "
                               "be encoded); the results are kept in "), lines[0]
    folder, names = _kept(lines[0], tmp_path)
    assert names == ["verify.rows.jsonl", "verify.metadata.json"]
    rows = [json.loads(line) for line in (folder / names[0]).read_text(encoding="utf-8").splitlines()]
    assert len(rows) == ROWS and {r["status"] for r in rows} == {"PASS"}
    assert "dbias" in {r["tensor"] for r in rows} and all(r["max_abs_err"] >= 0 for r in rows)
    metadata = json.loads((folder / names[1]).read_text(encoding="utf-8"))
    assert metadata["schema"].startswith("verify/") and metadata["complete"] is True
    assert not target.exists() and not as_json.exists()


def test_values_json_has_no_form_for_are_kept_as_their_repr():
    from lnbench.output.fallback import always_json

    class Odd:
        def __repr__(self) -> str:
            return "Odd()"

    kept = always_json({"a": float("nan"), 3: (1, Odd()), "b": {"c": float("inf")}, "d": "γ"})
    assert json.loads(json.dumps(kept)) == {"a": None, "3": [1, "Odd()"], "b": {"c": None}, "d": "γ"}

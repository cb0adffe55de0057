"""`lnbench compare --md` is made ready and written like --csv and --json: one reservation
(cli_common.reserve_outputs, report.check_writable / atomic_write) before any work, the same refusals."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import lnbench.cli_common as cli_common
from cli_helpers import ONE_THREAD as ENV, error_line, timing
from lnbench.compare.command import compare_command
from lnbench.errors import LnbenchUsageError
from lnbench.perf.command import perf_command
from lnbench.output.files import release_outputs


@pytest.fixture(scope="module")
def perf_json(tmp_path_factory) -> Path:
    """One tiny real perf run (torch fwd 8x64 hot, 2 workers): compare only needs a valid result to read."""
    out = tmp_path_factory.mktemp("perf")
    result = CliRunner().invoke(perf_command, [
        "--device", "cpu", "--dtype", "bf16", "--backend", "torch", "--shapes", "8x64", "--op", "fwd",
        "--mode", "hot", "-P", "2", *timing(target_run_s=0.001, max_iters=None), "-q",
        "--csv", str(out / "p.csv"), "--json", str(out / "p.json")],
        env={**ENV, "LNBENCH_RESULTS_DIR": str(out)})
    assert result.exit_code == 0, result.output
    return out / "p.json"


def _compare(perf_json: Path, *outputs: str):
    return CliRunner().invoke(compare_command, [str(perf_json), str(perf_json), "-q", *outputs], env=ENV)


def _no_temporaries(folder: Path) -> None:
    assert not list(folder.rglob(".*.tmp")), list(folder.rglob(".*.tmp"))


# --- the route: --md is reserved with --csv and --json ------------------------------------------------------------

def test_compare_reserves_md_through_the_shared_output_path(perf_json, tmp_path, monkeypatch):
    reserved: list[Path] = []
    real = cli_common.check_writable
    monkeypatch.setattr(cli_common, "check_writable", lambda path: reserved.append(Path(path)) or real(path))
    csv, md = tmp_path / "c.csv", tmp_path / "s.md"
    result = _compare(perf_json, "--csv", str(csv), "--md", str(md))
    assert result.exit_code == 0, result.output
    assert reserved == [csv, md]
    assert md.read_text().startswith("## lnbench compare")


def test_reserve_outputs_takes_any_named_output_and_keeps_the_default_csv(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))
    try:
        final = cli_common.reserve_outputs("x", {"--csv": None, "--json": None, "--svg": tmp_path / "a.svg"})
        assert list(final) == ["--csv", "--svg"] and final["--svg"] == tmp_path / "a.svg"
        assert final["--csv"].parent == tmp_path / "results" and final["--csv"].name.startswith("x-")
        with pytest.raises(LnbenchUsageError, match="--svg and --png name the same file"):
            cli_common.reserve_outputs("x", {"--csv": None, "--svg": tmp_path / "b", "--png": tmp_path / "b"})
    finally:
        release_outputs()
    _no_temporaries(tmp_path)


# --- same file: refused like --csv vs --json --------------------------------------------------------------------

@pytest.mark.parametrize("options, clash", [
    (["--csv", "{shared}", "--json", "{shared}"], "--csv and --json"),          # the refusal --md must match
    (["--csv", "{shared}", "--md", "{shared}"], "--csv and --md"),
    (["--csv", "{own}", "--json", "{shared}", "--md", "{shared}"], "--json and --md"),
])
def test_md_naming_the_file_of_another_output_is_refused_like_csv_and_json(perf_json, tmp_path, options, clash):
    shared, own = tmp_path / "shared", tmp_path / "own.csv"
    result = _compare(perf_json, *(o.format(shared=shared, own=own) for o in options))
    assert f"{clash} name the same file {shared}: give each its own" in error_line(result)
    assert not shared.exists() and not own.exists()
    _no_temporaries(tmp_path)


def test_md_through_a_link_to_the_csv_is_refused(perf_json, tmp_path):
    (tmp_path / "link.md").symlink_to(tmp_path / "c.csv")
    result = _compare(perf_json, "--csv", str(tmp_path / "c.csv"), "--md", str(tmp_path / "link.md"))
    assert "--csv and --md name the same file" in error_line(result)
    assert not (tmp_path / "c.csv").exists()


def test_dev_null_may_take_md_and_csv_together(perf_json):
    result = _compare(perf_json, "--csv", os.devnull, "--md", os.devnull)
    assert result.exit_code == 0, result.output


# --- a bad path: the same one line for --md as for --csv ----------------------------------------------------------

def _bad_path(kind: str, folder: Path) -> Path:
    """An output path that cannot be written, by kind."""
    if kind == "under-a-file":
        (folder / "a-file").write_text("")
        return folder / "a-file" / "out"
    if kind == "fifo-without-reader":
        os.mkfifo(folder / "fifo")
        return folder / "fifo"
    if kind == "proc":
        return Path(f"/proc/lnbench-test-{os.getpid()}.out")
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["under-a-file", "fifo-without-reader", "proc"])
def test_a_bad_md_path_is_refused_with_the_csv_message(perf_json, tmp_path, kind):
    bad = _bad_path(kind, tmp_path)
    as_csv = error_line(_compare(perf_json, "--csv", str(bad)))
    as_md = error_line(_compare(perf_json, "--csv", str(tmp_path / "c.csv"), "--md", str(bad)))
    assert as_md == as_csv and str(bad) in as_md
    assert not (tmp_path / "c.csv").exists()
    _no_temporaries(tmp_path)


def test_md_naming_a_directory_is_one_line_exit_2(perf_json, tmp_path):
    (tmp_path / "folder").mkdir()
    result = _compare(perf_json, "--csv", str(tmp_path / "c.csv"), "--md", str(tmp_path / "folder"))
    assert "is a directory" in error_line(result)
    assert not (tmp_path / "c.csv").exists()


# --- where the summary goes ---------------------------------------------------------------------------------------

def test_md_into_missing_folders_creates_them_like_csv(perf_json, tmp_path):
    csv, md = tmp_path / "a" / "b" / "c.csv", tmp_path / "x" / "y" / "s.md"
    result = _compare(perf_json, "--csv", str(csv), "--md", str(md))
    assert result.exit_code == 0, result.output
    assert csv.is_file() and md.read_text().startswith("## lnbench compare")


def test_md_through_a_symlink_writes_its_target_and_keeps_the_link(perf_json, tmp_path):
    target, link = tmp_path / "targets" / "t.md", tmp_path / "link.md"
    target.parent.mkdir()
    target.write_text("old\n")
    link.symlink_to(target)
    result = _compare(perf_json, "--csv", str(tmp_path / "c.csv"), "--md", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and target.read_text().startswith("## lnbench compare")
    assert f"Markdown summary written to {target}" in result.output.replace("\n", "")
    _no_temporaries(tmp_path)


def test_md_into_a_dangling_link_creates_its_target(perf_json, tmp_path):
    target, link = tmp_path / "later" / "t.md", tmp_path / "dangling.md"
    link.symlink_to(target)
    result = _compare(perf_json, "--csv", str(tmp_path / "c.csv"), "--md", str(link))
    assert result.exit_code == 0, result.output
    assert target.read_text().startswith("## lnbench compare")


def test_md_into_a_fifo_with_a_reader_is_written_in_place(perf_json, tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)       # a reader now; the summary fits the pipe buffer
    try:
        result = _compare(perf_json, "--csv", str(tmp_path / "c.csv"), "--md", str(fifo))
        assert result.exit_code == 0, result.output
        assert os.read(reader, 1 << 16).decode().startswith("## lnbench compare")
    finally:
        os.close(reader)
    assert fifo.exists() and not fifo.is_file()

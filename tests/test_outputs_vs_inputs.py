"""Output paths a new user tried: an output naming one of the command's inputs, `-`, a folder path, a peak file
that is not a peak cache, and a write that fails half way (/dev/full). Each test fails on the code before."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from lnbench.errors import LnbenchUsageError
from lnbench.output.files import atomic_write_all, check_writable, release_outputs
from cli_helpers import ONE_THREAD as ENV, error_line, invoke
from commands_under_test import ABI, PEAK, PERF, VERIFY


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))      # where results that fail are kept
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.delenv("LNBENCH_CONFIG", raising=False)
    for name, value in ENV.items():                  # (the runs' torch on one thread)
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(scope="module")
def perf_json(tmp_path_factory) -> Path:
    """One tiny real perf result (torch fwd bf16 2x64 hot)."""
    out = tmp_path_factory.mktemp("perf")
    result = invoke(*PERF, "--csv", str(out / "p.csv"), "--json", str(out / "p.json"),
                    env={**ENV, "LNBENCH_RESULTS_DIR": str(out)})
    assert result.exit_code == 0, result.output
    return out / "p.json"


@pytest.fixture
def pair(perf_json, tmp_path) -> tuple[Path, Path]:
    """BASE and NEW in this test's folder."""
    base, new = tmp_path / "a.json", tmp_path / "b.json"
    shutil.copy(perf_json, base)
    shutil.copy(perf_json, new)
    return base, new


# --- 1. an output naming an input ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("option", "side", "name"), [("--md", 0, "BASE"), ("--csv", 1, "NEW"), ("--json", 1, "NEW"),
                                                      ("--json", 0, "BASE")])
def test_compare_refuses_an_output_over_base_or_new(pair, option, side, name):
    target = pair[side]
    before = target.read_bytes()
    line = error_line(invoke("compare", str(pair[0]), str(pair[1]), "-q", option, str(target)))
    assert line == f"lnbench: error: {option} {target} is an input of this command ({name}); choose another path"
    assert target.read_bytes() == before
    assert not (Path("results").exists() and list(Path("results").iterdir()))


def test_compare_refuses_an_output_through_a_link_or_another_spelling_of_an_input(pair, tmp_path):
    (tmp_path / "link.json").symlink_to(pair[0])
    assert "(BASE)" in error_line(invoke("compare", str(pair[0]), str(pair[1]), "--md", str(tmp_path / "link.json")))
    (tmp_path / "sub").mkdir()
    other = tmp_path / "sub" / ".." / "b.json"
    assert "(NEW)" in error_line(invoke("compare", str(pair[0]), str(pair[1]), "--csv", str(other)))


@pytest.mark.parametrize(("command", "section", "option"), [("compare", "compare", "--md"),
                                                          ("verify", "verify", "--csv"),
                                                          ("abi-compare", "abi_compare", "--json")])
def test_a_command_refuses_to_overwrite_its_config(pair, tmp_path, command, section, option):
    config = tmp_path / "X.toml"
    config.write_text(f"[{section}]\n")
    args = {"compare": ["compare", str(pair[0]), str(pair[1]), "-q"], "verify": VERIFY, "abi-compare": ABI}[command]
    line = error_line(invoke(*args, "--config", str(config), option, str(config)))
    assert line == f"lnbench: error: {option} {config} is an input of this command (--config); choose another path"
    assert config.read_text() == f"[{section}]\n"


def test_verify_refuses_to_overwrite_the_config_named_by_the_environment(tmp_path):
    config = tmp_path / "X.toml"
    config.write_text("[verify]\n")
    line = error_line(invoke(*VERIFY, "--json", "X.toml", env={"LNBENCH_CONFIG": str(config)}))
    assert "is an input of this command (LNBENCH_CONFIG)" in line
    assert config.read_text() == "[verify]\n"


def test_perf_refuses_to_overwrite_its_peak_file_or_the_default_peak_cache(tmp_path):
    peak = tmp_path / "peak.json"
    peak.write_text("{}")
    assert "is an input of this command (--peak-file)" in error_line(
        invoke(*PERF, "--peak-file", str(peak), "--json", str(peak)))
    cache = tmp_path / "results" / "peak.json"
    assert "is an input of this command (the peak cache)" in error_line(invoke(*PERF, "--csv", str(cache)))
    assert peak.read_text() == "{}"


def test_plot_never_draws_over_a_result_it_plots(perf_json, tmp_path):
    first = tmp_path / "x.json"
    shutil.copy(perf_json, first)
    second = tmp_path / "x-bf16-hot.png"             # a perf JSON under the name x.json's picture gets
    shutil.copy(perf_json, second)
    line = error_line(invoke("plot", str(first), str(second)))
    assert f"PNG {second} is an input of this command (RESULTS #2)" in line
    assert second.read_bytes() == perf_json.read_bytes()


def test_a_character_device_may_be_input_and_output(tmp_path):
    result = invoke(*VERIFY, "--config", "/dev/null", "--csv", "/dev/null")
    assert result.exit_code == 0, result.output


# --- 2. `-` ------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("option", ["--csv", "--json"])
def test_a_dash_is_not_standard_output(option, tmp_path):
    line = error_line(invoke(*VERIFY, option, "-"))
    assert line == (f"lnbench: error: {option} -: writing to standard output is not supported; give a file path "
                    f"(e.g. /dev/stdout)")
    assert not (tmp_path / "-").exists()


def test_a_dash_is_refused_for_md_and_peak_file(pair, tmp_path):
    assert "--md -: writing to standard output" in error_line(invoke("compare", str(pair[0]), str(pair[1]), "--md", "-"))
    assert "--peak-file -: writing to standard output" in error_line(invoke(*PEAK, "--peak-file", "-"))
    assert not (tmp_path / "-").exists()


def _run(*args: str, stdout: object = subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lnbench.cli", *args], stdout=stdout, stderr=subprocess.PIPE,
                          text=True, timeout=120, env={**os.environ, **ENV})


def test_dev_stdout_is_written_in_place_to_a_pipe_and_to_a_redirected_file(pair, tmp_path):
    piped = _run("compare", str(pair[0]), str(pair[1]), "-q", "--csv", "/dev/null", "--json", "/dev/stdout")
    assert piped.returncode == 0, piped.stderr
    assert '"metadata"' in piped.stdout and "JSON written to /dev/stdout" in piped.stdout
    log = tmp_path / "log.txt"
    with open(log, "w") as handle:
        handle.write("before\n")
        handle.flush()
        done = _run("compare", str(pair[0]), str(pair[1]), "-q", "--csv", "/dev/null", "--md", "/dev/stdout",
                    stdout=handle)
        handle.write("after\n")
    assert done.returncode == 0, done.stderr
    text = log.read_text()        # the file was appended to, not renamed over (which would lose before/after)
    assert text.startswith("before\n") and "## lnbench compare" in text and text.endswith("after\n")


# --- 3. the peak file ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("content", "why"), [("x = 1\n", "not JSON"), ("{bad", "not JSON"), ("[1, 2]", "not a JSON object"),
                                              ('{"cpu": 3}', "entry 'cpu' has no numeric gbps")])
def test_peak_refuses_to_replace_a_file_that_is_not_a_peak_cache(tmp_path, content, why):
    path = tmp_path / "eps.toml"
    path.write_text(content)
    line = error_line(invoke(*PEAK, "--peak-file", str(path)))
    assert line == (f"lnbench: error: --peak-file {path} exists and is not an lnbench peak cache ({why}); "
                    f"choose another path or remove it")
    assert path.read_text() == content


def test_peak_updates_an_existing_cache(tmp_path, monkeypatch):
    from lnbench.perf import workloads
    monkeypatch.setattr(workloads, "llc_bytes", lambda device: (1 << 19, "test"))   # a 1 MiB copy is then allowed
    path = tmp_path / "peak.json"
    path.write_text(json.dumps({"other device": {"gbps": 1.5}}))
    result = invoke(*PEAK, "--peak-file", str(path))
    assert result.exit_code == 0, result.output
    cache = json.loads(path.read_text())
    assert cache["other device"] == {"gbps": 1.5} and len(cache) == 2


@pytest.mark.parametrize("command", [PEAK, VERIFY])
def test_a_folder_path_with_a_trailing_slash_is_refused(tmp_path, command):
    option = "--peak-file" if command is PEAK else "--csv"
    line = error_line(invoke(*command, option, f"{tmp_path}/peakdir/"))
    assert f"{tmp_path}/peakdir/ is a directory path" in line
    assert not (tmp_path / "peakdir").exists()


# --- 4. a write that fails -----------------------------------------------------------------------------------------

def test_a_full_device_is_one_line_and_leaves_no_result(tmp_path):
    result = invoke(*VERIFY, "--json", "/dev/full")
    line = error_line(result)
    assert line.startswith("lnbench: error: cannot write /dev/full: No space left on device; the results are kept "
                           f"in {tmp_path}/tmp/lnbench-kept-"), line
    assert not list((tmp_path / "results").iterdir())            # neither the CSV nor its temporary file
    kept = next((tmp_path / "tmp").glob("lnbench-kept-*"))
    assert json.loads((kept / "full").read_text())["data"]      # the rows are not only on the screen


def test_a_full_device_for_md_leaves_no_csv_or_json(pair, tmp_path):
    csv, out = tmp_path / "c.csv", tmp_path / "c.json"
    result = invoke("compare", str(pair[0]), str(pair[1]), "-q", "--csv", str(csv), "--json", str(out),
                    "--md", "/dev/full")
    assert error_line(result).startswith("lnbench: error: cannot write /dev/full: No space left on device; the "
                                         "results are kept in ")
    assert not csv.exists() and not out.exists() and not list(tmp_path.glob(".*.tmp"))
    kept = next((tmp_path / "tmp").glob("lnbench-kept-*"))
    assert sorted(p.name for p in kept.iterdir()) == ["c.csv", "c.json", "full"]


def test_atomic_write_all_places_nothing_when_a_later_write_fails(tmp_path):
    def fail(_: Path) -> None:
        raise OSError(28, "No space left on device")

    with pytest.raises(LnbenchUsageError, match=r"cannot write .*b\.txt: No space left on device"):
        atomic_write_all([(tmp_path / "a.txt", lambda p: p.write_text("a")), (tmp_path / "b.txt", fail)])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tmp"]


def test_proc_gives_the_real_reason(tmp_path):
    try:
        with pytest.raises(LnbenchUsageError) as info:
            check_writable(Path("/proc/version"))
    finally:
        release_outputs()
    assert "No such file or directory" not in str(info.value)
    assert "not writable" in str(info.value)


def test_perf_says_a_broken_peak_file_is_broken_not_missing(tmp_path):
    from lnbench.perf.command import perf_command
    broken = tmp_path / "peak.json"
    broken.write_text("{garbage")
    result = CliRunner().invoke(perf_command, ["--device", "cpu", "--backend", "torch", "--shapes", "8x64", "--op",
                                               "fwd", "--mode", "hot", "-P", "1", "-R", "2", "--warmup-s", "0",
                                               "--min-iters", "3", "--peak-file", str(broken),
                                               "--csv", str(tmp_path / "p.csv")], env=ENV)
    assert result.exit_code == 0, result.output
    assert "is not an lnbench peak cache (not JSON)" in result.output and "no measured peak" not in result.output
    assert broken.read_text() == "{garbage"

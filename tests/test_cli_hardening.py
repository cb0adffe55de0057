"""Issue 10 items 3-6: packaged config, config merging and checking, bad input, result files."""
from __future__ import annotations

import csv
import importlib.resources
import os
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from cli_helpers import error_line, invoke
from lnbench import settings as cfg
from lnbench import validate
from lnbench.errors import LnbenchUsageError
from lnbench.output.files import default_output_path, write_csv, write_json

ROOT = Path(__file__).resolve().parent.parent


# ---- item 3: install ------------------------------------------------------------------------------------------

def test_default_config_is_package_data():
    resource = importlib.resources.files("lnbench") / "configs" / "default.toml"
    assert resource.is_file()
    assert "verify" in tomllib.loads(resource.read_text(encoding="utf-8"))
    assert not (ROOT / "configs" / "default.toml").exists(), "the default config lives in the package only"


def test_package_data_ships_config_and_emu_source():
    """What a non-editable install (a wheel) carries besides .py files: pyproject's package-data globs must
    match the packaged config and the emulator's C source (a wheel build here would load the CPU that the
    timing tests of the same run share)."""
    import fnmatch

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    globs = meta["tool"]["setuptools"]["package-data"]["lnbench"]
    for needed in ("configs/default.toml", "emu/hip_stub.c"):
        assert (ROOT / "lnbench" / needed).is_file()
        assert any(fnmatch.fnmatch(needed, g) for g in globs), needed


def test_verify_runs_from_another_directory_with_results_there(tmp_path, monkeypatch):
    monkeypatch.delenv("LNBENCH_RESULTS_DIR", raising=False)
    monkeypatch.delenv("LNBENCH_CONFIG", raising=False)
    monkeypatch.chdir(tmp_path)
    result = invoke("verify", "--backend", "torch", "--device", "cpu", "--dtype", "f32", "--shapes", "3x257", "-q")
    assert result.exit_code == 0, result.output
    assert list((tmp_path / "results").glob("verify-*.csv"))


# ---- item 4: configs ------------------------------------------------------------------------------------------

def test_partial_config_merges_over_defaults(tmp_path):
    part = tmp_path / "part.toml"
    part.write_text('[verify]\nseed = 7\nshape_set = "mine"\n[verify.shape_sets]\nmine = ["3x257"]\n'
                    '[verify.tolerance.atol.bf16]\ny = 0.5\n')
    config = cfg.load_config(part)
    verify = config["verify"]
    assert verify["seed"] == 7 and verify["eps"] == cfg.default_config()["verify"]["eps"]
    assert cfg.shape_set(config, "verify") == [(3, 257)]
    assert "default" in verify["shape_sets"]
    assert verify["tolerance"]["atol"]["bf16"]["y"] == 0.5 and verify["tolerance"]["atol"]["bf16"]["dx"] == 1.6e-2
    assert config["perf"] == cfg.default_config()["perf"]


def test_partial_config_through_env_and_cli(tmp_path, results_dir):
    part = tmp_path / "part.toml"
    part.write_text("[verify]\nseed = 7\n")
    result = invoke("verify", "--backend", "torch", "--device", "cpu", "--dtype", "f32", "--shapes", "3x257", "-q",
                    env={"LNBENCH_CONFIG": str(part)})
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("text,needles", [
    ("[verify]\nseeed = 3\n", ["[verify]", "'seeed'"]),
    ("[verify.tolerance.atol.f32]\nyy = 1.0\n", ["[verify.tolerance.atol.f32]", "'yy'"]),
    ("[perff]\neps = 1e-5\n", ["'perff'"]),
    ("[perf]\neps = [1e-5]\n", ["[perf]", "'eps'", "number"]),
    ("[verify]\neps = 1e-5\n", ["[verify]", "'eps'", "list"]),
    ("[abi_compare]\nprocesses = \"3\"\n", ["[abi_compare]", "'processes'"]),
])
def test_bad_config_key_or_kind_is_exit_2_naming_key_and_table(tmp_path, results_dir, text, needles):
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    line = error_line(invoke("verify", "--backend", "torch", "--device", "cpu", "--config", str(bad)))
    for needle in needles:
        assert needle in line, line
    with pytest.raises(LnbenchUsageError):
        cfg.load_config(bad)


def test_table_names_survive_rich_markup(tmp_path, results_dir):
    bad = tmp_path / "bad.toml"
    bad.write_text("[verify.tolerance]\nkk = 1\n")
    assert "[verify.tolerance]" in error_line(invoke("verify", "--config", str(bad)))


# ---- item 5: bad input ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("args,needle", [
    (["verify", "--backend", "torch", "--device", "cpu", "--shapes", "64x256,"], "empty item"),
    (["verify", "--backend", "torch", "--device", "cpu", "--shapes", "64x256,,3x257"], "empty item"),
    (["verify", "--backend", "torch,", "--device", "cpu", "--shapes", "3x257"], "empty item"),
    (["perf", "--device", "cpu", "--shapes", "64x256,"], "empty item"),
    (["verify", "--backend", "torch", "--device", "cpu", "--shapes", "1x99999999999"], "does not fit"),
    (["verify", "--backend", "torch", "--device", "cpu", "--shapes", "100000x100000"], "does not fit"),
    (["perf", "--device", "cpu", "--shapes", "1x99999999999"], "does not fit"),
    (["abi-compare", "--pair", "torch-entry", "--device", "cpu", "--shapes", "100000x100000"], "does not fit"),
    (["perf", "--device", "cpu", "--shapes", "64x256", "--eps", "nan"], "finite"),
    (["perf", "--device", "cpu", "--shapes", "64x256", "--eps", "inf"], "finite"),
    (["perf", "--device", "cpu", "--shapes", "64x256", "--eps", "-1"], "> 0"),
    (["abi-compare", "--static-only", "--eps", "inf"], "finite"),
    (["abi-compare", "--static-only", "--eps", "0"], "> 0"),
    (["verify", "--backend", "torch", "--device", "cpu", "--seed", "-1"], "seed"),
    (["verify", "--backend", "torch", "--device", "cpu", "--seed", str(2**64)], "seed"),
    (["perf", "--device", "cpu", "--shapes", "64x256", "--seed", str(2**63)], "seed"),
    (["abi-compare", "--static-only", "--seed", "-5"], "seed"),
    (["abi-compare", "--static-only", "--arch", "gfx90a"], "unknown arch"),
    (["abi-compare", "--static-only", "--arch", "gfxfoo"], "unknown arch"),
    (["inspect", "--arch", "gfx90a"], "unknown arch"),
])
def test_bad_input_is_one_line_exit_2(args, needle, results_dir):
    assert needle in error_line(invoke(*args))


def test_verify_config_eps_must_be_finite(tmp_path, results_dir):
    bad = tmp_path / "eps.toml"
    bad.write_text("[verify]\neps = [1e-5, inf]\n")
    assert "finite" in error_line(invoke("verify", "--backend", "torch", "--device", "cpu", "--config", str(bad)))


def test_memory_estimate_uses_free_memory(monkeypatch):
    monkeypatch.setattr(validate, "available_bytes", lambda device: 1 << 30)
    validate.shapes_fit([(1024, 1024)], 96, "cpu")
    with pytest.raises(LnbenchUsageError, match="30000x30000"):
        validate.shapes_fit([(30000, 30000)], 96, "cpu")
    free = validate._mem_available_linux()
    assert free is None or free > 0


def test_explicit_backend_that_cannot_run_is_exit_1_with_reason(results_dir):
    from lnbench.backends import probe_backend
    from lnbench.run.device import parse_device

    backend, avail = probe_backend("liger", parse_device("cpu"))
    if avail.runnable:
        pytest.skip("liger runs here")
    result = invoke("verify", "--backend", "liger", "--device", "cpu", "--dtype", "f32", "--shapes", "3x257")
    assert result.exit_code == 1, result.output
    assert "liger cannot run here" in result.output


def test_debug_adds_traceback_and_keeps_exit_code(results_dir):
    result = invoke("verify", "--device", "cpu", "--seed", "-1", env={"LNBENCH_DEBUG": "1"})
    assert result.exit_code == 2, result.output
    assert "Traceback" in result.output and "seed" in result.output


# ---- item 6: results ------------------------------------------------------------------------------------------

def test_default_names_differ_between_runs_in_the_same_second(tmp_path):
    names = {default_output_path("verify", "csv", tmp_path) for _ in range(50)}
    assert len(names) == 50
    assert all(str(os.getpid()) in p.name for p in names)


def test_result_files_get_normal_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        a = write_csv([{"x": 1}], tmp_path / "a.csv", {"m": 1})
        b = write_json({"x": 1}, tmp_path / "b.json")
    finally:
        os.umask(old)
    assert a.stat().st_mode & 0o777 == 0o644
    assert b.stat().st_mode & 0o777 == 0o644


def test_inspect_csv_carries_run_metadata(tmp_path, results_dir):
    from lnbench.run.metadata import package_version

    if package_version("flydsl") == "not installed":
        pytest.skip("flydsl not installed")
    out = tmp_path / "i.csv"
    result = invoke("inspect", "--arch", "gfx942", "--abi", "pointer", "--op", "fwd", "--shapes", "1x256",
                    "--csv", str(out), "-q")
    assert result.exit_code == 0, result.output
    with open(out) as handle:
        header = next(csv.reader(handle))
    for key in ("lnbench_version", "torch_version", "flydsl_version", "gpu_runtime", "device", "device_name",
                "device_arch", "git_commit", "timestamp", "torch_threads"):
        assert key in header, key


@pytest.mark.parametrize("args, expected", [
    (["perf", "-P", "abc"], "lnbench: error: Invalid value for '-P' / '--processes': 'abc' is not a valid integer."),
    (["verify", "--bogus"], "lnbench: error: No such option '--bogus'"),
    (["bogus"], "lnbench: error: No such command 'bogus'."),
])
def test_click_parse_errors_are_one_line_and_exit_2(args, expected):
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "lnbench.cli", *args], capture_output=True, text=True, timeout=120)
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith(expected), out.stderr
    assert "--help`)" in lines[0] and out.stdout == ""


#: the command line with the worker mechanism's two ways of starting a worker replaced by a line that says so,
#: and the count of workers it started written to $STARTED_FILE as it exits (lnbench.run.pool.started)
NO_WORKER_SCRIPT = """
import atexit, os, sys
sys.argv = [os.path.join(os.path.dirname(sys.executable), "lnbench"), *sys.argv[1:]]
from lnbench.run import pool

def started_one(*args, **kwargs):
    sys.stderr.write("lnbench-test: a worker was started\\n")
    raise OSError("no worker in this test")

pool.spawn = pool._fork = started_one
atexit.register(lambda: open(os.environ["STARTED_FILE"], "w").write(str(pool.started())))
from lnbench.cli import main
main()
"""


@pytest.mark.parametrize("args, expected", [
    (["verify", "--bogus"], "lnbench: error: No such option '--bogus'"),
    (["verify", "--jobs", "2", "--device", "emu", "--shapes", "0x0"], "lnbench: error: "),
    (["perf", "--shapes", "0x0"], "lnbench: error: "),
    (["abi-compare", "--bogus"], "lnbench: error: No such option '--bogus'"),
])
def test_a_usage_error_starts_no_worker_and_prints_one_line_every_time(tmp_path, args, expected):
    """Issue 56: a usage error ends the run before any worker exists, so no worker's end can add a line (it once
    printed `lnbench: terminated` after the error when early workers were still starting)."""
    env = {**os.environ, "STARTED_FILE": str(tmp_path / "started"), "LNBENCH_RESULTS_DIR": str(tmp_path)}
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", NO_WORKER_SCRIPT, *args], capture_output=True, text=True,
                             timeout=300, env=env, cwd=tmp_path)
        lines = [line for line in out.stderr.splitlines() if line.strip()]
        assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith(expected), out.stderr
        assert (tmp_path / "started").read_text() == "0"
        (tmp_path / "started").unlink()


@pytest.mark.parametrize("command", ["perf", "verify"])
def test_shapes_and_a_shape_set_together_are_refused(command):
    result = invoke(command, "--shapes", "8x8", "--shape-set", "quick", "--device", "cpu")
    assert result.exit_code == 2 and "--shapes and --shape-set both given: choose one" in result.output


@pytest.mark.parametrize("factor", [float("inf"), float("nan"), 0.0, -1.0, 1e6])
def test_planted_slowdown_factor_is_finite_and_bounded(factor):
    from lnbench.compare.planted import plant_slowdown
    from lnbench.errors import LnbenchUsageError

    with pytest.raises(LnbenchUsageError, match="factor must be a number in"):
        plant_slowdown({"rows": [], "metadata": {}}, factor)


def test_peak_refuses_a_copy_that_does_not_fit_before_allocating(tmp_path, monkeypatch):
    from lnbench.perf import workloads

    monkeypatch.setattr(workloads, "free_memory", lambda device: 1 << 30)       # 1 GiB free
    monkeypatch.setattr(workloads, "llc_bytes", lambda device: (32 << 20, "test"))  # any host's cache: 32 MiB
    result = invoke("peak", "--device", "cpu", "--size-mib", "600",
                    "--peak-file", str(tmp_path / "peak.json"))
    assert result.exit_code == 2 and "a copy needs 1200 MiB, cpu has 1024 MiB free" in result.output
    assert not (tmp_path / "peak.json").exists()


@pytest.mark.parametrize("argv, where", [
    (["plot", "--out"], "lnbench plot"),
    (["verify", "--shapes"], "lnbench verify"),
    (["perf", "-P", "abc"], "lnbench perf"),
    (["--bogus"], "lnbench"),
])
def test_click_parse_errors_point_at_the_subcommands_help(argv, where):
    result = invoke(*argv, prog_name="lnbench")
    assert error_line(result).endswith(f"(see `{where} --help`)"), result.output

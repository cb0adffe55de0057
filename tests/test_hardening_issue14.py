"""Issue 14, items 1-14: what 625 generated command lines found. One test (or more) per item; each fails on the
code before the fix. The generated suite is tests/test_fuzz_cli.py."""
from __future__ import annotations

import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from lnbench import settings as cfg
from lnbench import validate
from lnbench.errors import LnbenchUsageError
from lnbench.measure.protocol import Protocol
from cli_helpers import error_line, invoke, timing
from commands_under_test import VERIFY

TIMING = timing(runs=1, min_warmup_calls=1, target_run_s=0, min_iters=1, max_iters=2)
ABI = ["abi-compare", "--pair", "torch-entry", "--runtime-only", "--device", "cpu", "--in-process", "-P", "1",
       *TIMING, "--op", "fwd", "--metric", "direct", "--shapes", "2x8,2x16", "-q"]
PERF = ["perf", "--device", "cpu", "--backend", "torch", "-P", "1", *TIMING, "--op", "fwd", "--mode", "hot",
        "--shapes", "2x8", "--llc-mib", "0.01", "-q"]
SUBPROCESS_ENV = {**os.environ, "OMP_NUM_THREADS": "1"}


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lnbench.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env={**SUBPROCESS_ENV, **(env or {})})


@pytest.fixture(autouse=True)
def _results(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.delenv("LNBENCH_CONFIG", raising=False)


def config_file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "config.toml"
    path.write_text(text)
    return str(path)


# ---- item 1: $COLUMNS -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("columns", ["", "abc", "80.0", "0", "-3", "٨٠"])
def test_bad_terminal_width_is_ignored(tmp_path, columns):
    out = run_cli(*VERIFY, "--csv", str(tmp_path / "v.csv"), env={"COLUMNS": columns})
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stdout + out.stderr
    assert "28 rows: 28 PASS" in out.stdout


def test_terminal_width_rule():
    assert validate.terminal_width("120") == 120
    for text in (None, "", "abc", "80.0", "0", "19", "٨٠", "99999999999999999999"):
        assert validate.terminal_width(text) is None, text


# ---- item 2: non-finite and huge numbers ----------------------------------------------------------------------

@pytest.mark.parametrize("text,needle", [
    ("[verify.tolerance.atol.f32]\ny = inf\n", "'y'"),
    ("[verify.tolerance.atol.f32]\ndx = 1e300\n", "dx"),
    ("[verify.tolerance]\nk = nan\n", "'k'"),
    ("[verify.tolerance]\nfp32_ulps = -inf\n", "fp32_ulps"),
    ("[verify]\neps = [inf]\n", "eps"),
    ("[perf]\ncold_factor = 1e308\n", "cold_factor"),
    ("[abi_compare]\nplanted_delay_us = inf\n", "planted_delay_us"),
])
def test_non_finite_or_huge_config_numbers_are_exit_2(tmp_path, text, needle):
    line = error_line(invoke(*VERIFY, "--config", config_file(tmp_path, text)))
    assert needle in line


@pytest.mark.parametrize("args,needle", [
    ([*ABI, "--fail-if-slower", "nan"], "--fail-if-slower"),
    ([*ABI, "--fail-if-slower", "inf"], "--fail-if-slower"),
    ([*[a if a != "torch-entry" else "planted-slow" for a in ABI], "--planted-delay-us", "inf"], "--planted-delay-us"),
    ([*PERF, "--cold-factor", "1e308"], "cold_factor"),
    ([*PERF, "--llc-mib", "inf"], "llc_mib"),
    ([*PERF, "--warmup-s", "1e308"], "warmup_s"),
    (["compare", "a.json", "b.json", "--threshold", "nan"], "--threshold"),
])
def test_non_finite_or_huge_flags_are_exit_2(args, needle):
    assert needle in error_line(invoke(*args))


# ---- item 3: empty lists --------------------------------------------------------------------------------------

def test_empty_config_list_is_exit_2(tmp_path):
    line = error_line(invoke("verify", "--device", "cpu", "--backend", "torch", "--shapes", "2x8",
                             "--config", config_file(tmp_path, "[verify]\ndtypes = []\n")))
    assert "dtype" in line


@pytest.mark.parametrize("args,needle", [
    (["verify", "--device", "cpu", "--shapes", "2x8", "--dtype", ""], "dtype"),
    (["verify", "--device", "cpu", "--shapes", "2x8", "--backend", ""], "backend"),
    (["verify", "--device", "cpu", "--shape-set", ""], "shape set"),
    (["perf", "--device", "cpu", "--shapes", "2x8", "--mode", ""], "mode"),
    (["perf", "--device", "cpu", "--shapes", "2x8", "--backend", " "], "backend"),
    (["abi-compare", "--static-only", "--metric", ""], "measurement"),
    (["abi-compare", "--static-only", "--arch", ""], "arch"),
    (["inspect", "--arch", ""], "arch"),
    (["inspect", "--dtype", ""], "dtype"),
])
def test_empty_list_option_is_exit_2(args, needle):
    assert needle in error_line(invoke(*args))


# ---- item 4: repeated shapes ----------------------------------------------------------------------------------

def test_repeated_shapes_are_one_case(tmp_path):
    args = [a if a != "2x8,2x16" else "4x8,4x8" for a in ABI]
    result = invoke(*args, "--csv", str(tmp_path / "a.csv"))
    assert result.exit_code == 0, result.output
    assert "alternation" not in result.output
    frame = pd.read_csv(tmp_path / "a.csv")
    assert list(frame["shape"]) == ["4x8"] and set(frame["status"]) == {"ok"}
    assert cfg.parse_shapes(["4x8,2x16", "4X8"]) == [(4, 8), (2, 16)]


# ---- item 5: [abi_compare] statistics, checked before the timing ----------------------------------------------

@pytest.mark.parametrize("text,needle", [
    ("bootstrap = 0", "bootstrap"), ("confidence = 1.5", "confidence"), ("confidence = nan", "confidence"),
    ("confidence = 0", "confidence"), ("stats_seed = -1", "stats_seed"),
])
def test_abi_statistics_settings_are_checked_before_timing(tmp_path, monkeypatch, text, needle):
    import lnbench.abi.worker_main as worker_main

    def no_timing(*args, **kwargs):
        raise AssertionError("timing ran before the settings were checked")
    monkeypatch.setattr(worker_main, "run_spec", no_timing)
    line = error_line(invoke(*ABI, "--config", config_file(tmp_path, f"[abi_compare]\n{text}\n")))
    assert needle in line


# ---- item 6: output paths, made ready before the work -------------------------------------------------------

def test_longest_legal_name_is_written(tmp_path):
    out = tmp_path / ("a" * 246 + ".csv")
    result = invoke(*VERIFY, "--csv", str(out))
    assert result.exit_code == 0, result.output
    assert len(pd.read_csv(out)) == 28
    assert [p.name for p in tmp_path.iterdir()] == [out.name]       # no temporary file left behind


def test_unwritable_place_is_refused_before_the_work(monkeypatch):
    import lnbench.verify.runner as verify_cmd      # verify's command imports backend_case_rows when it runs

    monkeypatch.setattr(os, "access", lambda *a, **k: True)         # what root gets told about most places
    ran = []
    monkeypatch.setattr(verify_cmd, "backend_case_rows", lambda *a, **k: ran.append(1) or [])
    line = error_line(invoke(*VERIFY, "--csv", "/proc/lnbench-hardening-test.csv"))
    assert "not writable" in line and not ran


def test_temporary_file_exists_before_the_work_and_is_gone_after(tmp_path, monkeypatch):
    import lnbench.verify.runner as verify_cmd      # verify's command imports backend_case_rows when it runs

    seen: list[list[str]] = []
    real = verify_cmd.backend_case_rows

    def spy(*args, **kwargs):       # the outputs' temporary files (their run's claims beside them: output_claims)
        seen.append(sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".lnbench-claim")))
        return real(*args, **kwargs)
    monkeypatch.setattr(verify_cmd, "backend_case_rows", spy)
    result = invoke(*VERIFY, "--csv", str(tmp_path / "v.csv"), "--json", str(tmp_path / "v.json"))
    assert result.exit_code == 0, result.output
    assert len(seen[0]) == 2 and all(n.startswith((".v.csv.", ".v.json.")) and n.endswith(".tmp") for n in seen[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v.csv", "v.json"]


def test_refused_output_leaves_no_temporary_file(tmp_path):
    (tmp_path / "file").write_text("")
    error_line(invoke(*VERIFY, "--csv", str(tmp_path / "v.csv"), "--json", str(tmp_path / "file" / "v.json")))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


# ---- item 7: one file for --csv and --json --------------------------------------------------------------------

def test_same_file_for_csv_and_json_is_exit_2(tmp_path):
    out = tmp_path / "x.out"
    assert "--csv and --json" in error_line(invoke(*VERIFY, "--csv", str(out), "--json", str(out)))
    (tmp_path / "link.json").symlink_to(out)
    assert "same file" in error_line(invoke(*VERIFY, "--csv", str(out), "--json", str(tmp_path / "link.json")))
    assert not out.exists()


# ---- item 8: symlinks and special files -----------------------------------------------------------------------

def test_symlink_is_written_through(tmp_path):
    target, link = tmp_path / "real" / "target.csv", tmp_path / "link.csv"
    target.parent.mkdir()
    target.write_text("old\n")
    link.symlink_to(target)
    result = invoke(*VERIFY, "--csv", str(link))
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(pd.read_csv(target)) == 28


def test_fifo_is_written_in_place(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)      # the CSV (~7 kB) fits in the pipe's buffer
    try:
        result = invoke(*VERIFY, "--csv", str(fifo))
        data = os.read(reader, 1 << 16)
    finally:
        os.close(reader)
    assert result.exit_code == 0, result.output
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert data.startswith(b"backend,case,") and data.count(b"\n") == 29


def test_fifo_without_reader_is_exit_2_not_a_hang(tmp_path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert "no reader" in error_line(invoke(*VERIFY, "--csv", str(fifo)))
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_character_device_is_written_in_place(tmp_path):
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))       # a /dev/null of our own (needs root)
    except PermissionError:
        pytest.skip("creating a device node needs root")
    result = invoke(*VERIFY, "--csv", str(null), "--json", str(null))
    assert result.exit_code == 0, result.output
    assert stat.S_ISCHR(os.stat(null).st_mode)


# ---- item 9: bounded protocol, workers that die ---------------------------------------------------------------

@pytest.mark.parametrize("field,value", [("processes", 65), ("runs", 1001), ("runs", 100_000_000),
                                         ("max_iters", 10**7), ("min_warmup_calls", 10**7), ("warmup_s", 61.0),
                                         ("worker_timeout_s", 1e9)])
def test_protocol_has_upper_bounds(field, value):
    with pytest.raises(LnbenchUsageError, match=field):
        Protocol(**{field: value}).validate()


def test_huge_process_count_is_exit_2_before_anything_runs(tmp_path):
    (tmp_path / "file").write_text("")     # a later usage error: code without the bound stops there, not running
    unwritable = str(tmp_path / "file" / "out.csv")
    assert "processes" in error_line(invoke(*PERF, "-P", "100000000", "--csv", unwritable))
    assert "runs" in error_line(invoke(*ABI, "-R", "100000000", "--csv", unwritable))


def _worker_hook(tmp_path: Path, body: str) -> dict[str, str]:
    """Environment whose worker processes run `body` at start-up (a sitecustomize on PYTHONPATH)."""
    folder = tmp_path / "hook"
    folder.mkdir()
    (folder / "sitecustomize.py").write_text("import os, signal, time\n"
                                             f"if os.environ.get('LNBENCH_WORKER_INDEX') == '0':\n    {body}\n")
    return {"PYTHONPATH": str(folder)}


def test_killed_worker_is_reported_and_the_rest_written(tmp_path):
    args = [a for a in ABI if a != "--in-process"]
    args[args.index("-P") + 1] = "2"
    env = _worker_hook(tmp_path, "os.kill(os.getpid(), signal.SIGKILL)")       # as the OOM killer would
    out = run_cli(*args, "--csv", str(tmp_path / "a.csv"), "--json", str(tmp_path / "a.json"), env=env)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "worker 0 exited with status -9" in out.stdout + out.stderr and "Traceback" not in out.stderr
    payload = json.loads((tmp_path / "a.json").read_text())
    assert payload["worker_problems"] and len(pd.read_csv(tmp_path / "a.csv")) == 2


def test_hung_worker_is_killed_and_the_parent_returns(tmp_path):
    args = [a for a in ABI if a != "--in-process"]
    env = _worker_hook(tmp_path, "time.sleep(3600)")
    # the parent returning at all is the check (its hung worker sleeps an hour); the limit only ends a hung test
    out = run_cli(*args, "--worker-timeout-s", "2", "--csv", str(tmp_path / "a.csv"), env=env, timeout=600)
    assert out.returncode == 1 and "timed out" in out.stdout + out.stderr, out.stdout + out.stderr
    assert set(pd.read_csv(tmp_path / "a.csv")["status"]) == {"error (no worker returned results)"}


# ---- item 10: toolkit folder ----------------------------------------------------------------------------------

@pytest.fixture
def fresh_toolkit():
    """toolkit_info() is cached per process: start and end each test without that cache."""
    from lnbench.flydsl import toolkit

    if toolkit._rocm_root() is not None:
        pytest.skip("a ROCm install provides the toolkit")
    toolkit.toolkit_info.cache_clear()
    yield
    toolkit.toolkit_info.cache_clear()


@pytest.mark.parametrize("var", ["LNBENCH_TOOLKIT_DIR", "XDG_CACHE_HOME"])
@pytest.mark.parametrize("args", [["inspect", "--arch", "gfx942", "--abi", "pointer", "--op", "fwd", "--shapes", "2x8"],
                                  ["abi-compare", "--static-only", "--arch", "gfx942", "--op", "fwd", "--shapes", "2x8"]])
def test_toolkit_folder_that_cannot_be_made_is_one_environment_error(tmp_path, monkeypatch, fresh_toolkit, var, args):
    pytest.importorskip("flydsl")
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.delenv("LNBENCH_TOOLKIT_DIR", raising=False)
    monkeypatch.setenv(var, str(blocker))
    line = error_line(invoke(*args, "-q"))
    assert "toolkit folder" in line and var in line


@pytest.mark.parametrize("args", [["inspect", "--arch", "gfx942", "--abi", "pointer", "--op", "fwd", "--shapes", "2x8"],
                                  ["abi-compare", "--static-only", "--arch", "gfx942", "--op", "fwd", "--shapes", "2x8"]])
def test_no_linker_toolkit_is_one_environment_error_not_compile_errors(monkeypatch, fresh_toolkit, args):
    """No ROCm install and no ziglang package (`pip install .` without [emu]): inspect and abi-compare, whose work
    is compiling, say what to install, where every kernel row said 'FlyDSL compile failed: lld invocation
    failed' (exit 1), as if the kernels were broken."""
    pytest.importorskip("flydsl")
    monkeypatch.setattr("lnbench.flydsl.toolkit.zig_binary", lambda: None)
    line = error_line(invoke(*args, "-q"))
    assert "cannot be compiled here" in line and "pip install 'ziglang" in line


# ---- item 11: limits known before compiling -------------------------------------------------------------------

def test_unsupported_width_is_exit_2_before_compiling():
    line = error_line(invoke("inspect", "--arch", "gfx942", "--abi", "pointer", "--op", "fwd", "--shapes",
                             "1x600000000"))
    assert "unsupported N" in line and "536870911" in line


def test_bogus_dgamma_strategy_is_exit_2(tmp_path):
    line = error_line(invoke("abi-compare", "--static-only", "--arch", "gfx942", "--op", "bwd", "--shapes", "2x8",
                             "--config", config_file(tmp_path, '[abi_compare]\ndgamma_strategy = "bogus"\n')))
    assert "dgamma_strategy" in line and "bogus" in line


# ---- item 12: a backend without a standalone backward ---------------------------------------------------------

def test_backend_without_backward_has_not_run_backward_rows():
    from lnbench.backends.torch_native import TorchBackend
    from lnbench.run.device import parse_device
    from lnbench.verify.cases import build_cases
    from verify_rows import verify_rows
    from lnbench.backends.tolerance import Tolerance

    tol = Tolerance.from_config(cfg.section(cfg.default_config(), "verify"))

    class ForwardOnly(TorchBackend):
        name = "forward-only"
        ops = ("fwd", "fwd+bwd")

        def forward(self, x, weight, bias, eps, store_stats=True):
            return super().forward(x, weight, bias, eps, store_stats)[0], None, None

        def backward(self, dy, x, weight, mean, rstd):
            raise NotImplementedError("no standalone backward")

    cases = build_cases([(2, 8)], ["f32"], [1e-5, 1e-2], 1)
    rows = verify_rows(ForwardOnly(), cases, parse_device("cpu"), tol)
    by_status = {(r.case, r.tensor): r for r in rows}
    assert by_status[("randn", "dx")].status == "not run"
    assert by_status[("randn", "dx")].detail == "no standalone backward"
    assert by_status[("randn", "y")].status == "PASS"
    assert by_status[("randn", "mean")].status == "not run"
    assert by_status[("autograd-3d", "dx")].status == "PASS"
    assert not [r for r in rows if r.status in ("error", "FAIL")]


def test_verify_compile_backend_is_not_an_error(tmp_path):
    from lnbench.backends import probe_backend
    from lnbench.run.device import parse_device

    _, avail = probe_backend("compile", parse_device("cpu"))
    if not avail.runnable:
        pytest.skip(avail.reason)
    from torch._inductor import config as inductor
    # Inductor compiles in this process, as lnbench's perf workers have it: on a cold Inductor cache it would start
    # its pool of compile workers (one per core, each importing torch) for the few kernels compiled here
    with inductor.patch(compile_threads=1):
        result = invoke("verify", "--device", "cpu", "--backend", "compile", "--dtype", "f32", "--shapes", "2x8",
                        "--csv", str(tmp_path / "c.csv"), "-q")
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(tmp_path / "c.csv")
    bwd = frame[(frame["case"] != "autograd-3d") & frame["tensor"].isin(["dx", "dweight", "dbias"])]
    assert len(bwd) == 12 and set(bwd["status"]) == {"not run"} and set(bwd["detail"]) == {"no standalone backward"}
    assert "error" not in set(frame["status"])


# ---- item 13: backend lists -----------------------------------------------------------------------------------

def test_auto_with_named_backend(tmp_path):
    result = invoke("verify", "--device", "cpu", "--backend", "auto,torch", "--dtype", "f32", "--shapes", "2x8",
                    "--csv", str(tmp_path / "v.csv"), "-q")
    assert result.exit_code == 0, result.output
    assert set(pd.read_csv(tmp_path / "v.csv")["backend"]) == {"torch"}


def test_self_test_checks_backend_names():
    assert "unknown backend 'bogus'" in error_line(invoke("verify", "--device", "cpu", "--self-test", "--backend",
                                                          "bogus", "--dtype", "f32", "--shapes", "2x8"))


# ---- item 14: ASCII digits in shapes --------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["٤x٨", "２x８", "4x٨", "4x8\n", "1x" + "9" * 5000])
def test_shapes_take_ascii_digits_only(text):
    with pytest.raises(LnbenchUsageError, match="malformed shape"):
        cfg.parse_shape(text)


def test_unicode_digit_shape_on_the_command_line_is_exit_2():
    assert "malformed shape" in error_line(invoke("verify", "--device", "cpu", "--backend", "torch", "--shapes",
                                                  "٤x٨"))


# ---- the validation layer itself ------------------------------------------------------------------------------

def test_limits_cover_every_number_of_the_packaged_config():
    """Each number of default.toml has a sane range (so a config cannot slip a number past the layer)."""
    def numbers(table, where=""):
        for key, value in table.items():
            if isinstance(value, dict):
                yield from numbers(value, f"{where}.{key}" if where else key)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                yield where, key
    for where, key in numbers(cfg.default_config()):
        # a target's published figures are checked by their own rule (positive and finite: modelled.targets)
        assert key in validate.LIMITS or key in ("seed", "stats_seed") or where.startswith("verify.tolerance.atol") \
            or where.startswith("targets."), key
    validate.config_numbers(cfg.default_config())
    from lnbench.modelled.targets import all_targets
    assert all_targets(cfg.default_config())


def test_number_rule():
    assert validate.number(3, "processes") == 3
    for bad in (0, 65, 3.0, True, "3", None, [3]):
        with pytest.raises(LnbenchUsageError, match="processes"):
            validate.number(bad, "processes")
    for bad in (math.nan, math.inf, -math.inf, 0.0, 1.0, -0.1):
        with pytest.raises(LnbenchUsageError, match="confidence"):
            validate.number(bad, "confidence")
    with pytest.raises(LnbenchUsageError, match="bootstrap"):      # a huge integer never reaches float()
        validate.number(10**400, "bootstrap")

"""abi-compare / inspect / perf: settings that change a measurement are recorded and compared, options that
would do nothing are usage errors, and the metadata says what really ran."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_helpers import ONE_THREAD as ENV, error_line, invoke, timing
from lnbench.run.device import emulator_status
from lnbench.run.metadata import package_version

FAST = ["-P", "1", *timing(runs=2, warmup_s=0.01, target_run_s=0.002), "-q"]
needs_emulator = pytest.mark.skipif(not emulator_status()[0], reason=f"needs the emulator: {emulator_status()[1]}")
needs_flydsl = pytest.mark.skipif(package_version("flydsl") == "not installed", reason="flydsl is not installed")


@pytest.fixture(autouse=True)
def _results_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))
    for name, value in ENV.items():                  # (the runs' torch on one thread)
        monkeypatch.setenv(name, value)


def _with_metadata(src: Path, dst: Path, **changes) -> Path:
    """A copy of a result JSON with some metadata changed (a key set to None is removed: an older file)."""
    data = json.loads(src.read_text())
    for key, value in changes.items():
        if value is None:
            data["metadata"].pop(key)
        else:
            data["metadata"][key] = value
    dst.write_text(json.dumps(data))
    return dst


def _compare(base: Path, new: Path, tmp_path: Path, *extra: str):
    return invoke("compare", str(base), str(new), "--csv", str(tmp_path / "c.csv"), *extra)


# --- 1. settings that change what was measured ------------------------------------------------------------------

@needs_emulator
def test_dgamma_strategy_is_recorded_and_compare_refuses_another(tmp_path):
    config = tmp_path / "atomic.toml"
    config.write_text('[abi_compare]\ndgamma_strategy = "atomic"\n')
    atomic = tmp_path / "at.json"
    result = invoke("abi-compare", "--config", str(config), "--device", "null", "--runtime-only", "--shapes",
                    "2x64,3x257", "--dtype", "bf16", "--op", "bwd", "--metric", "direct", *FAST, "--json", str(atomic))
    assert result.exit_code == 0, result.output
    meta = json.loads(atomic.read_text())["metadata"]
    assert meta["dgamma_strategy"] == "atomic" and meta["lnbench_command"] == "abi-compare"
    deterministic = _with_metadata(atomic, tmp_path / "det.json", dgamma_strategy="deterministic")
    error_line(_compare(deterministic, atomic, tmp_path),
                     "protocol differs (dgamma_strategy deterministic vs atomic)")
    assert _compare(deterministic, atomic, tmp_path, "--force").exit_code != 2
    older = _with_metadata(atomic, tmp_path / "old.json", dgamma_strategy=None)     # a file from before: unknown
    assert _compare(older, atomic, tmp_path).exit_code == 0


def _planted(tmp_path: Path, *extra: str):
    out = tmp_path / "planted.json"
    result = invoke("abi-compare", "--pair", "planted-slow", "--device", "cpu", "--in-process", "--runtime-only",
                    "--shapes", "4x32,4x64", "--op", "fwd", "--metric", "direct", *FAST, *extra, "--json", str(out))
    return result, out


def test_planted_delay_is_recorded_and_compare_refuses_another(tmp_path):
    result, out = _planted(tmp_path, "--planted-delay-us", "5")
    assert result.exit_code == 0, result.output
    meta = json.loads(out.read_text())["metadata"]
    assert meta["planted_delay_us"] == 5.0 and meta["lnbench_command"] == "abi-compare"
    other = _with_metadata(out, tmp_path / "other.json", planted_delay_us=50.0)
    error_line(_compare(out, other, tmp_path), "protocol differs (planted_delay_us 5.0 vs 50.0)")


# --- 2. options that would do nothing ---------------------------------------------------------------------------

@pytest.mark.parametrize("args, fragments", [
    (["abi-compare", "--pair", "flydsl", "--planted-delay-us", "5"], ["--planted-delay-us", "planted-slow"]),
    (["abi-compare", "--pair", "torch-entry", "--planted-delay-us", "5"], ["--planted-delay-us", "planted-slow"]),
    (["abi-compare", "--static-only", "--fail-if-slower", "5"], ["--fail-if-slower", "--static-only"]),
    (["abi-compare", "--static-only", "--pair", "planted-slow", "--planted-delay-us", "5"],
     ["--planted-delay-us", "--static-only"]),
    (["abi-compare", "--runtime-only", "--arch", "gfx950"], ["--arch", "--runtime-only"]),
    (["abi-compare", "--runtime-only", "--no-execute"], ["--no-execute does nothing with --runtime-only"]),
    (["abi-compare", "--runtime-only", "--execute"], ["--execute does nothing with --runtime-only"]),
    (["abi-compare", "--static-only", "-P", "3"], ["-P does nothing with --static-only"]),
    (["abi-compare", "--static-only", "--runs", "9"], ["-R does nothing with --static-only"]),
    (["abi-compare", "--static-only", "--warmup-s", "1"], ["--warmup-s does nothing with --static-only"]),
    (["abi-compare", "--static-only", "--metric", "device"], ["--metric does nothing with --static-only"]),
    (["abi-compare", "--static-only", "--seed", "7"], ["--seed does nothing with --static-only"]),
    (["abi-compare", "--static-only", "--devices", "0"], ["--devices"]),
    (["inspect", "--dgamma", "atomic", "--op", "fwd"], ["--dgamma", "bwd"]),
    (["inspect", "--dgamma", "deterministic", "--op", "fwd,fwd-nostats"], ["--dgamma", "bwd"]),
    # flydsl-atomic was inspected atomic, flydsl-tensor in the Tensor ABI, whatever these asked
    (["inspect", "--backend", "flydsl-atomic", "--dgamma", "deterministic", "--op", "bwd", "--arch", "gfx942",
      "--shapes", "1x64", "--no-csv"], ["--dgamma", "atomic"]),
    (["inspect", "--backend", "flydsl-tensor", "--abi", "pointer", "--op", "fwd", "--arch", "gfx942", "--shapes",
      "1x64", "--no-csv"], ["--abi", "flydsl-tensor is the Tensor ABI"]),
])
def test_options_that_would_do_nothing_are_usage_errors(args, fragments):
    error_line(invoke(*args), *fragments)


def test_config_values_never_count_as_given_options(tmp_path):
    """`planted_delay_us` in the config with another pair is no usage error (only the flag is)."""
    config = tmp_path / "c.toml"
    config.write_text("[abi_compare]\nplanted_delay_us = 7\n")
    result = invoke("abi-compare", "--config", str(config), "--pair", "torch-entry", "--device", "cpu", "--in-process",
                    "--runtime-only", "--shapes", "4x32,4x64", "--op", "fwd", "--metric", "direct", *FAST,
                    "--json", str(tmp_path / "t.json"))
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / "t.json").read_text())["metadata"]["planted_delay_us"] is None


@needs_flydsl
def test_inspect_dgamma_with_bwd_is_fine(tmp_path):
    result = invoke("inspect", "--dgamma", "atomic", "--op", "fwd,bwd", "--arch", "gfx942", "--abi", "pointer",
                    "--shapes", "1x64", "-q", "--csv", str(tmp_path / "i.csv"))
    assert result.exit_code == 0, result.output


# --- 3. metadata says what ran --------------------------------------------------------------------------------

def test_static_only_records_no_protocol_and_the_compile_only_device(tmp_path):
    out = tmp_path / "s.json"
    result = invoke("abi-compare", "--static-only", "--arch", "gfx942", "--op", "fwd", "--dtype", "bf16",
                    "--shapes", "2x64", "-q", "--json", str(out))
    assert result.exit_code == 0, result.output
    meta = json.loads(out.read_text())["metadata"]
    assert not {"processes", "runs", "warmup_s", "target_run_s", "iters_clamp", "bootstrap"} & set(meta)
    assert meta["device"] == "compile-only" and meta["lnbench_command"] == "abi-compare"
    executed = package_version("flydsl") != "not installed" and emulator_status()[0]
    assert meta["static_executed_on"] == ("emu:gfx942" if executed else None)


def test_perf_metadata_names_the_command(tmp_path):
    out = tmp_path / "p.json"
    result = invoke("perf", "--device", "cpu", "--dtype", "f32", "--backend", "torch", "--shapes", "8x64", "--op",
                    "fwd", "--mode", "hot", "--llc-mib", "0.05", *FAST, "--json", str(out))
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["metadata"]["lnbench_command"] == "perf"


@needs_flydsl
@needs_emulator
def test_inspect_execute_metadata_names_the_emulated_device(tmp_path):
    out = tmp_path / "i.json"
    result = invoke("inspect", "--execute", "--arch", "gfx942", "--abi", "pointer", "--op", "fwd", "--shapes", "2x64",
                    "-q", "--csv", str(tmp_path / "i.csv"), "--json", str(out))
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["metadata"]["device"] == "compile-only" and data["metadata"]["executed_on"] == "emu:gfx942"
    executed = [r for r in data["data"] if r.get("part") == "executed"]
    assert executed and {r["shape"] for r in executed} == {"2x64"}    # the full M×N of --shapes


# --- 4. too few runs for a verdict ------------------------------------------------------------------------------

def test_a_planted_slowdown_timed_with_too_few_runs_gets_no_verdict_and_fails_no_gate(tmp_path):
    """P = 1, R = 2: 2 runs against 2 cannot reach p < 0.33, so a 200 µs planted delay is `too few runs`, not
    `slower`, and --fail-if-slower does not fail on it; the command says to time more runs."""
    result, out = _planted(tmp_path, "--planted-delay-us", "200", "--fail-if-slower", "5")
    assert result.exit_code == 0, result.output
    rows = [r for r in json.loads(out.read_text())["data"] if r.get("part") == "runtime" and r["status"] == "ok"]
    assert rows and {r["verdict"] for r in rows} == {"too few runs"}
    assert all(r["speedup"] < 0.9 for r in rows)                       # the delay is there; the verdict waits
    assert "have too few runs for any difference to be significant" in result.output


def test_too_few_is_decided_by_the_smallest_attainable_p():
    from lnbench.measure import stats
    from lnbench.results.verdicts import Verdict
    assert stats.too_few(2, 2, 0.95) and stats.too_few(3, 3, 0.95) and not stats.too_few(4, 4, 0.95)
    assert stats.too_few(4, 4, 0.99) and not stats.too_few(15, 15, 0.99)
    few = stats.paired_bootstrap([[10.0, 10.1]], [[20.0, 20.2]])
    many = stats.paired_bootstrap([[10.0, 10.1, 10.2, 9.9, 10.05]], [[20.0, 20.2, 20.1, 19.9, 20.05]])
    assert few.verdict == Verdict.TOO_FEW and many.verdict == Verdict.SLOWER

"""`lnbench abi-compare`: static rows, usage errors, exit codes, CSV schema, the worker path, ROCm runtime."""
from __future__ import annotations

import json
from types import SimpleNamespace

import pandas as pd
import pytest
from click.testing import CliRunner

from cli_helpers import ABI_TIMING as FAST, error_line
from lnbench.abi import static
from lnbench.abi import workers
from lnbench.abi.command import abi_compare_command
from lnbench.abi.workers import not_run_status, probe_shapes
from lnbench.run.device import emu_device, null_device, parse_device
from lnbench.machine.rocm import has_rocm_gpu
from virtual_clock import VirtualClock


def _invoke(args: list[str]):
    return CliRunner().invoke(abi_compare_command, args, catch_exceptions=False)


def _facts(abi: str, kernarg: int, slots: int, args: int, name: str = "ln_fwd_bf16_n64"):
    return SimpleNamespace(kernel_name=f"{name}_{abi}", kernarg_bytes=kernarg, launcher_slots=slots,
                           kernel_args=[(8 * i, 8, "global_buffer") for i in range(args)], vgpr=40, sgpr=30,
                           vgpr_spills=0, sgpr_spills=0, lds_bytes=0, scratch_bytes=0, instruction_count=300)


def test_compare_facts_rows_and_ratios():
    rows = static.compare_facts([_facts("tensor", 112, 14, 13)], [_facts("pointer", 52, 8, 7)])
    assert len(rows) == 1
    row = rows[0]
    assert row.kernel == "ln_fwd"
    assert (row.kernarg_tensor, row.kernarg_pointer) == (112, 52)
    assert row.kernarg_ratio == pytest.approx(52 / 112)
    assert row.slots_ratio == pytest.approx(8 / 14)
    assert (row.args_tensor, row.args_pointer) == (13, 7)
    with pytest.raises(ValueError):
        static.compare_facts([_facts("tensor", 1, 1, 1)], [])


def test_static_rows_report_errors_and_missing_flydsl(monkeypatch):
    def facts_fn(op, dtype, n, abi, arch, eps, dgamma_strategy):
        if n == 7:
            raise RuntimeError("LLVM error: boom\nmore")
        return [_facts(abi, 112 if abi == "tensor" else 52, 14 if abi == "tensor" else 8, 3)]
    rows = static.static_rows(["gfx942"], ["fwd"], ["bf16"], [64, 7], facts_fn=facts_fn)
    assert [r.status for r in rows] == ["ok", "error"]
    assert rows[1].detail == "RuntimeError: LLVM error: boom"
    monkeypatch.setattr(static, "flydsl_installed", lambda: False)
    rows = static.static_rows(["gfx942", "gfx950"], ["fwd", "bwd"], ["bf16"], [1024])
    assert len(rows) == 4 and {r.status for r in rows} == {"not run (flydsl not installed)"}


def test_static_real_compile_pointer_smaller_than_tensor():
    pytest.importorskip("flydsl")
    from lnbench.flydsl.toolkit import toolkit_info
    if toolkit_info().kind == "missing":
        pytest.skip("no linker toolkit (install ziglang)")
    rows = static.static_rows(["gfx942"], ["fwd", "bwd"], ["bf16"], [1024])
    assert all(r.status == "ok" for r in rows), rows
    for row in rows:
        assert row.kernarg_pointer < row.kernarg_tensor
        assert row.slots_pointer < row.slots_tensor
        assert row.args_pointer < row.args_tensor
        assert row.spills_pointer == 0 and row.scratch_pointer == 0


@pytest.mark.parametrize("args, needle", [
    (["--op", "fwd,nope"], "unknown op 'nope'"),
    (["--shapes", "12xq"], "malformed shape"),
    (["--static-only", "--runtime-only"], "exclude each other"),
    (["--fail-if-slower", "-1"], "--fail-if-slower"),
    (["-P", "0", "--runtime-only"], "processes"),
    (["--metric", "kernel"], "unknown measurement"),
    (["--arch", "sm90", "--static-only"], "unknown arch"),
    (["--dtype", "int8"], "unknown dtype"),
])
def test_usage_errors_exit_2_one_line(args, needle, results_dir):
    error_line(_invoke(["--pair", "torch-entry", "--device", "cpu", *args]), needle)


def test_flydsl_runtime_not_run_on_the_cpu_device(tmp_path, results_dir, monkeypatch):
    """An explicit --device cpu cannot launch FlyDSL kernels (the default without a ROCm GPU is the null device:
    tests/test_null_device.py)."""
    if has_rocm_gpu():
        pytest.skip("this machine has a ROCm GPU")
    monkeypatch.setattr(static, "flydsl_installed", lambda: False)   # keep the static part instant
    csv, js = tmp_path / "a.csv", tmp_path / "a.json"
    result = _invoke(["--pair", "flydsl", "--device", "cpu", "--shapes", "32x1024,4096x4096", "--op", "fwd",
                      "--csv", str(csv), "--json", str(js)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(csv)
    runtime = frame[frame["part"] == "runtime"]
    assert len(runtime) == 2 * 3 and set(runtime["status"]) == {"not run (no ROCm GPU)"}
    assert set(frame[frame["part"] == "static"]["status"]) == {"not run (flydsl not installed)"}
    payload = json.loads(js.read_text())
    assert payload["metadata"]["pair"] == "flydsl" and len(payload["data"]) == len(frame)


def test_not_run_status_says_which_measurements_no_worker_can_take_here(monkeypatch):
    monkeypatch.setattr(workers, "flydsl_installed", lambda: True)
    null, cpu = null_device(), parse_device("cpu")
    assert [not_run_status("flydsl", null, m) for m in ("direct", "wrapper", "device")] == \
        ["", "", "not run (null device: no device time)"]                     # host cost only
    assert {not_run_status(p, emu_device(), m) for p in ("flydsl", "torch-entry") for m in ("direct", "device")} == \
        {"not run (emulated device: no timing)"}
    assert not_run_status("flydsl", cpu, "direct") == "not run (no ROCm GPU)"
    assert not_run_status("torch-entry", cpu, "device") == ""       # its workers say: not measured on the CPU
    monkeypatch.setattr(workers, "flydsl_installed", lambda: False)
    assert not_run_status("flydsl", null, "direct") == "not run (flydsl not installed)"

def test_fail_if_slower_with_planted_slow_pair(tmp_path, results_dir, monkeypatch):
    """The gate on a clock that only the calls move (the workers run in this process): every entry call costs
    100 µs and the planted spin 300 µs more, so the Pointer side is 300 % slower on any machine; the gate fails
    the run above PCT below that, and not at PCT above it."""
    clock = VirtualClock.install(monkeypatch)
    clock.plant_abi_costs(monkeypatch, call_us=100.0)
    base = ["--pair", "planted-slow", "--runtime-only", "--device", "cpu", "--in-process", "-P", "2",
            "--shapes", "4x32,4x64", "--op", "fwd", "--metric", "direct", "--planted-delay-us", "300", *FAST]
    failing = _invoke([*base, "--fail-if-slower", "299", "--csv", str(tmp_path / "slow.csv")])
    assert failing.exit_code == 1, failing.output
    assert "--fail-if-slower 299: Pointer side 300.0% slower" in failing.output, failing.output
    frame = pd.read_csv(tmp_path / "slow.csv")
    assert set(frame["verdict"]) == {"SLOWER"} and list(frame["slowdown_pct"]) == pytest.approx([300.0, 300.0])
    passing = _invoke([*base, "--fail-if-slower", "301", "--csv", str(tmp_path / "ok.csv")])
    assert passing.exit_code == 0, passing.output
    no_gate = _invoke([*base, "--csv", str(tmp_path / "nogate.csv")])
    assert no_gate.exit_code == 0


RUNTIME_COLUMNS = {"part", "pair", "op", "dtype", "shape", "M", "N", "metric", "tensor_label", "pointer_label",
                   "tensor_us", "tensor_min_us", "tensor_max_us", "pointer_us", "pointer_min_us", "pointer_max_us",
                   "tensor_calls_per_s", "pointer_calls_per_s", "speedup", "ci_low", "ci_high", "confidence",
                   "mw_p", "verdict", "iters", "workers", "runs", "status", "device_name", "timestamp",
                   "torch_version", "processes"}


def test_worker_processes_csv_schema(tmp_path, results_dir):
    """The real worker path (lnbench.run.workers subprocesses), torch-entry on the CPU."""
    csv, js = tmp_path / "w.csv", tmp_path / "w.json"
    result = _invoke(["--pair", "torch-entry", "--runtime-only", "--device", "cpu", "-P", "2",
                      "--shapes", "8x64,16x128", "--op", "fwd", "--metric", "direct,wrapper,device", *FAST,
                      "--csv", str(csv), "--json", str(js)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(csv)
    assert RUNTIME_COLUMNS <= set(frame.columns)
    ok = frame[frame["status"] == "ok"]
    assert len(ok) == 4 and set(ok["workers"]) == {2} and set(ok["runs"]) == {3}
    assert (ok["ci_low"] <= ok["speedup"]).all() and (ok["speedup"] <= ok["ci_high"]).all()
    device_rows = frame[frame["metric"] == "device"]
    assert set(device_rows["status"]) == {"not measured (no device events on the CPU)"}
    payload = json.loads(js.read_text())
    assert len(payload["workers"]) == 2 and payload["worker_problems"] == []
    assert all(c["ok"] for c in payload["checks"]) and len(payload["checks"]) == 2 * (2 * 2 + 2)


def test_probe_shape_added_when_all_shapes_share_n():
    assert probe_shapes([(32, 1024), (64, 2048)]) == []
    (m, n), = probe_shapes([(4096, 4096), (32, 4096)])
    assert n != 4096


@pytest.mark.rocm
@pytest.mark.skipif(not has_rocm_gpu(), reason="times kernels: needs a ROCm GPU (the emulated device does not time)")
def test_flydsl_runtime_on_rocm(tmp_path, results_dir):
    csv = tmp_path / "r.csv"
    result = _invoke(["--pair", "flydsl", "--runtime-only", "-P", "2", "--shapes", "32x1024,256x2048",
                      "--op", "fwd,bwd", *FAST, "--csv", str(csv)])
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(csv)
    assert set(frame["status"]) <= {"ok", "not measured (no direct backward entry in lnbench.flydsl.launch)"}
    assert (frame["status"] == "ok").any()

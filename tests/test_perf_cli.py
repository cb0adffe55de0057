"""`lnbench perf` / `lnbench peak` end to end on the CPU through click's CliRunner (real worker processes)."""
from __future__ import annotations

import json
import statistics

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from cli_helpers import ONE_THREAD as ENV, error_line, timing
from lnbench.run.metadata import device_name
from lnbench.perf.command import peak_command, perf_command

TINY = ["--device", "cpu", "--dtype", "f32", *timing(), "--llc-mib", "0.05", "-q"]
ROW_COLUMNS = {"row_kind", "backend", "op", "dtype", "shape", "M", "N", "mode", "worker", "order", "iters", "runs",
               "run_us", "median_us", "min_us", "max_us", "spread_pct", "gbps", "pct_peak", "above_peak", "speedup",
               "nbytes", "sets", "status", "detail", "kernel_us", "kernel_min_us", "kernel_max_us", "kernel_run_us",
               "kernels_per_call", "kernel_names", "gap_us", "kernel_window_us", "kernel_status", "kernel_note",
               "headline"}
META_COLUMNS = {"P", "R", "I_min", "I_max", "modes", "driver", "clocks_before", "device_name",
                "torch_version", "timestamp", "peak_gbps"}


@pytest.fixture(autouse=True)
def _results_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("LNBENCH_RESULTS_DIR", str(tmp_path / "results"))


@pytest.mark.parametrize("args, fragment", [
    (["-P", "0"], "processes"), (["-R", "0"], "runs"), (["--warmup-s", "-1"], "warmup_s"),
    (["--target-run-s", "-0.5"], "target_run_s"), (["--worker-timeout-s", "0"], "worker_timeout_s"),
    (["--min-iters", "50", "--max-iters", "10"], "larger than"), (["--shapes", "12x"], "malformed shape"),
    (["--shapes", "0x8"], "malformed shape"), (["--mode", "warm"], "unknown mode"), (["--op", "sideways"], "unknown op"),
    (["--backend", "nope"], "unknown backend"), (["--dtype", "f8"], "unknown dtype"), (["--eps", "-1"], "eps"),
    (["--timer", "kernel"], "--timer kernel cannot run on cpu: no GPU activity on the cpu device"),
    (["--timer", "kernel", "--no-kernel-timer"], "drop --no-kernel-timer"),
])
def test_usage_errors_exit_2_with_one_line(args, fragment):
    result = CliRunner().invoke(perf_command, ["--device", "cpu", *args])
    error_line(result, fragment)
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.fixture(scope="module")
def perf_run(tmp_path_factory):
    """One small real run: torch (2 ops × 2 shapes × 2 modes) + liger (not installed: not run), P = 2."""
    out = tmp_path_factory.mktemp("perf")
    peak = out / "peak.json"
    peak.write_text(json.dumps({device_name(torch.device("cpu")): {"gbps": 0.001, "timestamp": "t"}}))
    args = [*TINY, "--backend", "torch,liger", "--shapes", "8x64,3x100", "--op", "fwd,bwd", "--mode", "hot,cold",
            "-P", "2", "--peak-file", str(peak), "--csv", str(out / "p.csv"), "--json", str(out / "p.json"),
            "--kernel-timer"]
    result = CliRunner().invoke(perf_command, args, env=ENV)
    return result, pd.read_csv(out / "p.csv"), json.loads((out / "p.json").read_text())


def test_perf_runs_end_to_end_and_exits_0(perf_run):
    result, frame, data = perf_run
    assert result.exit_code == 0, result.output
    cases = frame[frame.row_kind == "aggregate"]
    assert len(cases) == 16 and cases.status.value_counts().to_dict() == {"not run": 8, "ok": 8}
    assert len(data["workers"]) == 2 and all(worker["ok"] for worker in data["workers"])


def _liger_on_cpu_reason() -> str:
    """Why liger cannot run on the CPU on this host (not installed, or installed but needing a GPU)."""
    from lnbench.backends import probe_backend
    from lnbench.run.device import parse_device

    return probe_backend("liger", parse_device("cpu"))[1].reason


def test_csv_schema_and_row_counts(perf_run):
    _, frame, data = perf_run
    assert ROW_COLUMNS <= set(frame.columns) and META_COLUMNS <= set(frame.columns)
    workers = frame[frame.row_kind == "worker"]
    agg = frame[frame.row_kind == "aggregate"]
    assert len(workers) == 8 * 2 and len(agg) == 16 and len(frame) == 32  # case × worker + aggregate
    assert set(workers.worker.astype(int)) == {0, 1}  # worker count honoured
    assert (workers.groupby(["backend", "op", "shape", "mode"]).size() == 2).all()
    assert set(agg[agg.backend == "liger"].status) == {"not run"}
    assert agg[agg.backend == "liger"].detail.str.contains(_liger_on_cpu_reason(), regex=False).all()
    assert set(workers.status) == {"ok"} and (workers.runs == 3).all()
    assert workers.run_us.map(lambda s: len(s.split(";"))).eq(3).all()  # raw run values kept, joined in the CSV
    assert workers.worker.eq(workers.worker.round()).all() and agg.worker.isna().all()  # an index; empty for aggregates
    assert ((workers.iters >= 3) & (workers.iters <= 20)).all()
    assert set(frame.P) == {2} and set(frame.R) == {3} and set(frame.I_min) == {3}
    assert len(data["data"]) == 32 and len(data["workers"]) == 2 and data["protocol"]["processes"] == 2
    assert data["metadata"]["driver"] == "unavailable" and data["metadata"]["peak_gbps"] == 0.001


def test_kernel_columns_say_na_with_the_reason_on_the_cpu(perf_run):
    _, frame, data = perf_run
    ran = frame[frame.status == "ok"]
    assert len(ran) == 8 * 2 + 8
    assert (ran.kernel_status == "n/a (no GPU activity on the cpu device)").all()
    assert ran.kernel_us.isna().all() and ran.gap_us.isna().all() and ran.kernels_per_call.isna().all()  # never 0
    assert set(frame.headline) == {"stream"}
    rows = [r for r in data["data"] if r["status"] == "ok"]
    assert all(r["kernel_us"] is None and r["kernel_names"] == "{}" for r in rows)
    assert data["metadata"]["kernel_timer"] == "n/a (no GPU activity on the cpu device)"
    assert data["protocol"]["kernel_timer"] is True


def test_the_kernel_timer_is_off_by_default_and_on_with_timer_kernel(tmp_path):
    base = [*TINY, "--backend", "torch", "--shapes", "8x64", "--op", "fwd", "--mode", "hot", "-P", "1"]
    plain = CliRunner().invoke(perf_command, [*base, "--json", str(tmp_path / "a.json")], env=ENV)
    assert plain.exit_code == 0, plain.output
    data = json.loads((tmp_path / "a.json").read_text())
    assert data["protocol"]["kernel_timer"] is False and data["metadata"]["kernel_timer"] == "off"
    assert {r["kernel_status"] for r in data["data"]} == {"n/a (no GPU activity on the cpu device)"}  # not "off"
    assert "--kernel-timer turns it on" not in plain.output
    kernel = CliRunner().invoke(perf_command, [*base, "--timer", "kernel"], env=ENV)
    assert kernel.exit_code == 2 and "--timer kernel cannot run on cpu" in kernel.output   # on, then refused here


def test_aggregate_is_median_of_worker_medians(perf_run):
    _, frame, _ = perf_run
    for (backend, op, shape, mode), group in frame[frame.backend == "torch"].groupby(["backend", "op", "shape", "mode"]):
        worker_medians = group[group.row_kind == "worker"].median_us.tolist()
        for _, row in group[group.row_kind == "worker"].iterrows():
            assert row.median_us == pytest.approx(statistics.median(float(v) for v in row.run_us.split(";")), rel=1e-3, abs=1e-3)
        agg = group[group.row_kind == "aggregate"].iloc[0]
        assert agg.median_us == pytest.approx(statistics.median(worker_medians))
        assert (agg.min_us, agg.max_us) == (pytest.approx(min(worker_medians)), pytest.approx(max(worker_medians)))
        assert agg["gbps"] == pytest.approx(agg["nbytes"] / (agg["median_us"] * 1e-6) / 1e9)  # (Series.nbytes is pandas')
        assert agg.pct_peak == pytest.approx(agg.gbps / 0.001 * 100) and bool(agg.above_peak)  # tiny fake peak
        assert agg.speedup == pytest.approx(1.0)
        if mode == "cold":
            assert agg.sets >= 2


def test_crashing_worker_gives_exit_1_and_everything_else_is_written(tmp_path):
    args = [*TINY, "--backend", "torch", "--shapes", "4x32", "--op", "fwd,bwd", "--mode", "hot", "-P", "2",
            "--csv", str(tmp_path / "c.csv")]
    result = CliRunner().invoke(perf_command, args, env={**ENV, "LNBENCH_PERF_FAULT": "1:crash:1"})
    assert result.exit_code == 1, result.output
    assert "worker 1 exited with status 3" in result.output and "lnbench test fault" in result.output
    frame = pd.read_csv(tmp_path / "c.csv")
    assert len(frame) == 2 * (2 + 1)
    w1 = frame[(frame.row_kind == "worker") & (frame.worker == 1)].set_index("op")
    assert w1.loc["fwd", "status"] == "ok" and w1.loc["bwd", "status"] == "error"
    assert "status 3" in w1.loc["bwd", "detail"]
    agg = frame[frame.row_kind == "aggregate"].set_index("op")
    assert agg.loc["fwd", "status"] == "ok" and agg.loc["bwd", "status"] == "partial (1/2 workers)"
    assert agg.loc["bwd", "median_us"] > 0  # the surviving worker's result is still aggregated


def test_peak_measures_and_caches_by_device_name(tmp_path, monkeypatch):
    from lnbench.perf import workloads
    monkeypatch.setattr(workloads, "llc_bytes", lambda device: (1 << 20, "test"))   # a 4 MiB copy is then allowed
    path = tmp_path / "peak.json"
    result = CliRunner().invoke(peak_command, ["--device", "cpu", "--size-mib", "4", "--runs", "2",
                                               "--peak-file", str(path)])
    assert result.exit_code == 0, result.output
    record = json.loads(path.read_text())[device_name(torch.device("cpu"))]
    assert record["gbps"] > 0 and record["bytes"] == 2 * 4 * (1 << 20) and len(record["runs_us"]) == 2
    bad = CliRunner().invoke(peak_command, ["--device", "cpu", "--runs", "0", "--peak-file", str(path)])
    assert bad.exit_code == 2 and "runs must be" in bad.output


def test_a_baseline_that_is_not_timed_is_said_not_left_silent(tmp_path):
    args = [*[a for a in TINY if a != "-q"], "--backend", "torch", "--baseline", "liger", "--shapes", "8x64", "--op", "fwd", "--mode", "hot",
            "-P", "1", "--json", str(tmp_path / "b.json")]
    result = CliRunner().invoke(perf_command, args, env=ENV)
    assert result.exit_code == 0, result.output
    assert "speed-up left empty: the baseline liger is not among the timed backends (torch)" in result.output
    rows = json.loads((tmp_path / "b.json").read_text())["data"]
    assert all(r["speedup"] is None for r in rows if r["row_kind"] == "aggregate")       # empty, not a number


def test_peak_refuses_a_copy_that_fits_in_the_last_level_cache(tmp_path):
    from lnbench.perf.workloads import llc_bytes
    llc_mib = llc_bytes(torch.device("cpu"))[0] / (1 << 20)
    path = tmp_path / "peak.json"
    result = CliRunner().invoke(peak_command, ["--device", "cpu", "--size-mib", f"{llc_mib / 4:g}", "--runs", "2",
                                               "--peak-file", str(path)])
    assert result.exit_code == 2 and "would cache a cache speed as the peak" in result.output
    assert f"use at least {2 * llc_mib:g} MiB" in result.output and not path.exists()

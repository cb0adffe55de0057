"""CPU unit tests of the perf protocol pieces that need no subprocess: validation, byte model, timing,
workloads, case order and aggregation."""
from __future__ import annotations

import json
import math

import pytest
import torch

from lnbench.backends import get_backend
from lnbench.errors import LnbenchUsageError
from lnbench.perf.aggregate import build_rows, failed
from lnbench.perf.bytes_model import gbps, op_bytes
from lnbench.perf.cases import PerfCase, build_cases, worker_order
from lnbench.perf.protocol import PerfProtocol
from lnbench.measure.timing import choose_iters, measure
from lnbench.run.workers import WorkerResult
from lnbench.perf.workloads import build_workload, cold_sets
from virtual_clock import VirtualClock

CPU = torch.device("cpu")


# --- protocol validation -------------------------------------------------------------------------------

@pytest.mark.parametrize("changes, fragment", [
    ({"processes": 0}, "processes"), ({"runs": 0}, "runs"), ({"runs": -3}, "runs"),
    ({"warmup_s": -0.1}, "warmup_s"), ({"target_run_s": -1.0}, "target_run_s"),
    ({"worker_timeout_s": 0}, "worker_timeout_s"), ({"min_iters": 10, "max_iters": 5}, "larger than"),
    ({"min_warmup_calls": -1}, "min_warmup_calls"), ({"modes": ("warm",)}, "unknown mode"),
    ({"ops": ("fwd", "sideways")}, "unknown op"), ({"warmup_s": float("nan")}, "warmup_s"),
])
def test_protocol_rejects_malformed_values(changes, fragment):
    with pytest.raises(LnbenchUsageError, match=fragment):
        PerfProtocol(**changes).validate()


def test_protocol_from_table_applies_overrides_and_keeps_defaults():
    proto = PerfProtocol.from_table({"processes": 4, "runs": 7, "modes": ["hot"]}, runs=2, warmup_s=None)
    assert (proto.processes, proto.runs, proto.modes, proto.warmup_s) == (4, 2, ("hot",), 0.2)
    assert proto.timing_kwargs()["runs"] == 2


def test_config_defaults_match_the_issue():
    from lnbench.settings import load_config, section, shape_set
    table = section(load_config(), "perf")
    proto = PerfProtocol.from_table(table)
    assert (proto.processes, proto.runs, proto.min_iters, proto.max_iters) == (3, 5, 150, 1000)
    assert proto.warmup_s >= 0.2 and proto.min_warmup_calls >= 30
    assert table["baseline"] == "torch"
    assert (4096, 4096) in shape_set(load_config(), "perf")


# --- byte model, checked by hand ---------------------------------------------------------------------

def test_byte_model_by_hand_small():
    # m=3, n=5, fp32 (4 B): x 60 + y 60 + γ,β 40 + mean,rstd 24
    assert op_bytes("fwd", 3, 5, 4) == 60 + 60 + 40 + 24
    assert op_bytes("fwd-nostats", 3, 5, 4) == 60 + 60 + 40
    # bwd: x, dy, dx 3×60 + γ, dγ, dβ 3×20 + mean, rstd 24
    assert op_bytes("bwd", 3, 5, 4) == 180 + 60 + 24
    assert op_bytes("bwd", 3, 5, 4, workspace_bytes=100) == 180 + 60 + 24 + 100
    assert op_bytes("fwd+bwd", 3, 5, 4) == (60 + 60 + 40 + 24) + (180 + 60 + 24)
    assert op_bytes("fwd", 3, 5, 4, stats=False) == op_bytes("fwd-nostats", 3, 5, 4)


def test_byte_model_by_hand_4096_bf16():
    mn = 4096 * 4096
    assert op_bytes("fwd", 4096, 4096, 2) == 2 * mn * 2 + 2 * 4096 * 2 + 2 * 4096 * 4 == 67_158_016
    assert op_bytes("bwd", 4096, 4096, 2) == 3 * mn * 2 + 3 * 4096 * 2 + 2 * 4096 * 4 == 100_720_640
    assert gbps(67_158_016, 20.0) == pytest.approx(67_158_016 / 20e-6 / 1e9)
    assert math.isnan(gbps(1000, 0.0))


# --- timing ----------------------------------------------------------------------------------------------

def test_choose_iters_clamps():
    assert choose_iters(1e-6, 0.02, 150, 1000) == 1000
    assert choose_iters(1e-3, 0.02, 150, 1000, max_run_s=1.0) == 150
    assert choose_iters(1e-3, 0.02, 150, 1000) == 100         # the floor gives way at 0.1 s runs
    assert choose_iters(5e-5, 0.02, 150, 1000) == 400


def _costing(clock: VirtualClock, us: float):
    """A call that takes `us` µs on the test's clock; the list counts the calls made."""
    calls: list[int] = []

    def fn():
        calls.append(1)
        clock.spend(us)
    return fn, calls


def test_measure_cpu_honours_runs_warmup_and_iters(monkeypatch):
    """On a clock that only the calls move (200 µs each), the warm-up, the loop count and every run are the
    protocol's arithmetic on that cost, whatever this machine's speed."""
    clock = VirtualClock.install(monkeypatch)
    fn, calls = _costing(clock, 200)
    m = measure(fn, CPU, runs=4, warmup_s=0.01, min_warmup_calls=7, target_run_s=0.002, min_iters=3, max_iters=8)
    assert len(m.run_us) == 4 and m.timer == "perf_counter_ns"
    # warm-up: a first untimed call, then batches of 1, 2, 4, ... until 10 ms and 7 calls have passed
    assert m.warmup_calls == 1 + 63 and m.warmup_s == pytest.approx(63 * 200e-6) and m.estimate_us == 200
    assert m.iters_per_run == 8                   # ceil(2 ms / 200 µs) = 10 calls, clamped to max_iters
    assert m.run_us == [200.0] * 4 and m.median_us == 200.0 and len(calls) == 64 + 4 * 8
    fn, calls = _costing(clock, 50)
    wall = measure(fn, CPU, runs=2, warmup_s=0, min_warmup_calls=1, target_run_s=0, min_iters=2,
                   max_iters=2, timer="wall")
    assert wall.timer == "wall" and wall.iters_per_run == 2 and wall.run_us == [50.0, 50.0]
    assert wall.warmup_calls == 2 and len(calls) == 2 + 2 * 2


# --- workloads ---------------------------------------------------------------------------------------

def test_cold_sets_exceed_llc_and_respect_memory_cap():
    sets, note = cold_sets(per_set=1000, llc=10_000, factor=3.0, mem_cap=10**9)
    assert sets == 30 and sets * 1000 >= 3 * 10_000 and note == ""
    sets, note = cold_sets(per_set=1000, llc=10_000, factor=3.0, mem_cap=5_000)
    assert sets == 5 and "memory cap" in note
    assert cold_sets(per_set=10**9, llc=10, factor=3.0, mem_cap=10**12)[0] == 2  # never fewer than 2
    sets, note = cold_sets(per_set=10, llc=10**6, factor=3.0, mem_cap=10**12, max_sets=100)
    assert sets == 100 and "set cap" in note


def test_cold_workload_rotates_sets_larger_than_llc():
    torch_backend = get_backend("torch")
    llc = 64 << 10
    w = build_workload(torch_backend, "fwd", "cold", 8, 64, torch.float32, CPU, llc_override=llc, cold_factor=3.0)
    assert w.sets >= 2 and w.working_set_bytes >= 3 * llc and w.timer == "held"
    assert w.nbytes == op_bytes("fwd", 8, 64, 4)
    for _ in range(2 * w.sets + 1):
        w.fn()
    hot = build_workload(torch_backend, "bwd", "hot", 8, 64, torch.float32, CPU)
    wall = build_workload(torch_backend, "fwd", "wall", 8, 64, torch.float32, CPU)
    assert hot.sets == 1 and wall.timer == "wall"
    hot.fn()


def test_fwd_bwd_workload_runs_autograd_without_accumulating():
    w = build_workload(get_backend("torch"), "fwd+bwd", "hot", 4, 32, torch.float32, CPU)
    for _ in range(3):
        w.fn()
    assert w.nbytes == op_bytes("fwd+bwd", 4, 32, 4)


# --- case order ----------------------------------------------------------------------------------------

def test_backend_order_rotates_between_workers():
    skips = {"torch": ("", ("fwd", "bwd")), "compile": ("", ("fwd",)), "liger": ("no GPU", ())}
    cases = build_cases(["torch", "compile", "liger"], ["fwd", "bwd"], ["f32"], [(8, 64)], ["hot"], 1e-5, 0, skips)
    assert [c.skip != "" for c in cases] == [False, False, False, True, True, True]
    assert "no bwd" in cases[3].skip
    firsts = [worker_order(cases, ["torch", "compile", "liger"], w)[0].backend for w in range(3)]
    assert firsts == ["torch", "compile", "torch"]  # liger cannot run: the rotation skips it
    orders = [[c.id for c in worker_order(cases, ["torch", "compile"], w)] for w in range(2)]
    assert orders == [[0, 1, 2], [2, 0, 1]]


# --- aggregation -----------------------------------------------------------------------------------------

def _entry(case_id: int, runs: list[float], nbytes: int = 1_000_000) -> dict:
    return {"id": case_id, "status": "ok", "detail": "", "nbytes": nbytes, "sets": 1, "working_set_bytes": nbytes,
            "llc_bytes": 1 << 20, "note": "", "measurement": {"iters_per_run": 200, "run_us": runs, "warmup_calls": 40,
                                                              "warmup_s": 0.2, "timer": "cuda-event"}}


def _result(index: int, entries: list[dict], ok: bool = True, code: int = 0, tail: str = "") -> WorkerResult:
    return WorkerResult(index, ok, code, False, {"cases": entries}, tail, 1.0)


def test_median_of_worker_medians_with_min_max_gbps_peak_and_speedup():
    cases = [PerfCase(0, "torch", "fwd", "bf16", 64, 64, "cold", 1e-5, 0),
             PerfCase(1, "liger", "fwd", "bf16", 64, 64, "cold", 1e-5, 0),
             PerfCase(2, "compile", "fwd", "bf16", 64, 64, "cold", 1e-5, 0, skip="not installed")]
    results = [
        _result(0, [_entry(0, [9.0, 10.0, 11.0]), _entry(1, [4.0, 5.0, 6.0])]),
        _result(1, [_entry(0, [29.0, 30.0, 31.0]), _entry(1, [5.0, 5.0, 5.0])]),
        _result(2, [_entry(0, [20.0, 21.0, 19.0]), _entry(1, [3.0, 4.0, 100.0])]),
    ]
    orders = [[cases[0], cases[1]], [cases[1], cases[0]], [cases[0], cases[1]]]
    rows = build_rows(cases, orders, results, peak_gbps=60.0, baseline="torch")
    assert len(rows) == 2 * (3 + 1) + 1  # case × worker + aggregate, and one `not run` row
    agg = {r.backend: r for r in rows if r.row_kind == "aggregate"}
    torch_row = agg["torch"]
    assert torch_row.median_us == 20.0  # median of worker medians 10, 30, 20
    assert (torch_row.min_us, torch_row.max_us) == (10.0, 30.0)
    assert torch_row.run_us == [10.0, 30.0, 20.0] and torch_row.worker is None
    assert torch_row.gbps == pytest.approx(1_000_000 / 20e-6 / 1e9)  # 50 GB/s
    assert torch_row.pct_peak == pytest.approx(50 / 60 * 100) and not torch_row.above_peak
    assert torch_row.speedup == 1.0 and torch_row.status == "ok"
    liger_row = agg["liger"]
    assert liger_row.median_us == 5.0  # worker medians 5, 5, 4
    assert liger_row.above_peak and liger_row.pct_peak == pytest.approx(200 / 60 * 100)
    assert liger_row.speedup == pytest.approx(4.0)
    assert agg["compile"].status == "not run" and agg["compile"].detail == "not installed"
    workers = [r for r in rows if r.row_kind == "worker" and r.backend == "torch"]
    assert [r.median_us for r in workers] == [10.0, 30.0, 20.0]
    assert [r.order for r in workers] == [0, 1, 0]
    assert not failed(rows, results)


def test_crashed_worker_is_reported_and_the_rest_aggregated():
    cases = [PerfCase(0, "torch", "fwd", "f32", 8, 8, "hot", 1e-5, 0), PerfCase(1, "torch", "bwd", "f32", 8, 8, "hot", 1e-5, 0)]
    results = [_result(0, [_entry(0, [1.0]), _entry(1, [2.0])]),
               _result(1, [_entry(0, [3.0])], ok=False, code=-9, tail="boom\nSegmentation fault\n")]
    rows = build_rows(cases, [cases, cases], results, None, "torch")
    crashed = [r for r in rows if r.row_kind == "worker" and r.worker == 1 and r.op == "bwd"][0]
    assert crashed.status == "error" and "status -9" in crashed.detail and "Segmentation fault" in crashed.detail
    agg = {r.op: r for r in rows if r.row_kind == "aggregate"}
    assert agg["fwd"].status == "ok" and agg["fwd"].median_us == 2.0
    assert agg["bwd"].status == "partial (1/2 workers)" and agg["bwd"].median_us == 2.0
    assert math.isnan(agg["bwd"].pct_peak)  # no measured peak: blank
    assert failed(rows, results)

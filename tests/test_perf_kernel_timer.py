"""The kernel timer on the CPU: record classification and filtering (fakes and real CPU profiler records), run
records and their sanity checks (planted faults), aggregation across workers, the gap, the perf and abi rows,
the worker passes with a fake profiler, and the `n/a` path where no GPU activity exists."""
from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch

from lnbench.run.device import Device, emu_device, torch_device_info
from lnbench.measure import kernel_stats, kernel_timer
from lnbench.perf.aggregate import build_rows, failed
from lnbench.perf.cases import PerfCase
from lnbench.measure.kernel_stats import NO_ACTIVITY, Activity, run_record, worker_summary
from lnbench.run.workers import WorkerResult
from lnbench.perf.messages import PerfWorkerPayload, PerfWorkerSpec

CPU = torch.device("cpu")
LN = "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float)"
GAMMA = "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel<c10::BFloat16, float>(long)"
SPIN = "at::cuda::(anonymous namespace)::spin_kernel(long)"


def _calls(iters: int, names: list[tuple[str, int]], start: int = 0, kind: str = "kernel") -> list[Activity]:
    """Back-to-back records: per call, one record per (name, ns), 500 ns launch gap between records."""
    out, t = [], start
    for _ in range(iters):
        for name, ns in names:
            out.append(Activity(name, kind, t, ns))
            t += ns + 500
    return out


# --- classification and record filtering ---------------------------------------------------------------

@pytest.mark.parametrize("name, activity_type, kind", [
    (LN, "kernel", "kernel"), ("Memcpy DtoD (Device -> Device)", "gpu_memcpy", "memcpy"),
    ("Memset (Device)", "gpu_memset", "memset"), ("Stream Sync", "cuda_sync", "sync"),
    ("ProfilerStep#1", "gpu_user_annotation", "annotation"), ("cudaLaunchKernel", "cuda_runtime", "other"),
    # torch without _KinetoEvent.activity_type(): the name decides (CUPTI and roctracer spellings)
    (LN, None, "kernel"), ("Memcpy HtoD (Pageable -> Device)", None, "memcpy"), ("Memset (Device)", None, "memset"),
    ("CopyDeviceToDevice", None, "memcpy"), ("FillBuffer", None, "memset"), ("Event Sync", None, "sync"),
    ("Memcpy DtoH (Device -> Pinned)", 7, "memcpy"),  # an int activity type is not trusted: name decides
])
def test_classify_by_activity_type_else_by_name(name, activity_type, kind):
    assert kernel_timer.classify(name, activity_type) == kind


class _Event:
    """Stands in for torch's _KinetoEvent (the methods the adapter calls)."""

    def __init__(self, name: str, device: str, start: int, ns: int, activity: str | None = None) -> None:
        self._name, self._device, self._start, self._ns = name, SimpleNamespace(name=device), start, ns
        if activity is not None:
            self.activity_type = lambda: activity

    def name(self): return self._name
    def device_type(self): return self._device
    def start_ns(self): return self._start
    def duration_ns(self): return self._ns


def test_only_device_side_records_become_activities():
    events = [_Event("cudaLaunchKernel", "CPU", 0, 4000, "cuda_runtime"), _Event(LN, "CUDA", 5000, 29_800, "kernel"),
              _Event("Memset (Device)", "CUDA", 40_000, 1000), _Event("aten::native_layer_norm", "CPU", 0, 9000),
              _Event(GAMMA, "HIP", 50_000, 30_000)]
    acts = kernel_timer.activities_from_events(events)
    assert [(a.name, a.kind, a.start_ns, a.duration_ns) for a in acts] == [
        (LN, "kernel", 5000, 29_800), ("Memset (Device)", "memset", 40_000, 1000), (GAMMA, "kernel", 50_000, 30_000)]


def test_real_cpu_profiler_records_pass_through_the_adapter_and_hold_no_device_activity():
    from torch.profiler import ProfilerActivity, profile
    x = torch.randn(16, 64)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        torch.native_layer_norm(x, [64], None, None, 1e-5)
    raw = prof.profiler.kineto_results.events()
    assert any("layer_norm" in e.name() for e in raw)           # the records are there ...
    assert kernel_timer.device_activities(prof) == []           # ... and all of them are host-side
    assert kernel_stats.run_record(kernel_timer.device_activities(prof), 1)["count"] == 0


FLUSH = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, sum_functor> >"


class _FakeGpu:
    """What KernelTimer.run touches on a GPU: events, the stream hold, the flush and one profiler session at a
    time. Launches append _Events to `queue` (1 µs apart); a profiler session hands back the ones launched
    inside it; `traced_ns` is how long the work kernel runs while a session is open (tracing slows it)."""

    def __init__(self, ns: int, traced_ns: int) -> None:
        self.queue: list[_Event] = []
        self.sessions, self.tracing, self.ns, self.traced_ns, self.clock = 0, False, ns, traced_ns, 0

    def launch(self, name: str, ns: int) -> None:
        self.clock += 1000
        self.queue.append(_Event(name, "CUDA", self.clock, ns, "kernel"))
        self.clock += ns
        self.queue.append(_Event("cudaLaunchKernel", "CPU", 0, 3000, "cuda_runtime"))

    def work(self) -> None:
        self.launch(LN, self.traced_ns if self.tracing else self.ns)

    def event(self, enable_timing: bool = True) -> SimpleNamespace:
        gpu = self
        ev = SimpleNamespace(t=0, query=lambda: False, synchronize=lambda: None)
        ev.record = lambda stream=None: setattr(ev, "t", gpu.clock)
        ev.elapsed_time = lambda other: (other.t - ev.t) / 1e6          # ms
        return ev

    def profile(self):
        gpu = self

        class Session:
            def __enter__(self):
                gpu.sessions += 1
                gpu.tracing = True
                self.first = len(gpu.queue)
                return self

            def __exit__(self, *exc):
                gpu.tracing = False
                events = gpu.queue[self.first:]
                self.profiler = SimpleNamespace(kineto_results=SimpleNamespace(events=lambda: events))
                return False
        return Session()


def _fake_timer(monkeypatch, gpu: _FakeGpu) -> kernel_timer.KernelTimer:
    monkeypatch.setattr(torch.cuda, "Event", gpu.event)
    monkeypatch.setattr(torch.cuda, "current_stream", lambda device=None: None)
    monkeypatch.setattr(kernel_timer, "synchronize", lambda device: None)
    monkeypatch.setattr(kernel_timer.KernelTimer, "_profile", staticmethod(gpu.profile))
    monkeypatch.setattr(kernel_timer.KernelTimer, "flush", lambda self: gpu.launch(FLUSH, 25_000))
    timer = kernel_timer.KernelTimer(CPU)
    timer.hold = SimpleNamespace(available=True, hold=lambda us: gpu.launch(SPIN, int(us * 1000)))
    return timer


def test_kernel_timer_times_isolated_calls_and_leaves_out_spin_and_flush(monkeypatch):
    gpu = _FakeGpu(ns=29_800, traced_ns=29_800)
    timer = _fake_timer(monkeypatch, gpu)
    record = timer.run(gpu.work, 100, clean=True, host_us_per_call=10.0)
    assert timer.helper_names() == frozenset({SPIN, FLUSH}) and gpu.sessions == 2   # helpers alone, then the run
    calls = kernel_timer.MAX_ISOLATED_CALLS
    assert record["iters"] == calls and record["count"] == calls and list(record["names"]) == [LN]
    assert record["total_ns"] == calls * 29_800
    assert record["window_us"] == pytest.approx(30.8) and record["bare_window_us"] == pytest.approx(30.8)
    flushes = sum(1 for e in gpu.queue if e.name() == FLUSH)
    assert flushes == 1 + 1 + 2 * calls                     # learning (2), then one before every call
    few = timer.run(gpu.work, 5, clean=False)
    assert few["count"] == 5 and gpu.sessions == 3 and sum(1 for e in gpu.queue if e.name() == FLUSH) == flushes


def test_kernels_that_tracing_slows_are_corrected_by_the_lengthening_of_their_calls(monkeypatch):
    """Liger's forward at 32768x8192 on the H200: 353 µs untraced, 368 µs while traced. The same calls' windows
    (1 µs launch + kernel) differ by the 15 µs tracing adds, so kernel time is the record less that."""
    gpu = _FakeGpu(ns=353_000, traced_ns=368_000)
    timer = _fake_timer(monkeypatch, gpu)
    summary = kernel_timer.measure_kernels(gpu.work, CPU, iters=200, runs=3, clean=True, timer=timer)
    assert summary["status"] == "ok" and summary["corrected"] and summary["bounded_runs"] == 0
    assert summary["traced_run_us"] == pytest.approx([368.0] * 3)
    assert summary["profiler_shift_us"] == pytest.approx(15.0)
    assert summary["median_us"] == pytest.approx(353.0)
    assert summary["note"] == "profiling lengthens each call by 15 µs: kernel time is the traced records (368 µs) less that"
    calm = _FakeGpu(ns=30_000, traced_ns=30_000)
    steady = kernel_timer.measure_kernels(calm.work, CPU, iters=200, runs=3, clean=True,
                                          timer=_fake_timer(monkeypatch, calm))
    assert not steady["corrected"] and steady["median_us"] == pytest.approx(30.0) and steady["note"] == ""


def test_the_correction_needs_a_significant_shift_and_full_spins_and_stays_within_the_untraced_window():
    def summary(window: float, bare: float, record_ns: int = 18_700, spin_short: bool = False) -> dict:
        return worker_summary([run_record(_calls(10, [(LN, record_ns)]), 10, window_us=window, bare_window_us=bare,
                                          spin_short=spin_short)] * 3)

    shifted = summary(21.2, 19.7)                                # Liger's forward at 4096x4096: +1.5 µs
    assert shifted["median_us"] == pytest.approx(17.2) and shifted["corrected"]
    noise = summary(20.1, 19.7)                                  # 0.4 µs: below the floor, records kept
    assert noise["median_us"] == pytest.approx(18.7) and not noise["corrected"] and noise["note"] == ""
    long_kernel = summary(437.3, 436.6, record_ns=434_800)       # ATen at 32768x8192: 0.7 µs is noise there
    assert long_kernel["median_us"] == pytest.approx(434.8) and not long_kernel["corrected"]
    short_spin = summary(41.2, 19.7, spin_short=True)            # host time in the traced window: no correction
    assert short_spin["median_us"] == pytest.approx(18.7) and not short_spin["corrected"]
    assert short_spin["note"] == ("profiled calls' windows 21.5 µs longer, but the spin ran out before a call was "
                                  "queued in 3 of 3 runs (host time in the windows): kernel time not corrected")
    above = summary(41.2, 18.0, record_ns=20_000, spin_short=True)   # uncorrected, above the untraced window
    assert above["median_us"] == pytest.approx(18.0) and above["bounded_runs"] == 3
    assert "3 of 3 runs above the call's untraced window (20 µs traced), bounded by it" in above["note"]


# --- where there is no GPU activity: n/a with the reason ---------------------------------------------

def test_unavailable_reasons_name_the_device():
    assert kernel_timer.unavailable_reason(torch_device_info(CPU)) == "no GPU activity on the cpu device"
    assert "emulated device emu:gfx942" in kernel_timer.unavailable_reason(emu_device("gfx942"))
    null = SimpleNamespace(name="null:gfx942", kind="null", emulated=False, is_null=True, times_are_real=False,
                           is_gpu=False)
    assert kernel_timer.unavailable_reason(null).startswith("null device null:gfx942: launches complete without")
    unreal = SimpleNamespace(name="other", kind="other", emulated=False, times_are_real=False, is_gpu=False)
    assert "other: times are not real" in kernel_timer.unavailable_reason(unreal)
    gpu = Device("cuda:0", "cuda", torch.device("cuda", 0), "sm_90")
    reason = kernel_timer.unavailable_reason(gpu)
    if torch.profiler.ProfilerActivity.CUDA in torch.profiler.supported_activities():
        assert reason == ""
    else:  # the CPU wheel: no CUPTI in this torch build
        assert "no GPU activity" in reason


# --- run records and worker summaries ----------------------------------------------------------------

def test_run_record_counts_the_calls_work_and_never_the_spin_kernel():
    acts = ([Activity(SPIN, "kernel", 0, 900_000)] + _calls(10, [(LN, 30_000)], start=1_000_000)
            + [Activity("Stream Sync", "sync", 0, 5_000_000)]
            + _calls(2, [("Memset (Device)", 800)], 9_000_000, "memset"))
    record = run_record(acts, 10, exclude={SPIN}, window_us=33.0)
    assert record["count"] == 12 and record["total_ns"] == 10 * 30_000 + 2 * 800
    assert record["names"][LN] == {"kind": "kernel", "count": 10, "ns": 300_000}
    assert record["names"]["Memset (Device)"]["kind"] == "memset" and SPIN not in record["names"]
    assert record["overlap_ns"] == 0 and record["window_us"] == 33.0
    with pytest.raises(ValueError):
        run_record(acts, 0)


def test_worker_summary_per_call_time_kernels_per_call_and_names():
    runs = [run_record(_calls(100, [(LN, 30_000 + k), (GAMMA, 30_500)]), 100) for k in (0, 100, 300)]
    summary = worker_summary(runs)
    assert summary["status"] == "ok" and summary["note"] == ""
    assert summary["run_us"] == pytest.approx([60.5, 60.6, 60.8])
    assert summary["median_us"] == pytest.approx(60.6) and summary["kernels_per_call"] == 2.0
    assert summary["names"][LN]["per_call"] == 1.0 and summary["names"][LN]["us"] == pytest.approx(30.1)
    assert summary["names"][GAMMA]["us"] == pytest.approx(30.5)


def test_planted_faults_are_noted_or_refused():
    lost = run_record(_calls(100, [(LN, 30_000)])[:-1], 100)            # one record dropped
    overlapping = run_record([Activity(LN, "kernel", 0, 10_000), Activity("range", "kernel", 0, 50_000)], 1)
    good = run_record(_calls(100, [(LN, 30_000)]), 100)
    assert "not a whole number per call" in worker_summary([good, lost])["note"]
    assert "overlap in time" in worker_summary([good, overlapping])["note"]
    assert worker_summary([good, good])["note"] == ""
    empty = run_record([], 100)
    assert worker_summary([empty, empty]) == {"status": "n/a", "reason": NO_ACTIVITY}   # never a zero
    partial = worker_summary([good, empty])
    assert partial["status"] == "error" and "1 of 2" in partial["reason"]


def test_aggregate_is_median_of_worker_medians_and_flags_disagreement():
    def summary(us: float, per_call: int = 1) -> dict:
        return worker_summary([run_record(_calls(10, [(LN, int(us * 1000 / per_call))] * per_call), 10)] * 3)

    agg = kernel_stats.aggregate([summary(30.0), summary(29.0), summary(35.0), None])
    assert agg["median_us"] == pytest.approx(30.0) and (agg["min_us"], agg["max_us"]) == pytest.approx((29.0, 35.0))
    assert agg["worker_medians"] == pytest.approx([30.0, 29.0, 35.0]) and agg["workers"] == 3
    assert agg["kernels_per_call"] == 1.0 and agg["note"] == "" and agg["names"][LN]["workers"] == 3
    mixed = kernel_stats.aggregate([summary(30.0), summary(30.0, per_call=2)])
    assert "kernels per call differ between workers: 1, 2" in mixed["note"]
    na = kernel_stats.aggregate([kernel_stats.not_available("no GPU activity on the cpu device")] * 2)
    assert kernel_stats.status_text(na) == "n/a (no GPU activity on the cpu device)"
    assert kernel_stats.status_text(kernel_stats.aggregate([None])) == "n/a (not measured)"


def test_aggregate_profiler_notes_are_one_line_each_with_the_workers_and_the_range():
    """Three workers whose windows the profiler lengthened (1.3 and 1.38 µs, and 1.3 µs with the kernel still
    above the untraced window): one line for each kind, with the workers and the range, not one per worker."""
    def shifted(bare: float, record_ns: int = 18_700) -> dict:
        return worker_summary([run_record(_calls(10, [(LN, record_ns)]), 10, window_us=21.2, bare_window_us=bare)] * 3)

    agg = kernel_stats.aggregate([shifted(19.9), shifted(19.82), shifted(19.9, record_ns=21_500)])
    assert agg["note"] == ("profiling lengthens each call by 1.3–1.38 µs in 3 of 3 workers: kernel time is the "
                           "traced records (18.7–21.5 µs) less that; 1 of 3 workers above the call's untraced "
                           "window (21.5 µs traced), bounded by it")
    same = kernel_stats.aggregate([shifted(19.9), shifted(19.9)])
    assert same["note"] == ("profiling lengthens each call by 1.3 µs in 2 of 2 workers: kernel time is the traced "
                            "records (18.7 µs) less that")
    short = worker_summary([run_record(_calls(10, [(LN, 18_700)]), 10, window_us=41.2, bare_window_us=19.7,
                                       spin_short=True)] * 3)
    assert kernel_stats.aggregate([short, shifted(19.9)])["note"] == (
        "profiling lengthens each call by 1.3 µs in 1 of 2 workers: kernel time is the traced records (18.7 µs) "
        "less that; profiled calls' windows 21.5 µs longer in 1 of 2 workers, but a spin ran out before a call was "
        "queued (host time in the windows): kernel time not corrected there")
    lost = run_record(_calls(10, [(LN, 18_700)])[:-1], 10)
    checked = kernel_stats.aggregate([worker_summary([lost] * 3)] * 2)
    assert checked["note"].count("not a whole number per call") == 1     # the same check, said once


def test_gap_is_stream_minus_kernel_and_nan_without_both():
    assert kernel_stats.gap_us(32.1, 29.8) == pytest.approx(2.3)
    assert math.isnan(kernel_stats.gap_us(32.1, math.nan)) and math.isnan(kernel_stats.gap_us(None, 29.8))


def test_row_columns_show_ok_figures_with_their_gap_and_only_a_status_otherwise():
    # a worker whose traced kernels (30 µs) outlast the untraced call window (29.5 µs): bounded by the window
    bounded = worker_summary([run_record(_calls(3, [(LN, 30_000)]), 3, bare_window_us=29.5)] * 2)
    figures = {**bounded, "min_us": 29.5, "max_us": 29.5}
    cols = kernel_stats.row_columns(figures, 32.0, "tensor_")
    assert cols == {"tensor_kernel_status": "ok", "tensor_kernel_us": 29.5, "tensor_kernel_min_us": 29.5,
                    "tensor_kernel_max_us": 29.5, "tensor_kernels_per_call": 1.0,
                    "tensor_kernel_names": json.dumps({LN: {"kind": "kernel", "per_call": 1.0, "us": 30.0}}),
                    "tensor_gap_us": pytest.approx(2.5)}
    agg = {"status": "ok", "median_us": 20.0, "min_us": 19.9, "max_us": 20.1, "kernels_per_call": 1.0,
           "names": {LN: {"kind": "kernel", "per_call": 1.0, "us": 20.000333333333334, "workers": 3}}}
    cols = kernel_stats.row_columns(agg, None)
    assert (cols["kernel_min_us"], cols["kernel_max_us"]) == (19.9, 20.1) and math.isnan(cols["gap_us"])  # no stream
    assert json.loads(cols["kernel_names"])[LN] == {"kind": "kernel", "per_call": 1.0, "us": 20.0003, "workers": 3}
    na = kernel_stats.not_available("no GPU activity on the cpu device")
    assert kernel_stats.row_columns(na, 32.0) == {"kernel_status": "n/a (no GPU activity on the cpu device)"}
    error = kernel_stats.not_available("RuntimeError: CUPTI", "error")
    assert kernel_stats.row_columns(error, 32.0, "pointer_") == {"pointer_kernel_status": "error (RuntimeError: CUPTI)"}
    assert kernel_stats.row_columns(None, 32.0) == {"kernel_status": "n/a (not measured)"}

# --- perf rows ---------------------------------------------------------------------------------------------

def _entry(case_id: int, stream: list[float], kernel: dict | None) -> dict:
    measurement = {"iters_per_run": 256, "run_us": stream, "warmup_calls": 40, "warmup_s": 0.2,
                   "timer": "cuda-event-held"}
    out = {"id": case_id, "status": "ok", "detail": "", "nbytes": 67_158_016, "sets": 8, "working_set_bytes": 1 << 30,
           "llc_bytes": 60 << 20, "note": "", "measurement": measurement}
    if kernel is not None:
        out["kernel"] = kernel
    return out


def _kernel(us: list[float], per_call: int = 1) -> dict:
    runs = [run_record(_calls(256, [(LN, int(v * 1000 / per_call))] * per_call), 256, window_us=v + 2) for v in us]
    return worker_summary(runs)


CASES = [PerfCase(0, "torch", "fwd", "bf16", 4096, 4096, "cold", 1e-5, 0),
         PerfCase(1, "liger", "fwd", "bf16", 4096, 4096, "cold", 1e-5, 0)]


def _results() -> list[WorkerResult]:
    streams = {0: ([32.0, 32.1, 32.2], [32.2, 32.3, 32.4], [31.9, 32.0, 32.1]),
               1: ([21.6, 21.7, 21.8], [21.7, 21.8, 21.9], [21.5, 21.6, 21.7])}
    kernels = {0: ([29.7, 29.8, 29.9], [29.8, 29.9, 30.0], [29.6, 29.7, 29.8]),
               1: ([18.4, 18.5, 18.6], [18.5, 18.6, 18.7], [18.3, 18.4, 18.5])}
    return [WorkerResult(w, True, 0, False,
                         {"cases": [_entry(c, streams[c][w], _kernel(kernels[c][w])) for c in (0, 1)]}, "", 1.0)
            for w in range(3)]


def test_perf_rows_carry_kernel_time_names_and_gap():
    rows = build_rows(CASES, [CASES] * 3, _results(), peak_gbps=4000.0, baseline="torch")
    agg = {r.backend: r for r in rows if r.row_kind == "aggregate"}
    torch_row = agg["torch"]
    assert torch_row.median_us == pytest.approx(32.1)                       # stream headline unchanged
    assert torch_row.kernel_us == pytest.approx(29.8)                       # median of 29.8, 29.9, 29.7
    assert (torch_row.kernel_min_us, torch_row.kernel_max_us) == pytest.approx((29.7, 29.9))
    assert torch_row.kernel_run_us == pytest.approx([29.8, 29.9, 29.7])
    assert torch_row.gap_us == pytest.approx(32.1 - 29.8) and torch_row.kernels_per_call == 1.0
    assert json.loads(torch_row.kernel_names)[LN]["per_call"] == 1.0
    assert torch_row.kernel_status == "ok" and torch_row.headline == "stream"
    assert torch_row.kernel_window_us == pytest.approx(31.8)               # median of the profiled runs' event times
    assert torch_row.gbps == pytest.approx(67_158_016 / 32.1e-6 / 1e9)     # GB/s from stream time
    assert agg["liger"].speedup == pytest.approx(32.1 / 21.7)
    workers = [r for r in rows if r.row_kind == "worker" and r.backend == "torch"]
    assert [r.kernel_us for r in workers] == pytest.approx([29.8, 29.9, 29.7])
    assert [r.gap_us for r in workers] == pytest.approx([32.1 - 29.8, 32.3 - 29.9, 32.0 - 29.7])
    assert not failed(rows, _results())


def test_timer_kernel_moves_gbps_peak_and_speedup_to_kernel_time():
    rows = build_rows(CASES, [CASES] * 3, _results(), peak_gbps=4000.0, baseline="torch", headline="kernel")
    agg = {r.backend: r for r in rows if r.row_kind == "aggregate"}
    assert agg["torch"].headline == "kernel" and agg["torch"].median_us == pytest.approx(32.1)
    assert agg["torch"].gbps == pytest.approx(67_158_016 / 29.8e-6 / 1e9)
    assert agg["torch"].pct_peak == pytest.approx(agg["torch"].gbps / 40)
    assert agg["liger"].speedup == pytest.approx(29.8 / 18.5)
    with pytest.raises(ValueError):
        build_rows(CASES, [CASES] * 3, _results(), None, "torch", headline="events")


def test_na_kernel_rows_are_empty_never_zero_and_errors_fail_the_run():
    na = kernel_stats.not_available("no GPU activity on the cpu device")
    results = [WorkerResult(w, True, 0, False, {"cases": [_entry(0, [10.0, 11.0], na)]}, "", 1.0) for w in range(2)]
    rows = build_rows(CASES[:1], [CASES[:1]] * 2, results, None, "torch")
    for row in rows:
        assert row.kernel_status == "n/a (no GPU activity on the cpu device)"
        assert math.isnan(row.kernel_us) and math.isnan(row.gap_us) and math.isnan(row.kernels_per_call)
    assert not failed(rows, results)
    broken = kernel_stats.not_available("RuntimeError: CUPTI_ERROR_NOT_INITIALIZED", "error")
    results[1].payload["cases"][0]["kernel"] = broken
    rows = build_rows(CASES[:1], [CASES[:1]] * 2, results, None, "torch")
    agg = rows[-1]
    assert agg.kernel_status == "n/a (no GPU activity on the cpu device)"  # no worker has kernel time
    results[0].payload["cases"][0]["kernel"] = _kernel([30.0, 30.0])
    rows = build_rows(CASES[:1], [CASES[:1]] * 2, results, None, "torch")
    assert rows[-1].kernel_status.startswith("partial (1/2 workers): RuntimeError: CUPTI")
    assert rows[-1].kernel_us == pytest.approx(30.0) and failed(rows, results)


# --- the worker passes, with a fake profiler ---------------------------------------------------------

class FakeTimer:
    """KernelTimer stand-in: calls fn I times and reports one 7 µs 'kernel' per call."""

    made: list["FakeTimer"] = []
    hold = SimpleNamespace(available=False)   # no spin kernel on the CPU: summaries say held = False

    def __init__(self, device) -> None:
        self.calls: list[tuple[int, bool]] = []
        FakeTimer.made.append(self)

    def run(self, fn, iters: int, *, clean: bool, host_us_per_call: float = 0.0) -> dict:
        for _ in range(iters):
            fn()
        self.calls.append((iters, clean))
        return run_record(_calls(iters, [("fake_kernel", 7000)]), iters, window_us=9.0)


@pytest.fixture
def fake_gpu_profiler(monkeypatch):
    FakeTimer.made = []
    monkeypatch.setattr(kernel_timer, "unavailable_reason", lambda dev: "")
    monkeypatch.setattr(kernel_timer, "KernelTimer", FakeTimer)
    return FakeTimer


PROTOCOL = {"runs": 2, "warmup_s": 0.0, "min_warmup_calls": 1, "target_run_s": 0.0, "min_iters": 3, "max_iters": 3,
            "cold_factor": 3.0, "cold_mem_fraction": 0.4, "llc_mib": 0.01}


def _spec(protocol: dict = PROTOCOL) -> PerfWorkerSpec:
    base = {"backend": "torch", "dtype": "f32", "m": 4, "n": 32, "eps": 1e-5, "seed": 1}
    cases = [{**base, "id": 0, "op": "fwd", "mode": "cold"}, {**base, "id": 1, "op": "bwd", "mode": "hot"},
             {**base, "id": 2, "op": "fwd", "mode": "hot", "backend": "liger"}]
    return PerfWorkerSpec.from_wire({"device": "cpu", "protocol": protocol, "cases": cases})


def _stream_pass(spec: PerfWorkerSpec) -> PerfWorkerPayload:
    from lnbench.perf.worker_main import run_case
    dev, backends = torch_device_info(CPU), {}
    return PerfWorkerPayload(cases=[run_case(c, dev, spec, backends) for c in spec.cases])


def test_kernel_pass_profiles_each_case_that_ran_with_its_stream_iters(fake_gpu_profiler):
    from lnbench.perf.worker_main import kernel_pass
    spec = _spec()
    payload = _stream_pass(spec)
    assert [e.status for e in payload.cases] == ["ok", "ok", "not run"]        # liger is not installed
    writes, lines = [], []
    kernel_pass(payload, spec.cases, torch_device_info(CPU), spec.protocol, {}, writes.append, lines.append)
    (timer,) = fake_gpu_profiler.made
    assert timer.calls == [(3, True), (3, True), (3, False), (3, False)]              # R runs; cold = clean
    fwd, bwd, liger = payload.cases
    assert fwd.kernel["status"] == "ok" and fwd.kernel["median_us"] == pytest.approx(7.0)
    assert fwd.kernel["iters"] == fwd.measurement["iters_per_run"] == 3 and fwd.kernel["held"] is False
    assert bwd.kernel["kernels_per_call"] == 1.0 and liger.kernel is None
    assert len(lines) == 3 and len(writes) == 4                                       # a progress line per case


def test_kernel_pass_says_na_without_gpu_activity_and_when_turned_off(monkeypatch):
    from lnbench.perf.worker_main import kernel_pass
    spec, off = _spec(), _spec({**PROTOCOL, "kernel_timer": False})
    spec.cases = off.cases = spec.cases[:2]
    payload = _stream_pass(spec)
    lines: list[str] = []
    kernel_pass(payload, spec.cases, torch_device_info(CPU), spec.protocol, {}, lambda p: None, lines.append)
    na = {"status": "n/a", "reason": "no GPU activity on the cpu device"}
    assert [e.kernel for e in payload.cases] == [na] * 2
    assert lines == []                                                                # no second pass ran
    kernel_pass(payload, off.cases, torch_device_info(CPU), off.protocol, {}, lambda p: None, lines.append)
    assert payload.cases[0].kernel["reason"] == "no GPU activity on the cpu device"   # off, and impossible here
    monkeypatch.setattr(kernel_timer, "unavailable_reason", lambda dev: "")   # a device where it could run
    kernel_pass(payload, off.cases, torch_device_info(CPU), off.protocol, {}, lambda p: None, lines.append)
    assert payload.cases[0].kernel["reason"] == "kernel timer off: --kernel-timer turns it on"
    assert lines == []


def test_a_profiler_failure_is_an_error_summary_and_the_stream_time_stands(monkeypatch):
    from lnbench.measure.kernel_timer import measure_kernels

    class Broken:
        hold = SimpleNamespace(available=False)

        def run(self, *a, **k):
            raise RuntimeError("CUPTI_ERROR_INSUFFICIENT_PRIVILEGES\nmore")

    summary = measure_kernels(lambda: None, CPU, iters=3, runs=2, clean=True, timer=Broken())
    assert summary == {"status": "error", "reason": "RuntimeError: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"}


# --- abi-compare's device metric ---------------------------------------------------------------------

def test_abi_device_rows_get_kernel_time_gap_and_a_kernel_speedup():
    from lnbench.abi.aggregate import aggregate
    from lnbench.abi.messages import AbiWorkerPayload

    def payload(shift: float) -> dict:
        kernel = {"tensor": _kernel([20.0 + shift, 20.1 + shift, 20.2 + shift]),
                  "pointer": _kernel([19.0 + shift, 19.1 + shift, 19.2 + shift])}
        device = {"skipped": "", "iters": 256, "tensor": [25.0, 25.1, 25.2], "pointer": [22.0, 22.1, 22.2],
                  "spin_short": 0, "kernel": kernel}
        return {"checks": [], "cases": {"fwd/bf16/4096x4096": {"op": "fwd", "dtype": "bf16", "shape": [4096, 4096],
                                                               "metrics": {"device": device}}}}

    payloads = [AbiWorkerPayload.from_wire(payload(shift)) for shift in (0.0, 0.1, -0.1)]
    (row,) = aggregate("flydsl", {}, payloads, ["device"], n_boot=500)
    assert row.status == "ok" and row.tensor_us == pytest.approx(25.1)
    assert row.tensor_kernel_us == pytest.approx(20.1) and row.pointer_kernel_us == pytest.approx(19.1)
    assert row.tensor_gap_us == pytest.approx(5.0) and row.pointer_gap_us == pytest.approx(3.0)
    assert row.tensor_kernels_per_call == 1.0 and row.tensor_kernel_status == "ok"
    assert row.kernel_speedup == pytest.approx(20.1 / 19.1) and row.kernel_verdict == "FASTER"
    assert row.kernel_ci_low <= row.kernel_speedup <= row.kernel_ci_high


def test_abi_kernel_pass_on_a_fake_gpu_and_na_on_the_cpu(fake_gpu_profiler):
    from lnbench.abi.cases import build_cases
    from lnbench.abi.messages import AbiCaseEntry, AbiWorkerPayload, MetricRecord
    from lnbench.abi.pair_timing import _kernel_pass
    from lnbench.measure.protocol import Protocol

    cases = build_cases("torch-entry", ["fwd"], ["f32"], [(4, 32), (4, 64)], CPU, 1e-5, 1)
    units = [(c, "device") for c in cases]
    payload = AbiWorkerPayload(cases={c.key: AbiCaseEntry(c.op, c.dtype, list(c.shape), metrics={
        "device": MetricRecord(iters=4)}) for c in cases})
    estimate = {(c.key, "device", side): 1e-6 for c in cases for side in ("tensor", "pointer")}
    _kernel_pass(payload, units, Protocol(runs=3), CPU, 1, estimate)
    (timer,) = fake_gpu_profiler.made
    assert timer.calls == [(4, False)] * (3 * 2 * 2)                                    # R × cases × sides, hot
    for c in cases:
        kernel = payload.cases[c.key].metrics["device"].kernel
        assert {s["status"] for s in kernel.values()} == {"ok"} and kernel["tensor"]["median_us"] == pytest.approx(7.0)
    _kernel_pass(payload, units, Protocol(runs=3, kernel_timer=False), CPU, 1, estimate)
    assert payload.cases[cases[0].key].metrics["device"].kernel["pointer"] == {
        "status": "n/a", "reason": "kernel timer off"}

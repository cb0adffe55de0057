"""Timer primitives: warm-up, loop-count calibration and R timed runs of a zero-argument callable.

Shared with `lnbench abi-compare`. Timers:
    "device"  on a GPU: a torch.cuda.Event pair recorded on the *current* stream of `device` (the stream the
              callable launches on; works for CUDA and ROCm) around I back-to-back calls;
              on the CPU: time.perf_counter_ns around the I calls (CPU work is synchronous).
    "wall"    host wall time (perf_counter_ns) around the I calls, with the device synchronised before the
              run starts and at its end, so queued work is charged to the run.
Nothing is flushed or zeroed inside a timed run; cold-cache behaviour is the callable's job (workloads.py).
"""
from __future__ import annotations

import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

import torch

TIMERS = ("device", "wall")
#: warm-up synchronises at least this often, so the host never runs far ahead of the device
_MAX_WARMUP_BATCH = 64


def synchronize(device: torch.device | str) -> None:
    """Wait for all work queued on `device` (no-op on the CPU)."""
    device = torch.device(device)
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Measurement:
    """Result of `measure`: per-run mean µs per call, the iterations per run, and the warm-up done.

    run_us[k] is run k's elapsed time divided by iters_per_run. median_us is the median over runs.
    """

    iters_per_run: int
    run_us: list[float]
    warmup_calls: int
    warmup_s: float
    timer: str  # "cuda-event", "perf_counter_ns" or "wall"
    estimate_us: float = 0.0  # per-call estimate from the last warm-up batch (drives I)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def median_us(self) -> float:
        return float(statistics.median(self.run_us)) if self.run_us else math.nan

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["median_us"] = self.median_us
        return out


def choose_iters(per_call_s: float, target_run_s: float, min_iters: int, max_iters: int) -> int:
    """I = ceil(target / per-call time), clamped to [min_iters, max_iters]."""
    if per_call_s <= 0 or not math.isfinite(per_call_s):
        return max_iters
    return int(min(max_iters, max(min_iters, math.ceil(target_run_s / per_call_s))))


def warm_up(fn: Callable[[], object], device: torch.device, warmup_s: float, min_warmup_calls: int
            ) -> tuple[int, float, float]:
    """Call fn until at least `warmup_s` seconds and `min_warmup_calls` calls have passed (≥ 1 call).

    One first call runs before the clock starts (first-use work such as JIT compilation or autotuning
    does not count towards the warm-up time), then calls go in doubling batches (at most 64), synchronised
    after each batch. Returns (calls including the first, seconds, per-call seconds of the last batch).
    """
    fn()
    synchronize(device)
    start = time.perf_counter_ns()
    calls, batch, per_call = 1, 1, math.nan
    while True:
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            fn()
        synchronize(device)
        t1 = time.perf_counter_ns()
        calls += batch
        per_call = (t1 - t0) / batch / 1e9
        elapsed = (t1 - start) / 1e9
        if calls >= min_warmup_calls and elapsed >= warmup_s:
            return calls, elapsed, per_call
        batch = min(batch * 2, _MAX_WARMUP_BATCH)


def timed_run(fn: Callable[[], object], device: torch.device, iters: int, timer: str = "device") -> float:
    """One run: µs per call over `iters` back-to-back calls (timer as in `measure`; no warm-up)."""
    if timer == "device" and device.type == "cuda":
        stream = torch.cuda.current_stream(device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        for _ in range(iters):
            fn()
        end.record(stream)
        end.synchronize()
        return start.elapsed_time(end) * 1e3 / iters
    synchronize(device)
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        fn()
    synchronize(device)
    return (time.perf_counter_ns() - t0) / 1e3 / iters


_timed_run = timed_run  # old private name, kept for callers that used it


def measure(fn: Callable[[], object], device: torch.device | str, *, runs: int, warmup_s: float,
            min_warmup_calls: int, target_run_s: float, min_iters: int, max_iters: int,
            timer: str = "device") -> Measurement:
    """Warm up, pick I from the warm-up's per-call time, then time `runs` runs of I calls each.

    fn: zero-argument callable doing one call of the work (it may rotate buffers itself).
    device: where fn's work runs; GPU device timing uses events on torch.cuda.current_stream(device).
    timer: "device" (events on GPU / perf_counter_ns on CPU) or "wall" (host time, synced per run).
    """
    if timer not in TIMERS:
        raise ValueError(f"timer must be one of {TIMERS}, got {timer!r}")
    if runs < 1 or min_iters < 1 or max_iters < min_iters:
        raise ValueError(f"bad protocol: runs={runs}, iters in [{min_iters}, {max_iters}]")
    device = torch.device(device)
    calls, seconds, per_call = warm_up(fn, device, warmup_s, min_warmup_calls)
    iters = choose_iters(per_call, target_run_s, min_iters, max_iters)
    run_us = [timed_run(fn, device, iters, timer) for _ in range(runs)]
    label = "wall" if timer == "wall" else ("cuda-event" if device.type == "cuda" else "perf_counter_ns")
    return Measurement(iters, run_us, calls, seconds, label, per_call * 1e6)

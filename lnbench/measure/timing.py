"""Timer primitives: warm-up, loop-count calibration and R timed runs of a zero-argument callable.

Shared with `lnbench abi-compare`. Timers:
    "device"  on a GPU: a torch.cuda.Event pair recorded on the *current* stream of `device` (the stream the
              callable launches on; works for CUDA and ROCm) around I back-to-back calls: where the host
              cannot enqueue as fast as the GPU runs, host overhead shows (launch-bound behaviour);
              on the CPU: time.perf_counter_ns around the I calls (CPU work is synchronous).
    "held"    device time only: the stream is first held by a spin kernel (torch.cuda._sleep, nvbench's
              "blocking kernel") long enough for the host to enqueue all I calls (I <= HELD_MAX_ITERS), so
              host gaps between calls are not charged; a run whose spin ran out early is counted in
              extra["spin_short"]. On the CPU (or without torch.cuda._sleep) it is the "device" timer.
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

from lnbench.measure.protocol import Protocol

TIMERS = ("device", "held", "wall")
#: warm-up synchronises at least this often, so the host never runs far ahead of the device
_MAX_WARMUP_BATCH = 64
#: cap of I for "held" runs: the calls must fit the GPU's pending-launch queue while the spin holds the
#: stream (a full queue blocks the host until the spin ends, and host gaps would enter the timing)
HELD_MAX_ITERS = 256
_SPIN_MARGIN = 1.5
_SPIN_MAX_US = 500_000.0


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


#: a re-warm before timed runs that had to wait (the GPU may have idled meanwhile): as long as this, and calls
REWARM_S, REWARM_CALLS = 0.05, 10

#: default longest run: min_iters gives way before a run of slow calls lasts longer than this (the protocol's)
MAX_RUN_S = Protocol.max_run_s


def choose_iters(per_call_s: float, target_run_s: float, min_iters: int, max_iters: int,
                 max_run_s: float = MAX_RUN_S) -> int:
    """I = ceil(target / per-call time), clamped to [min_iters, max_iters]; the floor min_iters applies only
    while a run stays within max_run_s, so slow calls (ms each, e.g. on a CPU) get fewer, never < 1.

    The floor is there to average launch jitter over many short calls; a call that takes milliseconds
    is timed to far better than 1% by one clock reading, and 150 of them would only cost time.
    """
    if per_call_s <= 0 or not math.isfinite(per_call_s):
        return max_iters
    iters = min(max_iters, max(min_iters, math.ceil(target_run_s / per_call_s)))
    return int(max(1, min(iters, max(math.ceil(target_run_s / per_call_s), math.floor(max_run_s / per_call_s)))))


def warm_up(fn: Callable[[], object], device: torch.device, warmup_s: float, min_warmup_calls: int
            ) -> tuple[int, float, float]:
    """Call fn until at least `warmup_s` seconds and `min_warmup_calls` calls have passed (≥ 1 call), or,
    for slow calls, twice `warmup_s` (a 20 ms call is steady long before its 30th repetition).

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
        if elapsed >= warmup_s and (calls >= min_warmup_calls or elapsed >= 2 * warmup_s):
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


def host_fraction(fn: Callable[[], object], device: torch.device, iters: int) -> float:
    """The share of a run of `iters` back-to-back calls the host spends issuing them: ~1 when the GPU waits for
    the host (its time is the host's launch cost: host-bound), small when the host runs ahead and the calls
    queue up (its time is the GPU's). On the CPU every call is synchronous: 1."""
    if device.type != "cuda":
        return 1.0
    stream = torch.cuda.current_stream(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    synchronize(device)
    start.record(stream)
    t0 = time.perf_counter_ns()
    for _ in range(iters):
        fn()
    issued_us = (time.perf_counter_ns() - t0) / 1e3
    end.record(stream)
    end.synchronize()
    return issued_us / max(start.elapsed_time(end) * 1e3, 1e-3)


class StreamHold:
    """Hold the current stream of a GPU busy for a given time with torch.cuda._sleep (calibrated once)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.cycles_per_us = 0.0
        self.available = device.type == "cuda" and hasattr(torch.cuda, "_sleep")

    def _calibrate(self) -> None:
        stream = torch.cuda.current_stream(self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 2_000_000
        torch.cuda._sleep(cycles)                      # first call: module load
        start.record(stream)
        torch.cuda._sleep(cycles)
        end.record(stream)
        end.synchronize()
        self.cycles_per_us = cycles / max(start.elapsed_time(end) * 1e3, 1e-3)

    def hold(self, us: float) -> None:
        if not self.available:
            return
        if self.cycles_per_us == 0.0:
            self._calibrate()
        torch.cuda._sleep(int(min(us, _SPIN_MAX_US) * self.cycles_per_us))


def held_run(fn: Callable[[], object], device: torch.device, iters: int, hold: StreamHold,
             host_us_per_call: float) -> tuple[float, bool]:
    """One "held" run: (µs per call of device time, whether the spin ran out before the host finished)."""
    if not hold.available:
        return timed_run(fn, device, iters, "device"), False
    stream = torch.cuda.current_stream(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    synchronize(device)
    hold.hold(_SPIN_MARGIN * iters * host_us_per_call + 50.0)
    start.record(stream)
    for _ in range(iters):
        fn()
    short = start.query()                 # the spin already finished: host gaps may be inside
    end.record(stream)
    end.synchronize()
    return start.elapsed_time(end) * 1e3 / iters, bool(short)


def measure(fn: Callable[[], object], device: torch.device | str, *, runs: int, warmup_s: float,
            min_warmup_calls: int, target_run_s: float, min_iters: int, max_iters: int,
            max_run_s: float = MAX_RUN_S, timer: str = "device",
            before_runs: Callable[[float], bool] | None = None) -> Measurement:
    """Warm up, pick I from the warm-up's per-call time, then time `runs` runs of I calls each.

    fn: zero-argument callable doing one call of the work (it may rotate buffers itself).
    device: where fn's work runs; GPU device timing uses events on torch.cuda.current_stream(device).
    timer: "device" (events on GPU / perf_counter_ns on CPU), "held" (device time with the stream held
    while enqueueing, I capped at HELD_MAX_ITERS) or "wall" (host time, synced per run).
    On a GPU one untimed run first measures the host's share of a run (host_fraction, kept in extra; 1 on
    the CPU, where every call is synchronous). `before_runs(host_fraction)` is called between that run and the
    timed ones (perf on several GPUs: lnbench.measure.host_lock.Section); when it returns True it has waited
    for the host to itself, and a short re-warm (REWARM_S, REWARM_CALLS; extra["rewarm_calls"]) comes first.
    """
    if timer not in TIMERS:
        raise ValueError(f"timer must be one of {TIMERS}, got {timer!r}")
    if runs < 1 or min_iters < 1 or max_iters < min_iters:
        raise ValueError(f"bad protocol: runs={runs}, iters in [{min_iters}, {max_iters}]")
    device = torch.device(device)
    calls, seconds, per_call = warm_up(fn, device, warmup_s, min_warmup_calls)
    iters = choose_iters(per_call, target_run_s, min_iters, max_iters, max_run_s)
    label = "wall" if timer == "wall" else ("cuda-event" if device.type == "cuda" else "perf_counter_ns")
    share = {"host_fraction": round(host_fraction(fn, device, iters), 4)}    # no run on the CPU: 1
    if before_runs is not None and before_runs(share["host_fraction"]):
        share["rewarm_calls"] = warm_up(fn, device, REWARM_S, REWARM_CALLS)[0]
    hold = StreamHold(device)
    if timer == "held" and hold.available:
        iters = min(iters, max(min_iters, HELD_MAX_ITERS))
        runs_short = [held_run(fn, device, iters, hold, per_call * 1e6) for _ in range(runs)]
        run_us = [value for value, _ in runs_short]
        return Measurement(iters, run_us, calls, seconds, "cuda-event-held", per_call * 1e6,
                           {"spin_short": sum(short for _, short in runs_short), **share})
    run_us = [timed_run(fn, device, iters, "device" if timer == "held" else timer) for _ in range(runs)]
    return Measurement(iters, run_us, calls, seconds, label, per_call * 1e6, share)

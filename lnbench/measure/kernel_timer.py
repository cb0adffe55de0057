"""The kernel timer: the per-call sum of the kernels' own durations, from the GPU activity records that torch's
profiler collects (CUPTI on CUDA, roctracer / rocprofiler on ROCm).

One profiled run = up to MAX_ISOLATED_CALLS calls made one at a time under one
`torch.profiler.profile(activities=[ProfilerActivity.CUDA])` session, preceded by the same calls without the
profiler (KernelTimer says why: isolation and clean caches as under Nsight Compute, and a bound for kernels
that tracing slows). The profiler's raw records (`prof.profiler.kineto_results.events()`, each with
device_type(), name(), start_ns(), duration_ns() and, in newer torch, activity_type()) are filtered to
device-side activity; kernels, memcpy and memset issued by the calls are counted (lnbench.measure.kernel_stats),
the harness's spin and flush kernels are not. The profiler is set up only AFTER every worker's stream-timed
runs (lnbench.perf.worker_main): CUPTI stays loaded in a process once set up, so no stream-timed run ever
shares a process with it. gap = stream time −
kernel time is then what back-to-back execution adds: launch gaps and one call's cache write-back landing
in the next.

Where no device activity exists (the CPU, the emulated device, any device whose times are not real, a torch
build without GPU profiling) `unavailable_reason` says why and no kernel run is made.
"""
from __future__ import annotations

import re
import statistics
from typing import Any, Callable, Iterable

import torch

from lnbench.errors import one_line
from lnbench.measure import kernel_stats
from lnbench.measure.cache import llc_bytes
from lnbench.measure.kernel_stats import Activity
from lnbench.measure.timing import StreamHold, synchronize

#: torch DeviceType names of device-side (GPU) records; host-side runtime API calls are DeviceType.CPU
_GPU_DEVICE_TYPES = frozenset({"CUDA", "HIP"})
#: libkineto activity-type strings (torch >= 2.12 exposes _KinetoEvent.activity_type()) -> kind
_KIND_OF_ACTIVITY = {"kernel": "kernel", "concurrent_kernel": "kernel", "gpu_memcpy": "memcpy",
                     "gpu_memset": "memset", "cuda_sync": "sync", "gpu_user_annotation": "annotation",
                     "cuda_profiler_range": "annotation"}
#: name-based kinds for older torch (CUPTI: "Memcpy DtoD (Device -> Device)", "Memset (Device)",
#: "Stream Sync"; roctracer / rocprofiler: "CopyDeviceToDevice", "FillBuffer", "MEMORY_COPY_...")
_NAME_KINDS = (
    ("memcpy", re.compile(r"^(memcpy|memory_copy|copy(host|device)to(host|device)|hipmemcpy)", re.I)),
    ("memset", re.compile(r"^(memset|fill ?buffer|memory_fill|hipmemset)", re.I)),
    ("sync", re.compile(r"^((stream|event|context|unknown) sync|stream wait event)\b", re.I)),
)


def unavailable_reason(dev: Any) -> str:
    """'' when kernel time can be measured on `dev` (an lnbench.run.device.Device), else why not (one line)."""
    if getattr(dev, "emulated", False):
        return f"emulated device {dev.name}: no GPU activity records"
    if getattr(dev, "is_null", False):
        return f"null device {dev.name}: launches complete without executing, no GPU activity records"
    if not getattr(dev, "times_are_real", True):
        return f"{dev.name}: times are not real here, no GPU activity records"
    if not getattr(dev, "is_gpu", False):
        return f"no GPU activity on the {getattr(dev, 'kind', 'cpu')} device"
    if torch.profiler.ProfilerActivity.CUDA not in torch.profiler.supported_activities():
        return "this torch build's profiler records no GPU activity (no CUPTI / roctracer support)"
    return ""


def classify(name: str, activity_type: Any = None) -> str:
    """Kind of a device-side record: kernel, memcpy, memset, sync, annotation or other."""
    if isinstance(activity_type, str) and activity_type:
        return _KIND_OF_ACTIVITY.get(activity_type.lower(), "other")
    for kind, pattern in _NAME_KINDS:
        if pattern.search(name.strip()):
            return kind
    return "kernel"


def _device_type_name(value: Any) -> str:
    return str(getattr(value, "name", value)).rsplit(".", 1)[-1].upper()


def activities_from_events(events: Iterable[Any]) -> list[Activity]:
    """Device-side Activities from raw profiler records (objects with _KinetoEvent's methods)."""
    out = []
    for event in events:
        if _device_type_name(event.device_type()) not in _GPU_DEVICE_TYPES:
            continue
        getter = getattr(event, "activity_type", None)
        activity_type = getter() if callable(getter) else None
        name = str(event.name())
        if hasattr(event, "duration_ns"):
            start, duration = int(event.start_ns()), int(event.duration_ns())
        else:  # older records in µs
            start, duration = int(event.start_us() * 1000), int(event.duration_us() * 1000)
        out.append(Activity(name, classify(name, activity_type), start, duration))
    return out


def device_activities(prof: Any) -> list[Activity]:
    """Device-side Activities of a finished torch.profiler.profile."""
    results = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    if results is None:
        raise RuntimeError("the profiler returned no results (kineto_results is None)")
    return activities_from_events(results.events())


#: elements per row of the flush buffer
_FLUSH_ROW = 1024
#: a profiled run times at most this many calls, one at a time (each call costs a flush, a spin and a sync)
MAX_ISOLATED_CALLS = 32
#: the spin before an isolated call lasts this many times the call's untraced host time, plus ISOLATED_HOLD_US:
#: tracing lengthens the host side of a launch (Triton's launcher most), and a spin that runs out before the
#: call is queued puts host time into the call's window (measured on the H200: 1.5x + 50 µs ran out for
#: Liger's forward at 4096x4096)
ISOLATED_HOLD_FACTOR, ISOLATED_HOLD_US = 4.0, 300.0


class KernelTimer:
    """Profiled runs of callables on one GPU, one call at a time, as Nsight Compute times a kernel.

    Each call runs alone: the device is idle before it, and in cold runs (`clean=True`) the last-level cache
    was first cleaned by a read pass over twice its size (a read evicts the previous call's dirty lines
    without leaving new ones, so no call pays for another's write-back, as under ncu's cache control). The
    stream is held by the spin kernel while the call is enqueued, and CUDA events around the call give its
    window. Every run is made twice, without and with the profiler: the profiled run gives the kernels'
    own durations, the unprofiled one the call's window when nothing traces it. Activity tracing slows
    some kernels. On the H200, Liger's and Inductor's Triton LayerNorm forwards at 32768x8192 run 15–18 µs
    longer traced, and the lengthening sits inside their kernel records (ncu agrees with the records less it).
    ATen's kernels and plain Triton copies show no shift. So where the traced windows are significantly
    longer than the untraced ones, kernel time is the records less that difference, never above the
    untraced window (lnbench.measure.kernel_stats.worker_summary).
    The helpers' own kernels (spin, flush) are learnt by name from a profile of them alone and not counted.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device(device)
        self.hold = StreamHold(self.device)
        self._helper_names: frozenset[str] | None = None
        self._flush_buffer: torch.Tensor | None = None

    @staticmethod
    def _profile() -> Any:
        from torch.profiler import ProfilerActivity, profile
        return profile(activities=[ProfilerActivity.CUDA])

    @classmethod
    def set_up_profiler(cls) -> None:
        """Start and stop one empty profiler session: CUPTI's / roctracer's set-up (seconds) without any
        device work, so the workers can pay it side by side once all their stream passes are over."""
        with cls._profile():
            pass

    def flush(self) -> None:
        """Read a buffer twice the last-level cache: the cache is left holding clean lines only. Row sums of
        int32 (1024 per row, one block each): no memset, and a kernel no LayerNorm backend launches."""
        if self._flush_buffer is None:
            rows = max(1, 2 * llc_bytes(self.device)[0] // (4 * _FLUSH_ROW))
            self._flush_buffer = torch.ones(rows, _FLUSH_ROW, dtype=torch.int32, device=self.device)
        self._flush_buffer.sum(dim=1, dtype=torch.int32)

    def helper_names(self) -> frozenset[str]:
        """Names of the spin and flush kernels, from a profile of them alone (learnt once). That first
        profiler session also absorbs CUPTI's / roctracer's set-up before any timed call is profiled."""
        if self._helper_names is None:
            synchronize(self.device)
            self.hold.hold(0.0)                          # calibrates outside the profile
            self.flush()
            synchronize(self.device)
            with self._profile() as prof:
                self.hold.hold(20.0)
                self.flush()
                synchronize(self.device)
            activities = device_activities(prof)
            if any(a.kind != "kernel" for a in activities):  # a memset or copy could not be told from the calls'
                raise RuntimeError("the flush or spin issued non-kernel device work: "
                                   + ", ".join(sorted({a.name for a in activities if a.kind != "kernel"})))
            self._helper_names = frozenset(a.name for a in activities)
        return self._helper_names

    def _isolated(self, fn: Callable[[], object], calls: int, clean: bool, host_us_per_call: float
                  ) -> tuple[list[float], int]:
        """`calls` calls one at a time -> (event window µs of each call, how many spins ran out early)."""
        stream = torch.cuda.current_stream(self.device)
        windows, short = [], 0
        for _ in range(calls):
            if clean:
                self.flush()
            synchronize(self.device)
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            if self.hold.available:
                self.hold.hold(ISOLATED_HOLD_FACTOR * host_us_per_call + ISOLATED_HOLD_US)
            start.record(stream)
            fn()
            short += int(self.hold.available and bool(start.query()))
            end.record(stream)
            end.synchronize()
            windows.append(start.elapsed_time(end) * 1e3)
        return windows, short

    def run(self, fn: Callable[[], object], iters: int, *, clean: bool, host_us_per_call: float = 0.0
            ) -> dict[str, Any]:
        """One profiled run of min(iters, MAX_ISOLATED_CALLS) isolated calls -> kernel_stats.run_record."""
        calls = max(1, min(int(iters), MAX_ISOLATED_CALLS))
        exclude = self.helper_names()
        bare, _ = self._isolated(fn, calls, clean, host_us_per_call)
        with self._profile() as prof:
            traced, short = self._isolated(fn, calls, clean, host_us_per_call)
        return kernel_stats.run_record(device_activities(prof), calls, exclude=exclude,
                                       window_us=statistics.median(traced), bare_window_us=statistics.median(bare),
                                       spin_short=short > 0)


def measure_kernels(fn: Callable[[], object], device: torch.device, *, iters: int, runs: int, clean: bool,
                    host_us_per_call: float = 0.0, timer: KernelTimer | None = None) -> dict[str, Any]:
    """R profiled runs (fn already warm; `clean`: cold-cache calls) -> kernel_stats.worker_summary. Errors are
    returned as an "error" summary (one line), never raised: the stream-time result of the case stands."""
    try:
        timer = timer or KernelTimer(device)
        records = [timer.run(fn, iters, clean=clean, host_us_per_call=host_us_per_call) for _ in range(runs)]
    except Exception as exc:  # noqa: BLE001 - a profiler failure must not lose the stream-time result
        return kernel_stats.not_available(one_line(exc, 300), "error")
    summary = kernel_stats.worker_summary(records)
    if summary["status"] == "ok":
        summary.update(iters=records[0]["iters"], clean=bool(clean), held=timer.hold.available)
    return summary

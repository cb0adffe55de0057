"""The kernel timer: the per-call sum of the kernels' own durations, from the GPU activity records that torch's
profiler collects (CUPTI on CUDA, roctracer / rocprofiler on ROCm).

One profiled run = one `torch.profiler.profile(activities=[ProfilerActivity.CUDA])` session around I calls,
with the same stream conditions as the stream-timed run it mirrors ("held": the stream is first held by the
spin kernel so the calls run back to back; otherwise plain back-to-back calls). The profiler's raw records
(`prof.profiler.kineto_results.events()`, each with device_type(), name(), start_ns(), duration_ns() and,
in newer torch, activity_type()) are filtered to device-side activity; kernels, memcpy and memset issued by
the calls are counted (lnbench.perf.kernel_stats), the harness's spin kernel is not (its names are learnt
from a profile of the spin alone). Kernel runs always come AFTER every stream-timed run of the process, so
the profiler (and CUPTI staying loaded) never touches a stream-time figure.

Where no device activity exists (the CPU, the emulated device, any device whose times are not real, a torch
build without GPU profiling) `unavailable_reason` says why and no kernel run is made.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Iterable

import torch

from lnbench.perf import kernel_stats
from lnbench.perf.kernel_stats import Activity
from lnbench.perf.timing import StreamHold, synchronize

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
#: spin-kernel name fragment, used only if the spin-alone profile recorded nothing
_SPIN_FALLBACK = "spin_kernel"


def unavailable_reason(dev: Any) -> str:
    """'' when kernel time can be measured on `dev` (an lnbench.device.Device), else why not (one line)."""
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


class KernelTimer:
    """Profiled runs of callables on one GPU (the profiler's first start, CUPTI's set-up, is paid once)."""

    def __init__(self, device: torch.device) -> None:
        self.device = torch.device(device)
        self.hold = StreamHold(self.device)
        self._spin_names: frozenset[str] | None = None

    @staticmethod
    def _profile() -> Any:
        from torch.profiler import ProfilerActivity, profile
        return profile(activities=[ProfilerActivity.CUDA])

    def spin_names(self) -> frozenset[str]:
        """Names of the stream-hold spin kernel, from a profile of the spin alone (learnt once). That first
        profiler session also absorbs CUPTI's / roctracer's set-up before any timed call is profiled."""
        if self._spin_names is None:
            synchronize(self.device)
            self.hold.hold(0.0)                          # calibrates outside the profile
            with self._profile() as prof:
                self.hold.hold(20.0)
                synchronize(self.device)
            names = {a.name for a in device_activities(prof) if a.kind == "kernel"}
            self._spin_names = frozenset(names)
        return self._spin_names

    def _excluded(self, held: bool, activities: list[Activity]) -> set[str]:
        if not held:
            return set()
        names = set(self.spin_names())
        if not names:
            names = {a.name for a in activities if _SPIN_FALLBACK in a.name}
        return names

    def run(self, fn: Callable[[], object], iters: int, *, held: bool, host_us_per_call: float = 0.0
            ) -> dict[str, Any]:
        """One profiled run of `iters` calls -> kernel_stats.run_record (window_us: event time per call)."""
        held = held and self.hold.available
        self.spin_names()
        stream = torch.cuda.current_stream(self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        synchronize(self.device)
        short = False
        with self._profile() as prof:
            if held:
                self.hold.hold(1.5 * iters * host_us_per_call + 50.0)
            start.record(stream)
            for _ in range(iters):
                fn()
            short = held and bool(start.query())
            end.record(stream)
            end.synchronize()
        activities = device_activities(prof)
        return kernel_stats.run_record(activities, iters, exclude=self._excluded(held, activities),
                                       window_us=start.elapsed_time(end) * 1e3 / iters, spin_short=short)


def measure_kernels(fn: Callable[[], object], device: torch.device, *, iters: int, runs: int, held: bool,
                    host_us_per_call: float = 0.0, timer: KernelTimer | None = None) -> dict[str, Any]:
    """R profiled runs of I calls (fn already warm) -> kernel_stats.worker_summary. Errors are returned as an
    "error" summary (one line), never raised: the stream-time result of the case stands either way."""
    try:
        timer = timer or KernelTimer(device)
        records = [timer.run(fn, iters, held=held, host_us_per_call=host_us_per_call) for _ in range(runs)]
    except Exception as exc:  # noqa: BLE001 - a profiler failure must not lose the stream-time result
        return kernel_stats.not_available((f"{type(exc).__name__}: {exc}".splitlines() or [""])[0][:300], "error")
    summary = kernel_stats.worker_summary(records)
    if summary["status"] == "ok":
        summary.update(iters=iters, held=bool(held and timer.hold.available))
    return summary

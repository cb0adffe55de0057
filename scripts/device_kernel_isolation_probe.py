"""Issue 12 probe: which way of taking kernel time from the profiler agrees with ncu (one kernel alone)?

For torch and Liger forward (bf16, cold rotation as `lnbench perf --mode cold`), per shape, µs per call:
  stream      held stream, back to back, no profiler (lnbench's stream time)
  prof-b2b    profiler, held stream, back to back (the kernel timer as built)
  prof-iso    profiler, one call at a time (synchronised before and after each call)
  prof-clean  as prof-iso, with L2 left clean before each call (a read pass over 2x L2 evicts dirty lines)
  ev-iso      CUDA events around one call at a time, no profiler (includes the device-side launch)
Run: PYTHONPATH=$PWD python3 scripts/device_kernel_isolation_probe.py [--calls N]; ncu is run separately.
"""
from __future__ import annotations

import statistics
import sys

import torch
from torch.profiler import ProfilerActivity, profile

from lnbench.backends import get_backend
from lnbench.measure.kernel_timer import device_activities
from lnbench.measure.timing import StreamHold, measure, synchronize, warm_up
from lnbench.perf.workloads import build_workload

CALLS = int(sys.argv[sys.argv.index("--calls") + 1]) if "--calls" in sys.argv else 60


def kernel_us(prof, exclude: set[str]) -> list[float]:
    return [a.duration_ns / 1e3 for a in device_activities(prof) if a.kind == "kernel" and a.name not in exclude]


def main() -> None:
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    flush_buf = torch.empty(2 * l2 // 4, dtype=torch.float32, device=dev).uniform_()
    flush = lambda: flush_buf.sum()  # noqa: E731 - reads only: leaves L2 holding clean lines
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        flush(); synchronize(dev)
    flush_names = {a.name for a in device_activities(prof) if a.kind == "kernel"}
    hold = StreamHold(dev)
    hold.hold(0.0)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        hold.hold(20.0); synchronize(dev)
    spin_names = {a.name for a in device_activities(prof) if a.kind == "kernel"}
    print("flush kernels", flush_names, "spin", spin_names, flush=True)
    rows = []
    for backend_name in ("torch", "liger"):
        backend = get_backend(backend_name)
        for m, n in ((4096, 4096), (32768, 8192)):
            w = build_workload(backend, "fwd", "cold", m, n, torch.bfloat16, dev, eps=1e-5, seed=0)
            fn = w.fn
            st = measure(fn, dev, runs=5, warmup_s=0.3, min_warmup_calls=30, target_run_s=0.02,
                         min_iters=150, max_iters=1000, timer="held")
            per_call_host = warm_up(fn, dev, 0.1, 10)[2] * 1e6
            iters = st.iters_per_run
            # profiler, back to back, held
            b2b = []
            for _ in range(3):
                synchronize(dev)
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    hold.hold(1.5 * iters * per_call_host + 50)
                    for _ in range(iters):
                        fn()
                    synchronize(dev)
                b2b += kernel_us(prof, spin_names)
            iso, clean, ev = [], [], []
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(CALLS):
                    synchronize(dev); fn(); synchronize(dev)
            iso = kernel_us(prof, spin_names | flush_names)
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(CALLS):
                    flush(); synchronize(dev); fn(); synchronize(dev)
            clean = kernel_us(prof, spin_names | flush_names)
            for _ in range(CALLS):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                synchronize(dev); a.record(); fn(); b.record(); b.synchronize()
                ev.append(a.elapsed_time(b) * 1e3)
            row = (backend_name, f"{m}x{n}", st.median_us, statistics.median(b2b), statistics.median(iso),
                   statistics.median(clean), statistics.median(ev))
            rows.append(row)
            print(" ".join(f"{v:.2f}" if isinstance(v, float) else str(v) for v in row), flush=True)
            del w, fn
            torch.cuda.empty_cache()
    print(f"{'backend':7} {'shape':10} {'stream':>8} {'prof-b2b':>9} {'prof-iso':>9} {'prof-clean':>10} {'ev-iso':>8}")
    for r in rows:
        print(f"{r[0]:7} {r[1]:10} {r[2]:8.2f} {r[3]:9.2f} {r[4]:9.2f} {r[5]:10.2f} {r[6]:8.2f}")


if __name__ == "__main__":
    main()

"""Issue 12 probe: why does the profiler's record of torch's 4096² forward read ~1 µs below ncu's duration?

Two hypotheses, told apart by kernels of known length:
  offset  ncu's gpu__time_duration holds a fixed per-kernel cost that CUPTI's start/end timestamps do not
          (then a 1-element fill and spin kernels of 2k/20k/200k cycles read longer under ncu by the same µs);
  clock   under ncu the GPU idles between kernels and runs them at a lower SM clock than lnbench's timer,
          which keeps it busy (then the spin kernels read longer in proportion to their cycles, and a
          host-side idle gap before each profiled call reproduces ncu's figure).

  --mode ncu    each workload WORKLOAD_CALLS times, after lnbench's flush and a sync (run under ncu; the fill and
                the copy get no ncu row: ncu's -k matches the fill's base name only, and the copy is a memcpy)
  --mode cupti  the same workloads under torch's profiler: lnbench's KernelTimer (spin-held, flushed), one
                call at a time flushed without the spin, and flushed with an idle gap of 5 ms before the call
Run: PYTHONPATH=$PWD python3 scripts/device_ncu_offset_probe.py --mode cupti
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import Callable

import torch
from torch.profiler import ProfilerActivity, profile

from lnbench.backends import get_backend
from lnbench.measure.kernel_timer import KernelTimer, device_activities
from lnbench.measure.timing import synchronize

WORKLOAD_CALLS = 12
IDLE_S = 0.005


def workloads(dev: torch.device) -> list[tuple[str, Callable[[], object]]]:
    g = torch.Generator(device=dev).manual_seed(0)
    one = torch.randn(1, device=dev, generator=g)
    src = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16, generator=g)
    dst = torch.empty_like(src)
    out: list[tuple[str, Callable[[], object]]] = [
        ("fill 1 element", lambda: one.fill_(1.5)),
        ("copy 32 MiB", lambda: dst.copy_(src)),
    ]
    for cycles in (2_000, 20_000, 200_000):
        out.append((f"spin {cycles} cycles", lambda c=cycles: torch.cuda._sleep(c)))
    backends = ["torch"]
    try:
        import liger_kernel  # noqa: F401
        backends.append("liger")
    except ImportError:
        print("liger-kernel not installed: torch only", flush=True)
    for name in backends:
        backend = get_backend(name)
        for m, n in ((4096, 4096), (32768, 8192)):
            xs = [torch.randn(m, n, device=dev, dtype=torch.bfloat16, generator=g) for _ in range(3)]
            w = torch.randn(n, device=dev, dtype=torch.bfloat16, generator=g)
            b = torch.randn(n, device=dev, dtype=torch.bfloat16, generator=g)
            state = {"i": 0}

            def call(backend=backend, xs=xs, w=w, b=b, state=state) -> object:
                state["i"] += 1
                return backend.forward(xs[state["i"] % 3], w, b, 1e-5, store_stats=True)
            out.append((f"{name} fwd {m}x{n}", call))
    return out


def run_ncu(dev: torch.device) -> None:
    timer = KernelTimer(dev)
    for label, fn in workloads(dev):
        fn(); synchronize(dev)
        for _ in range(WORKLOAD_CALLS):
            timer.flush(); synchronize(dev)
            fn(); synchronize(dev)
        print("ncu workload done:", label, flush=True)


def per_name_us(prof, exclude: frozenset[str]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for a in device_activities(prof):
        if a.kind == "kernel" and a.name not in exclude:
            out.setdefault(a.name, []).append(a.duration_ns / 1e3)
    return out


def run_cupti(dev: torch.device) -> None:
    timer = KernelTimer(dev)
    helpers = timer.helper_names()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        timer.flush(); synchronize(dev)
    flush_names = frozenset(a.name for a in device_activities(prof))
    print("helpers", sorted(helpers), "flush", sorted(flush_names), flush=True)
    print(f"{'workload':24} {'variant':14} {'median µs':>10} {'min':>8} {'max':>8}  kernel")
    for label, fn in workloads(dev):
        fn(); synchronize(dev)
        spin_case = label.startswith("spin")
        variants: dict[str, dict[str, list[float]]] = {}
        if not spin_case:
            rec = timer.run(fn, 32, clean=True, host_us_per_call=30.0)
            variants["lnbench timer"] = {n: [v["ns"] / 1e3 / v["count"]] for n, v in rec["names"].items()}
        for variant, idle in (("flush, no spin", 0.0), ("flush, idle 5ms", IDLE_S)):
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(WORKLOAD_CALLS):
                    timer.flush(); synchronize(dev)
                    if idle:
                        time.sleep(idle)
                    fn(); synchronize(dev)
            variants[variant] = per_name_us(prof, flush_names)
        for variant, names in variants.items():
            for name, vals in names.items():
                tail = vals[1:] if len(vals) > 2 else vals
                print(f"{label:24} {variant:14} {statistics.median(tail):10.2f} {min(tail):8.2f} {max(tail):8.2f}  "
                      f"{name[:70]}", flush=True)


def main() -> None:
    mode = sys.argv[sys.argv.index("--mode") + 1] if "--mode" in sys.argv else "cupti"
    dev = torch.device("cuda")
    (run_ncu if mode == "ncu" else run_cupti)(dev)


if __name__ == "__main__":
    main()

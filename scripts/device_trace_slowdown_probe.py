"""Issue 12 probe: which kernels does activity tracing slow, and why Liger's Triton forward?

For each workload (bf16, one call at a time on a clean L2, lnbench's KernelTimer), µs per call: the kernel
record, the call window traced and untraced, and their difference (the shift tracing adds):
  aten fwd         torch's layer norm (control: not slowed so far)
  liger fwd        Liger's Triton layer norm (slowed so far)
  triton rows      a Triton row copy, one program per row (Liger's launch shape)
  triton persist   the same copy with 4 programs per SM looping over rows (few programs)
  compile fwd      torch.compile's layer norm (Inductor's Triton)
--order profiler-first sets the profiler up before any workload's first call (modules loaded after CUPTI).
Run: PYTHONPATH=$PWD python3 scripts/device_trace_slowdown_probe.py [--order profiler-first] [--rows 32768]
"""
from __future__ import annotations

import sys
from typing import Callable

import torch
import triton
import triton.language as tl

from lnbench.backends import get_backend
from lnbench.measure.kernel_timer import KernelTimer
from lnbench.measure.timing import synchronize


@triton.jit
def _row_copy(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    tl.store(y_ptr + row * n_cols + cols, tl.load(x_ptr + row * n_cols + cols, mask=mask), mask=mask)


@triton.jit
def _persistent_copy(x_ptr, y_ptr, n_rows, n_cols, BLOCK: tl.constexpr):
    cols = tl.arange(0, BLOCK)
    mask = cols < n_cols
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        r = row.to(tl.int64)
        tl.store(y_ptr + r * n_cols + cols, tl.load(x_ptr + r * n_cols + cols, mask=mask), mask=mask)


def arg(name: str, default: str) -> str:
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default


def main() -> None:
    dev = torch.device("cuda")
    m, n = int(arg("--rows", "32768")), 8192
    if arg("--order", "workloads-first") == "profiler-first":
        KernelTimer.set_up_profiler()
    g = torch.Generator(device=dev).manual_seed(0)
    x = torch.randn(m, n, device=dev, dtype=torch.bfloat16, generator=g)
    y = torch.empty_like(x)
    w = torch.randn(n, device=dev, dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, device=dev, dtype=torch.bfloat16, generator=g)
    sms = torch.cuda.get_device_properties(dev).multi_processor_count
    aten, liger, compiled = get_backend("torch"), get_backend("liger"), get_backend("compile")
    work: list[tuple[str, Callable[[], object]]] = [
        ("aten fwd", lambda: aten.forward(x, w, b, 1e-5, store_stats=True)),
        ("liger fwd", lambda: liger.forward(x, w, b, 1e-5, store_stats=True)),
        ("triton rows", lambda: _row_copy[(m,)](x, y, n, BLOCK=n, num_warps=8)),
        ("triton persist", lambda: _persistent_copy[(4 * sms,)](x, y, m, n, BLOCK=n, num_warps=8)),
        ("compile fwd", lambda: compiled.forward(x, w, b, 1e-5, store_stats=True)),
    ]
    timer = KernelTimer(dev)
    print(f"rows {m}, order {arg('--order', 'workloads-first')}", flush=True)
    print(f"{'workload':15} {'record':>9} {'traced':>9} {'untraced':>9} {'shift':>7}  kernels")
    for label, fn in work:
        try:
            for _ in range(3):
                fn()
            synchronize(dev)
            rec = timer.run(fn, 32, clean=True, host_us_per_call=200.0)
        except Exception as exc:  # noqa: BLE001 - a missing backend must not end the probe
            print(f"{label:15} failed: {type(exc).__name__}: {str(exc)[:120]}", flush=True)
            continue
        calls = rec["iters"]
        names = "; ".join(f"{v['count'] / calls:g}x {v['ns'] / 1e3 / v['count']:.2f} {k[:40]}"
                          for k, v in rec["names"].items())
        print(f"{label:15} {rec['total_ns'] / 1e3 / calls:9.2f} {rec['window_us']:9.2f} {rec['bare_window_us']:9.2f} "
              f"{rec['window_us'] - rec['bare_window_us']:7.2f}  {names}", flush=True)


if __name__ == "__main__":
    main()

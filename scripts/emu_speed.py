"""Emulator speed: wall time per launch and wave-instructions per second (not a timed test).

    python scripts/emu_speed.py                     # bf16 64x4096 forward and backward on emu:gfx942
    python scripts/emu_speed.py --shape 256x4096 --arch gfx950 --repeats 5
    python scripts/emu_speed.py --emu-checks none   # the sanitizer checks' cost: compare with the default (all)
    python scripts/emu_speed.py --kernel-src DIR    # FlyDSL's own LayerNorm (--backend flydsl-src) from a checkout

Pin it to one core: `taskset -c 0 python scripts/emu_speed.py`. The first call of each op compiles and decodes;
the figures are the best of the warm repeats, in wall time and in this process's CPU time (on a machine
shared with other work the CPU figure is the one that says what the emulator costs).
"""
from __future__ import annotations

import argparse
import time

import torch

from lnbench.settings import parse_shape
from lnbench.constants import DTYPES
from lnbench.run.device import resolve_device
from lnbench.emu import runtime


def measure(fn, repeats: int) -> tuple[float, float, int]:
    """(best wall seconds, best CPU seconds per call, wave-instructions per call) over warm repeats."""
    fn()
    walls, cpus, instrs = [], [], 0
    for _ in range(repeats):
        with runtime.launch_scope({}) as launches:   # collects the launches' profiles
            t0, c0 = time.perf_counter(), time.process_time()
            fn()
            walls.append(time.perf_counter() - t0)
            cpus.append(time.process_time() - c0)
        instrs = sum(p.total_wave_instructions for p in launches)
    return min(walls), min(cpus), instrs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="gfx942")
    ap.add_argument("--dtype", default="bf16", choices=list(DTYPES))
    ap.add_argument("--shape", default="64x4096")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--emu-checks", default="all", help="sanitizer checks: all, none or a comma list")
    ap.add_argument("--kernel-src", default="", help="a FlyDSL checkout: time its LayerNorm (flydsl-src) instead")
    args = ap.parse_args()
    resolve_device(f"emu:{args.arch}")
    runtime.set_checks(args.emu_checks)
    m, n = parse_shape(args.shape)
    gen = torch.Generator().manual_seed(0)
    dt = DTYPES[args.dtype]
    x = torch.randn(m, n, generator=gen).to(dt)
    w = (torch.rand(n, generator=gen) + 0.5).to(dt)
    b = torch.randn(n, generator=gen).to(dt)
    dy = torch.randn(m, n, generator=gen).to(dt)
    if args.kernel_src:
        from lnbench.backends import FLYDSL_SRC, get_backend, set_kernel_src
        set_kernel_src(args.kernel_src)
        kernels, label = get_backend(FLYDSL_SRC), f"{FLYDSL_SRC} "
    else:
        from lnbench.flydsl import launch as kernels
        label = ""
    _, mean, rstd = kernels.forward(x, w, b, 1e-5)
    ops = {"fwd": lambda: kernels.forward(x, w, b, 1e-5),
           "bwd (main + reduce)": lambda: kernels.backward(dy, x, w, mean, rstd)}
    print(f"{label}emu:{args.arch} {args.dtype} {args.shape}, checks: {args.emu_checks}")
    for name, fn in ops.items():
        wall, cpu, instrs = measure(fn, args.repeats)
        print(f"  {name:20s} {wall * 1e3:8.1f} ms wall, {cpu * 1e3:8.1f} ms CPU per call   {instrs:9d} "
              f"wave-instructions   {instrs / wall / 1e6:6.2f} M/s wall, {instrs / cpu / 1e6:6.2f} M/s CPU")


if __name__ == "__main__":
    main()

"""Wave-instructions per row, lnbench's LayerNorm kernels next to FlyDSL's own, on the emulated device.

    PYTHONPATH=$PWD python scripts/wave_instr_per_row.py --flydsl-src /path/to/FlyDSL \
        --arch gfx942 --dtype bf16 --ops fwd,bwd --ns 256,8192

For every N: lnbench's op (forward with stats; backward = main kernel + partial reduce) and FlyDSL's
(`kernels.norm.layernorm_kernel` of the checkout: build_layernorm_module(store_stats=True) and
build_layernorm_bwd_module) run on the same seeded inputs on emu:<arch>, and each prints executed
wave-instructions per row, and its load/store wave-instructions per row (vmem_load + vmem_store + smem).
FlyDSL's kernels run one block per row, so their per-row counts do not depend on M; lnbench's backward
spreads rows over a persistent grid, so M is chosen to give its programs MIN_ROWS_PER_PROGRAM row groups
each (its least favourable amortisation). A case the emulator cannot run prints the fault's first line.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass

import torch

from lnbench.flydsl import geometry

LDST = ("vmem_load", "vmem_store", "smem")


@dataclass
class Count:
    total: float
    ldst: float
    note: str = ""


def _sum(launches, m: int) -> Count:
    total = sum(p.total_wave_instructions for p in launches)
    ldst = sum(p.wave_instructions.get(c, 0) for p in launches for c in LDST)
    return Count(total / m, ldst / m)


def rows_for(op: str, n: int, dtype: str, arch: str) -> int:
    """M with several row groups per block/program (lnbench's backward: MIN_ROWS_PER_PROGRAM per program)."""
    kind = "fwd" if op == "fwd" else "bwd"
    plan = geometry.row_plan(n, dtype, kind)
    if kind == "fwd":
        return max(4, 4 * plan.rows_per_block) if not plan.streaming else 2
    if plan.streaming:
        return 4 * plan.batch
    return 4 * plan.rows_per_block * geometry.MIN_ROWS_PER_PROGRAM


def lnbench_count(op: str, n: int, dtype: str, arch: str, m: int) -> Count:
    from lnbench.flydsl.inspect import execute_variant
    kernels = execute_variant(op, dtype, m, n, "pointer", arch)
    total = sum(k.total for k in kernels)
    ldst = sum(k.wave_instructions.get(c, 0) for k in kernels for c in LDST)
    return Count(total / m, ldst / m)


def _flydsl_module(src: str, arch: str):
    os.environ["FLYDSL_GPU_ARCH"] = arch
    os.environ["ARCH"] = arch
    if src not in sys.path:
        sys.path.insert(0, src)
    import importlib
    return importlib.import_module("kernels.norm.layernorm_kernel")


def flydsl_count(src: str, op: str, n: int, dtype: str, arch: str, m: int) -> Count:
    """FlyDSL's own kernel (built and compiled for `arch`, typed null placeholders) run on emu:`arch`."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx

    from lnbench.constants import DTYPES
    from lnbench.run.device import activate, emu_device
    from lnbench.emu import runtime
    from lnbench.flydsl.guard import guarded_compile
    from lnbench.flydsl.toolkit import compile_env

    activate(emu_device(arch))
    mod = _flydsl_module(src, arch)
    env = compile_env(arch)
    env.pop("COMPILE_ONLY", None)
    et = {"f32": fx.Float32, "f16": fx.Float16, "bf16": fx.BFloat16}[dtype]
    null = lambda t: flyc.from_c_void_p(t, None)  # noqa: E731
    gen = torch.Generator().manual_seed(0)
    make = lambda *s: torch.randn(*s, generator=gen).to(DTYPES[dtype])  # noqa: E731
    x, w, b, dy = make(m, n), make(n), make(n), make(m, n)
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        if op == "fwd":
            launcher = mod.build_layernorm_module(n, dtype, store_stats=True, eps=1e-5)
            fn = guarded_compile(flyc.compile, launcher, null(et), null(et), null(et), null(et),
                                 null(fx.Float32), null(fx.Float32), m, None, env=env)
            y, mean, rstd = torch.empty_like(x), torch.empty(m), torch.empty(m)
            bufs = {"x": x, "weight": w, "bias": b, "y": y, "mean": mean, "rstd": rstd}
            with runtime.launch_scope(bufs) as launches:
                fn(*(t.data_ptr() for t in bufs.values()), m, None)
        else:
            mean = x.float().mean(1)
            rstd = torch.rsqrt(x.float().var(1, unbiased=False) + 1e-5)
            launcher = mod.build_layernorm_bwd_module(n, dtype)
            fn = guarded_compile(flyc.compile, launcher, null(et), null(et), null(et), null(fx.Float32),
                                 null(fx.Float32), null(et), null(fx.Float32), null(fx.Float32), m, None,
                                 env=env)
            dx, dg, db = torch.empty_like(x), torch.zeros(n), torch.zeros(n)
            bufs = {"x": x, "weight": w, "dy": dy, "mean": mean, "rstd": rstd, "dx": dx, "dgamma": dg,
                    "dbias": db}
            with runtime.launch_scope(bufs) as launches:
                fn(*(t.data_ptr() for t in bufs.values()), m, None)
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return _sum(launches, m)


def _safe(fn, *args) -> Count:
    try:
        return fn(*args)
    except Exception as exc:  # noqa: BLE001 - one case's failure is printed, the rest still run
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return Count(float("nan"), float("nan"), f"{type(exc).__name__}: {first[:100]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flydsl-src", default=os.environ.get("LNBENCH_KERNEL_SRC", ""),
                    help="FlyDSL checkout (its kernels/ package); empty: lnbench's kernels only")
    ap.add_argument("--arch", default="gfx942", choices=["gfx942", "gfx950"])
    ap.add_argument("--dtype", default="bf16", choices=["f32", "f16", "bf16"])
    ap.add_argument("--ops", default="fwd,bwd")
    ap.add_argument("--ns", default="256,512,768,1000,1024,2048,4096,5120,8192,12288,16384,32768,65536")
    args = ap.parse_args(argv)
    print(f"| arch | dtype | op | N | M | lnbench instr/row | FlyDSL instr/row | lnbench ld/st/row | "
          f"FlyDSL ld/st/row | ratio | note |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for op in args.ops.split(","):
        for n in (int(v) for v in args.ns.split(",")):
            m = rows_for(op, n, args.dtype, args.arch)
            ours = _safe(lnbench_count, op, n, args.dtype, args.arch, m)
            theirs = (_safe(flydsl_count, args.flydsl_src, op, n, args.dtype, args.arch, 4)
                      if args.flydsl_src else Count(float("nan"), float("nan"), "no --flydsl-src"))
            ratio = ours.total / theirs.total if theirs.total == theirs.total and theirs.total else float("nan")
            note = "; ".join(x for x in (ours.note and f"lnbench {ours.note}",
                                         theirs.note and f"FlyDSL {theirs.note}") if x)
            print(f"| {args.arch} | {args.dtype} | {op} | {n} | {m} | {ours.total:,.1f} | {theirs.total:,.1f} | "
                  f"{ours.ldst:,.1f} | {theirs.ldst:,.1f} | {ratio:.2f} | {note} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

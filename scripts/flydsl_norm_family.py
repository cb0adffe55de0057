"""Run FlyDSL's whole `kernels/norm` family on lnbench's emulated device, against fp64 torch references.

    python scripts/flydsl_norm_family.py /path/to/FlyDSL               # every kernel x arch x dtype x N
    LNBENCH_KERNEL_SRC=/path/to/FlyDSL python scripts/flydsl_norm_family.py --arch gfx950 --n 7,4096
    python scripts/flydsl_norm_family.py SRC --compile-only            # static opcode survey, no execution
    python scripts/flydsl_norm_family.py SRC --n large --rows 2        # only the long rows (16384..65536)

Nothing of FlyDSL is copied: its builders are imported from the checkout (sys.path), built and compiled
with FLYDSL_GPU_ARCH set to the case's arch (FlyDSL's builders and compiler both read it), and launched
through FlyDSL's own launch path on lnbench's emulated device (lnbench.run.device.resolve_device("emu:ARCH")).
Each case reports `ok`, `FAIL` (values outside the tolerance, which output and by how much), `fault`
(the emulator's first line: no handler, memory, LDS race) or `error` (the builder or compiler failed),
plus the opcodes the code object holds that the emulator has no handler for. --json writes every row.
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import inspect
import json
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
#: max |out - ref| / max(1, max |ref|) allowed per output dtype: a few units in the last place of the
#: stored value (f32 outputs computed in f32 over rows of up to 8192 elements get a little more room)
TOL = {"f32": 2e-5, "f16": 2e-3, "bf16": 1.6e-2}
EPS = 1e-5
M_ROWS = 3                 # rows per case (--rows): enough for several workgroups, cheap to emulate
SMALL_N = (7, 256, 257, 1000, 4096, 4097, 8192)
#: long rows: FlyDSL's fully unrolled paths keep values in AGPRs here (v_accvgpr_*; quant kernels from 32768)
LARGE_N = (16384, 32768, 65536)
TWO_STAGE_PROGRAMS = 2     # workgroups of the two-stage RMSNorm backward (each reduces a share of the rows)


# ---------------------------------------------------------------- fp64 references
def _ln_stats(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    mean = x.mean(1, keepdim=True)
    rstd = 1.0 / torch.sqrt(((x - mean) ** 2).mean(1, keepdim=True) + EPS)
    return mean, rstd


def _rms(x: torch.Tensor) -> torch.Tensor:
    return 1.0 / torch.sqrt((x * x).mean(1, keepdim=True) + EPS)


def _quant(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-row symmetric int8: scale = max|y| / 127, q = trunc(y / scale) clamped to +-127."""
    scale = y.abs().amax(1) / 127.0
    scale = torch.where(scale == 0, torch.ones_like(scale), scale)
    return torch.clamp(torch.trunc(y / scale[:, None]), -127, 127), scale


def _grads(fn: Callable[..., torch.Tensor], inputs: list[torch.Tensor], dy: torch.Tensor) -> list[torch.Tensor]:
    leaves = [t.clone().requires_grad_(True) for t in inputs]
    out = fn(*leaves)
    return list(torch.autograd.grad(out, leaves, dy))


# ---------------------------------------------------------------- the family
@dataclass
class Kernel:
    """One builder of the family: its arguments (name -> how to make it) and its reference."""

    name: str
    module: str
    builder: str
    args: list[tuple[str, str]]          # (name, spec): spec x/w/xs (row data), y/s/q/ws/acc (outputs)
    reference: Callable[[dict[str, torch.Tensor]], dict[str, torch.Tensor]]
    kwargs: Callable[[int, str], dict[str, Any]] = field(default=lambda n, dt: {})
    positional: Callable[[int, str], tuple] = field(default=lambda n, dt: ())


def _ref_ln(b: dict) -> dict:
    mean, rstd = _ln_stats(b["Input"])
    y = (b["Input"] - mean) * rstd * b["Gamma"] + b["Beta"]
    return {"Output": y, "Mean": mean[:, 0], "Rstd": rstd[:, 0]}


def _ref_ln_bwd(b: dict) -> dict:
    def f(x, g, beta):
        mean, rstd = _ln_stats(x)
        return (x - mean) * rstd * g + beta
    dx, dg, db = _grads(f, [b["Input"], b["Gamma"], torch.zeros_like(b["Gamma"])], b["DY"])
    return {"DX": dx, "DGamma": dg, "DBias": db}


def _ref_fused_add(norm: Callable[[dict], dict]) -> Callable[[dict], dict]:
    def ref(b: dict) -> dict:
        # the kernels' contract (as FlyDSL's own tests state it): the sum is stored in the row dtype
        # (ResidualOut) and that rounded sum is what gets normalised
        added = b["Input"] + b["ResidualIn"]
        added = added.to(b["_dtype"]).double()
        out = norm({**b, "Input": added})
        return {**out, "ResidualOut": added}
    return ref


def _ref_quant(norm: Callable[[dict], dict]) -> Callable[[dict], dict]:
    def ref(b: dict) -> dict:
        out = norm(b)
        y = out.pop("Output")
        if "XScale" in b:
            y = y * b["XScale"]
        q, scale = _quant(y)
        return {**{k: v for k, v in out.items() if k == "ResidualOut"}, "Output": q, "YScale": scale}
    return ref


def _ref_rms(b: dict) -> dict:
    rstd = _rms(b["Input"])
    return {"Output": b["Input"] * rstd * b["Gamma"], "Rstd": rstd[:, 0]}


def _ref_rms_bwd(b: dict) -> dict:
    x = b.get("Input", b.get("Added"))
    dx, dw = _grads(lambda x, g: x * _rms(x) * g, [x, b["Gamma"]], b["DY"])
    if "DResidualOut" in b:
        dx = dx + b["DResidualOut"]
    return {"DX": dx, "DWeight": dw}


def _ref_softmax(b: dict) -> dict:
    return {"C": torch.softmax(b["A"], 1)}


def _ref_softmax_bwd(b: dict) -> dict:
    y, dy = b["Y"], b["DY"]
    return {"DX": y * (dy - (dy * y).sum(1, keepdim=True))}


X, W = "x", "w"
LN, RMS, SMX = "kernels.norm.layernorm_kernel", "kernels.norm.rmsnorm_kernel", "kernels.norm.softmax_kernel"
RMSB, SMXB = "kernels.norm.rmsnorm_bwd_kernel", "kernels.norm.softmax_bwd_kernel"
_LN_IN = [("Input", X), ("Gamma", W), ("Beta", W)]
_FA_LN_IN = [("Input", X), ("ResidualIn", X), ("Gamma", W), ("Beta", W)]
_RMS_BWD = [("Input", "x"), ("Gamma", W), ("DY", X), ("Rstd", "rstd"), ("DX", "y"), ("DWeight", "acc")]
_FA_RMS_BWD = [("Added", "x"), ("Gamma", W), ("DY", X), ("DResidualOut", X), ("Rstd", "rstd"), ("DX", "y"),
               ("DWeight", "acc")]
FAMILY = [
    Kernel("layernorm_fwd", LN, "build_layernorm_module", _LN_IN + [("Output", "y"), ("Mean", "s"), ("Rstd", "s")],
           _ref_ln, kwargs=lambda n, dt: {"store_stats": True}),
    Kernel("layernorm_fwd_nostats", LN, "build_layernorm_module", _LN_IN + [("Output", "y")], _ref_ln),
    Kernel("layernorm_bwd", LN, "build_layernorm_bwd_module",
           [("Input", X), ("Gamma", W), ("DY", X), ("Mean", "mean"), ("Rstd", "rstd"), ("DX", "y"),
            ("DGamma", "acc"), ("DBias", "acc")], _ref_ln_bwd),
    Kernel("fused_add_layernorm", LN, "build_fused_add_layernorm_module",
           _FA_LN_IN + [("Output", "y"), ("ResidualOut", "y")], _ref_fused_add(_ref_ln)),
    Kernel("layernorm_dynamicquant", LN, "build_layernorm_dynamicquant_module",
           _LN_IN + [("Output", "q"), ("YScale", "s")], _ref_quant(_ref_ln)),
    Kernel("layernorm_smoothquant", LN, "build_layernorm_smoothquant_module",
           _LN_IN + [("XScale", "xs"), ("Output", "q"), ("YScale", "s")], _ref_quant(_ref_ln)),
    Kernel("fused_add_layernorm_dynamicquant", LN, "build_fused_add_layernorm_dynamicquant_module",
           _FA_LN_IN + [("Output", "q"), ("ResidualOut", "y"), ("YScale", "s")], _ref_quant(_ref_fused_add(_ref_ln))),
    Kernel("fused_add_layernorm_smoothquant", LN, "build_fused_add_layernorm_smoothquant_module",
           _FA_LN_IN + [("XScale", "xs"), ("Output", "q"), ("ResidualOut", "y"), ("YScale", "s")],
           _ref_quant(_ref_fused_add(_ref_ln))),
    Kernel("rmsnorm_fwd", RMS, "build_rmsnorm_module", [("Input", X), ("Gamma", W), ("Output", "y"), ("Rstd", "s")],
           _ref_rms, kwargs=lambda n, dt: {"store_rstd": True}),
    Kernel("rmsnorm_fwd_norstd", RMS, "build_rmsnorm_module", [("Input", X), ("Gamma", W), ("Output", "y")], _ref_rms),
    Kernel("fused_add_rmsnorm", RMS, "build_fused_add_rmsnorm_module",
           [("Input", X), ("ResidualIn", X), ("Gamma", W), ("Output", "y"), ("ResidualOut", "y"), ("Rstd", "s")],
           _ref_fused_add(_ref_rms), kwargs=lambda n, dt: {"store_rstd": True}),
    Kernel("rmsnorm_dynamicquant", RMS, "build_rmsnorm_dynamicquant_module",
           [("Input", X), ("Gamma", W), ("Output", "q"), ("YScale", "s")], _ref_quant(_ref_rms)),
    Kernel("rmsnorm_smoothquant", RMS, "build_rmsnorm_smoothquant_module",
           [("Input", X), ("Gamma", W), ("XScale", "xs"), ("Output", "q"), ("YScale", "s")], _ref_quant(_ref_rms)),
    Kernel("fused_add_rmsnorm_dynamicquant", RMS, "build_fused_add_rmsnorm_dynamicquant_module",
           [("Input", X), ("ResidualIn", X), ("Gamma", W), ("Output", "q"), ("ResidualOut", "y"), ("YScale", "s")],
           _ref_quant(_ref_fused_add(_ref_rms))),
    Kernel("fused_add_rmsnorm_smoothquant", RMS, "build_fused_add_rmsnorm_smoothquant_module",
           [("Input", X), ("ResidualIn", X), ("Gamma", W), ("XScale", "xs"), ("Output", "q"), ("ResidualOut", "y"),
            ("YScale", "s")], _ref_quant(_ref_fused_add(_ref_rms))),
    Kernel("rmsnorm_bwd", RMSB, "build_rmsnorm_bwd_module", _RMS_BWD, _ref_rms_bwd),
    Kernel("fused_add_rmsnorm_bwd", RMSB, "build_fused_add_rmsnorm_bwd_module", _FA_RMS_BWD, _ref_rms_bwd),
    Kernel("rmsnorm_bwd_two_stage", RMSB, "build_rmsnorm_bwd_two_stage_module",
           _RMS_BWD[:5] + [("DWeight", "yw"), ("DWeightPartial", "part")], _ref_rms_bwd,
           positional=lambda n, dt: (TWO_STAGE_PROGRAMS,)),
    Kernel("fused_add_rmsnorm_bwd_two_stage", RMSB, "build_fused_add_rmsnorm_bwd_two_stage_module",
           _FA_RMS_BWD[:6] + [("DWeight", "yw"), ("DWeightPartial", "part")], _ref_rms_bwd,
           positional=lambda n, dt: (TWO_STAGE_PROGRAMS,)),
    Kernel("softmax_fwd", SMX, "build_softmax_module", [("A", X), ("C", "y")], _ref_softmax,
           positional=lambda n, dt: ()),
    Kernel("softmax_bwd", SMXB, "build_softmax_bwd_module", [("DY", X), ("Y", "prob"), ("DX", "y")], _ref_softmax_bwd),
]


# ---------------------------------------------------------------- one case
@dataclass
class Row:
    kernel: str
    arch: str
    dtype: str
    n: int
    status: str = ""                     # ok | FAIL | fault | error
    detail: str = ""
    errors: dict[str, float] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    opcodes: list[str] = field(default_factory=list)
    ledger: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0


@contextlib.contextmanager
def _arch_env(arch: str):
    old = os.environ.get("FLYDSL_GPU_ARCH")
    os.environ["FLYDSL_GPU_ARCH"] = arch
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("FLYDSL_GPU_ARCH", None)
        else:
            os.environ["FLYDSL_GPU_ARCH"] = old


def make_buffers(k: Kernel, n: int, dt: str, seed: int, m: int = M_ROWS) -> dict[str, torch.Tensor]:
    """Fresh seeded inputs (never zeros) and output buffers of m rows for kernel k."""
    g = torch.Generator().manual_seed(seed)
    tdt = DTYPES[dt]
    out: dict[str, torch.Tensor] = {}
    base = torch.randn(m, n, generator=g, dtype=torch.float64)
    for name, spec in k.args:
        if spec == "x":
            out[name] = torch.randn(m, n, generator=g, dtype=torch.float64).to(tdt)
        elif spec == "w":
            out[name] = (torch.rand(n, generator=g, dtype=torch.float64) + 0.5).to(tdt)
        elif spec == "xs":
            out[name] = (torch.rand(n, generator=g, dtype=torch.float64) + 0.5).to(tdt)
        elif spec == "prob":
            out[name] = torch.softmax(base, 1).to(tdt)
        elif spec == "y":
            out[name] = torch.full((m, n), float("nan"), dtype=tdt)
        elif spec == "yw":
            out[name] = torch.full((n,), float("nan"), dtype=tdt)
        elif spec == "q":
            out[name] = torch.full((m, n), 99, dtype=torch.int8)
        elif spec == "s":
            out[name] = torch.full((m,), float("nan"), dtype=torch.float32)
        elif spec == "acc":
            out[name] = torch.zeros(n, dtype=torch.float32)   # accumulators the caller zeroes
        elif spec == "part":
            out[name] = torch.full((TWO_STAGE_PROGRAMS * n,), float("nan"), dtype=torch.float32)
        elif spec in ("mean", "rstd"):
            x = (out["Input"] if "Input" in out else out["Added"]).double()
            mean, rstd = _ln_stats(x) if k.name.startswith("layernorm") else (None, _rms(x))
            out[name] = (mean if spec == "mean" else rstd)[:, 0].float()
        else:
            raise ValueError(spec)
    return out


def compare(k: Kernel, dt: str, buffers: dict[str, torch.Tensor]) -> tuple[dict[str, float], list[str]]:
    """(normalised error per output, failures)."""
    inputs = {name: buffers[name].double() for name, spec in k.args if spec in ("x", "w", "xs", "prob", "mean",
                                                                                  "rstd")}
    ref = k.reference({**inputs, "_dtype": DTYPES[dt]})
    errors, bad = {}, []
    specs = dict(k.args)
    for name, expected in ref.items():
        if name not in buffers:
            continue
        got = buffers[name].double()
        spec = specs[name]
        if spec == "q":                               # int8: trunc() at a boundary may differ by one step
            err = float((got - expected).abs().max())
            tol = 1.0
        else:
            scale = max(1.0, float(expected.abs().max()))
            err = float((got - expected).abs().max()) / scale if torch.isfinite(got).all() else float("inf")
            out_dt = dt if spec in ("y", "yw") else "f32"
            tol = TOL[out_dt] * (4 if spec in ("acc", "yw") else 1)     # sums over the rows
        errors[name] = err
        if not err <= tol:
            bad.append(f"{name} err {err:.3g} > {tol:.3g}")
    return errors, bad


def run_case(k: Kernel, src: str, arch: str, dt: str, n: int, execute: bool, m: int = M_ROWS) -> Row:
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from lnbench.emu.codeobject import read_code_object
    from lnbench.emu.coverage import code_object_of, opcodes, unsupported
    from lnbench.emu.errors import EmulatorFault
    from lnbench.emu.ledger import ledger
    from lnbench.flydsl.guard import guarded_compile
    from lnbench.flydsl.toolkit import compile_env
    row = Row(k.name, arch, dt, n)
    t0 = time.perf_counter()
    buffers = make_buffers(k, n, dt, seed=1000 + n, m=m)
    try:
        with _arch_env(arch):
            module = __import__(k.module, fromlist=[k.builder])
            builder = getattr(module, k.builder)
            if k.builder == "build_softmax_module":
                launcher = builder(m, n, dt)
            else:
                launcher = builder(n, dt, *k.positional(n, dt), **k.kwargs(n, dt))
            pointer = _is_pointer_abi(launcher)
            names = [a for a, _ in k.args]
            tensors = [buffers[a] for a in names]
            if pointer:
                table = {torch.float32: fx.Float32, torch.float16: fx.Float16, torch.bfloat16: fx.BFloat16}
                cargs = [flyc.from_c_void_p(table[t.dtype], None) for t in tensors]
            else:
                cargs = tensors
            env = compile_env(arch)
            env.pop("COMPILE_ONLY", None)       # the callable is wanted back: it launches on the emulator
            compiled = guarded_compile(flyc.compile, launcher, *cargs, m, None, env=env)
        co = code_object_of(compiled)
        co_arch = read_code_object(co).arch
        if co_arch != arch:
            raise RuntimeError(f"code object is for {co_arch}, asked for {arch}")
        counts = opcodes(co)
        row.opcodes = sorted(counts)
        row.missing = sorted(unsupported(co))        # no handler, an encoding or a modifier field not emulated
    except Exception as exc:  # noqa: BLE001 - a builder or compile failure is this case's row
        row.status, row.detail = "error", _first_line(exc)
        row.seconds = time.perf_counter() - t0
        return row
    if not execute:
        row.status = "compiled"
        row.seconds = time.perf_counter() - t0
        return row
    from lnbench.emu import runtime
    runtime.activate(arch)
    args = [t.data_ptr() for t in tensors] if pointer else tensors
    try:
        with runtime.launch_scope(buffers) as launches:
            compiled(*args, m, None)
        row.ledger = ledger(launches)
    except EmulatorFault as exc:
        row.status, row.detail = "fault", _first_line(exc)
        if "LDS race" not in str(exc):
            row.seconds = time.perf_counter() - t0
            return row
        try:
            buffers = _rerun_without_race_check(compiled, pointer, k, n, dt, m)   # the values past the race
        except EmulatorFault as again:
            row.detail += f" | with the LDS race checker off: {_first_line(again)}"
            row.seconds = time.perf_counter() - t0
            return row
    row.errors, bad = compare(k, dt, buffers)
    if row.status == "fault":
        row.detail += f" | values with the LDS race checker off: {'; '.join(bad) or 'within tolerance'}"
    else:
        row.status, row.detail = ("FAIL", "; ".join(bad)) if bad else ("ok", "")
    row.seconds = time.perf_counter() - t0
    return row


def _rerun_without_race_check(compiled: Any, pointer: bool, k: Kernel, n: int, dt: str, m: int
                              ) -> dict[str, torch.Tensor]:
    """Launch again on fresh buffers (same seed) with the LDS race checker off: the values the emulator's one
    wave order produces, to judge the arithmetic apart from the race."""
    from lnbench.emu import ops_memory, runtime
    buffers = make_buffers(k, n, dt, seed=1000 + n, m=m)
    tensors = [buffers[a] for a, _ in k.args]
    ops_memory.LDS_RACE_CHECK["on"] = False
    try:
        with runtime.launch_scope(buffers):
            compiled(*([t.data_ptr() for t in tensors] if pointer else tensors), m, None)
    finally:
        ops_memory.LDS_RACE_CHECK["on"] = True
    return buffers


def _is_pointer_abi(launcher: Any) -> bool:
    """True when the launcher's buffer arguments are annotated fx.Pointer (else fx.Tensor)."""
    fn = getattr(launcher, "func", None) or getattr(launcher, "__wrapped__", None) or launcher
    anns = [p.annotation for p in inspect.signature(fn).parameters.values()]
    return any(getattr(a, "__name__", str(a)).endswith("Pointer") for a in anns)


def _write_json(path: str, rows: list[Row]) -> None:
    with open(path, "w") as fh:
        json.dump([r.__dict__ for r in rows], fh, indent=1)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:300]


# ---------------------------------------------------------------- the matrix
def _row_lengths(text: str) -> list[int]:
    """--n: numbers and the names small, large, all."""
    named = {"small": SMALL_N, "large": LARGE_N, "all": SMALL_N + LARGE_N}
    out: list[int] = []
    for word in filter(None, (w.strip() for w in text.split(","))):
        out += named[word] if word in named else [int(word)]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("src", nargs="?", default=os.environ.get("LNBENCH_KERNEL_SRC"),
                    help="FlyDSL checkout (default $LNBENCH_KERNEL_SRC)")
    ap.add_argument("--arch", default="gfx942,gfx950")
    ap.add_argument("--dtype", default="f32,f16,bf16")
    ap.add_argument("--n", default="all", help="comma-separated row lengths, or small, large, all "
                    f"(small: {','.join(map(str, SMALL_N))}; large: {','.join(map(str, LARGE_N))})")
    ap.add_argument("--rows", type=int, default=M_ROWS, help=f"rows per case (default {M_ROWS})")
    ap.add_argument("--kernel", default="", help="comma-separated kernel names (default: the whole family)")
    ap.add_argument("--compile-only", action="store_true", help="build and survey opcodes, do not execute")
    ap.add_argument("--json", default="", help="write every row here")
    a = ap.parse_args(argv)
    if not a.src or not os.path.isdir(os.path.join(a.src, "kernels", "norm")):
        print(f"error: not a FlyDSL checkout (no kernels/norm): {a.src!r}; pass it or set LNBENCH_KERNEL_SRC")
        return 2
    sys.path.insert(0, os.path.abspath(a.src))
    from lnbench.run.device import resolve_device
    arches = a.arch.split(",")
    if not a.compile_only:
        resolve_device(f"emu:{arches[0]}")          # before FlyDSL loads its runtime: the stand-in HIP library
    wanted = set(filter(None, a.kernel.split(",")))
    family = [k for k in FAMILY if not wanted or k.name in wanted]
    rows: list[Row] = []
    for arch in arches:
        for k in family:
            for dt in a.dtype.split(","):
                for n in _row_lengths(a.n):
                    row = run_case(k, a.src, arch, dt, n, execute=not a.compile_only, m=a.rows)
                    rows.append(row)
                    miss = f" missing={','.join(row.missing)}" if row.missing else ""
                    errs = " ".join(f"{o}={e:.2g}" for o, e in row.errors.items())
                    print(f"{row.status:8s} {arch} {k.name:34s} {dt:4s} N={n:<5d} {row.seconds:6.1f}s "
                          f"{errs} {row.detail}{miss}", flush=True)
                    if a.json:                      # after every case: a long run cut short keeps its rows
                        _write_json(a.json, rows)
    tally = collections.Counter(r.status for r in rows)
    missing = collections.Counter(op for r in rows for op in r.missing)
    print(f"\n{len(rows)} cases: " + ", ".join(f"{v} {k}" for k, v in sorted(tally.items())))
    if missing:
        print("instructions the emulator refuses (cases): " + ", ".join(f"{o} ({c})" for o, c in missing.most_common()))
    return 0 if all(r.status in ("ok", "compiled") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())

"""The emulator's differential harness: what a set of kernel launches produced, as plain JSON-ready digests.

A case runs kernels on the emulated device with every sanitizer check on and records, per case: the SHA-256 of
every output buffer, every launch's profile (wave-instructions per class and per opcode, steps, bytes per buffer,
LDS bytes and bank cycles, benign LDS writes, the code object's hash), the fidelity ledger and the first fault's
full message (a sanitizer finding). `scripts/emu_differential.py` writes them to tests/data/emu_differential.json;
tests/test_emu_differential.py runs the same cases on the current emulator and compares: a faster emulator must
give every one of these bit for bit.

Two families:
- lnbench's own kernels (lnbench.flydsl.launch): fwd, fwd-nostats, bwd deterministic (main + reduce) and atomic,
  f32/f16/bf16, gfx942 and gfx950, both ABIs, at a few tiny shapes (one per kind of row plan);
- FlyDSL's `kernels/norm` family (scripts/flydsl_norm_family.py) from the checkout in $LNBENCH_KERNEL_SRC, run as
  that script runs it (LDS races included: the quant kernels' are findings the fixture keeps).
"""
from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import sys
from pathlib import Path
from typing import Any, Iterator

import torch

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "tests" / "data" / "emu_differential.json"
ARCHES = ("gfx942", "gfx950")
DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
#: lnbench's kernels: (M, N) shapes, each a different row plan (one lane a row, ragged, rows sharing a wave,
#: a multi-wave row with LDS partials and the backward's reduce)
LNBENCH_SHAPES = ((1, 1), (3, 7), (5, 257), (37, 64), (2, 4096))
#: FlyDSL's family: a sample covering every builder at two row lengths (odd / one wave of vectors) on both arches;
#: FAMILY_FULL is the whole matrix (scripts/emu_differential.py --full)
FAMILY_SAMPLE_N = (7, 257)
FAMILY_SAMPLE_DTYPES = ("bf16",)


def _sha(t: torch.Tensor) -> str:
    return hashlib.sha256(t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes()).hexdigest()[:24]


def profile_digest(p: Any) -> dict[str, Any]:
    """Everything a LaunchProfile reports, JSON-ready."""
    return {"kernel": p.kernel, "grid": list(p.grid), "block": list(p.block), "checks": list(p.checks),
            "wave_instructions": dict(p.wave_instructions), "steps": p.steps,
            "global_bytes_loaded": p.global_bytes_loaded, "global_bytes_stored": p.global_bytes_stored,
            "lds_bytes": p.lds_bytes, "lds_bank_cycles": p.lds_bank_cycles,
            "lds_conflict_cycles": p.lds_conflict_cycles, "vgprs": p.vgprs, "agprs": p.agprs, "sgprs": p.sgprs,
            "lds_alloc": p.lds_alloc, "buffers": {k: v.to_dict() for k, v in p.buffers.items()},
            "opcodes": dict(sorted(p.opcodes.items())), "code": p.code_object_sha256[:24],
            "lds_benign_writes": p.lds_benign_writes}


@contextlib.contextmanager
def _launches() -> Iterator[list[Any]]:
    from lnbench.emu import runtime
    with runtime.recording() as launches:
        yield launches


def _finish(outputs: dict[str, torch.Tensor], launches: list[Any], fault: str = "") -> dict[str, Any]:
    from lnbench.emu.ledger import ledger
    return {"outputs": {k: _sha(v) for k, v in outputs.items() if v is not None},
            "launches": [profile_digest(p) for p in launches], "ledger": ledger(launches), "fault": fault}


# ---------------------------------------------------------------- lnbench's kernels
def lnbench_cases() -> list[str]:
    return [f"lnbench/{arch}/{dt}/{m}x{n}" for arch in ARCHES for dt in DTYPES for m, n in LNBENCH_SHAPES]


def run_lnbench_case(case: str) -> dict[str, Any]:
    """Every variant of lnbench's kernels on one arch, dtype and shape: {variant: digest}."""
    from lnbench.run.device import resolve_device
    from lnbench.emu import runtime
    from lnbench.flydsl import launch
    _, arch, dt, shape = case.split("/")
    m, n = (int(v) for v in shape.split("x"))
    resolve_device(f"emu:{arch}")
    runtime.set_checks("all")
    gen = torch.Generator().manual_seed(m * 7919 + n)
    tdt = DTYPES[dt]
    x = torch.randn(m, n, generator=gen).to(tdt)
    w = (torch.rand(n, generator=gen) + 0.5).to(tdt)
    b = torch.randn(n, generator=gen).to(tdt)
    dy = torch.randn(m, n, generator=gen).to(tdt)
    out: dict[str, Any] = {}
    for abi in ("pointer", "tensor"):
        with _launches() as launches:
            y, mean, rstd = launch.forward(x, w, b, 1e-5, store_stats=True, abi=abi)
        out[f"{abi}/fwd"] = _finish({"y": y, "mean": mean, "rstd": rstd}, launches)
        with _launches() as launches:
            y2, _, _ = launch.forward(x, w, b, 1e-5, store_stats=False, abi=abi)
        out[f"{abi}/fwd-nostats"] = _finish({"y": y2}, launches)
        for strategy in ("deterministic", "atomic"):
            with _launches() as launches:
                dx, dw, db = launch.backward(dy, x, w, mean, rstd, abi=abi, dgamma_strategy=strategy)
            out[f"{abi}/bwd-{strategy}"] = _finish({"dx": dx, "dweight": dw, "dbias": db}, launches)
    return out


# ---------------------------------------------------------------- FlyDSL's norm family
def kernel_src() -> str:
    """The FlyDSL checkout ($LNBENCH_KERNEL_SRC), or '' when none is named."""
    src = os.environ.get("LNBENCH_KERNEL_SRC", "")
    return src if src and (Path(src) / "kernels" / "norm").is_dir() else ""


def family_module() -> Any:
    """scripts/flydsl_norm_family.py as a module (imported once)."""
    name = "lnbench_flydsl_norm_family"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / "flydsl_norm_family.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)                 # type: ignore[union-attr]
    return sys.modules[name]


def family_cases(full: bool = False) -> list[str]:
    fam = family_module()
    ns = fam.SMALL_N if full else FAMILY_SAMPLE_N
    dts = tuple(fam.DTYPES) if full else FAMILY_SAMPLE_DTYPES
    return [f"flydsl/{arch}/{k.name}/{dt}/{n}" for arch in ARCHES for k in fam.FAMILY for dt in dts for n in ns]


def run_family_case(case: str, src: str) -> dict[str, Any]:
    """One case of FlyDSL's family, as scripts/flydsl_norm_family.py runs it: status, the fault's line, the output
    buffers it compares (after a race: those of the rerun with the LDS race checker off) and every launch."""
    from lnbench.run.device import resolve_device
    from lnbench.emu import runtime
    fam = family_module()
    _, arch, kname, dt, n = case.split("/")
    if os.path.abspath(src) not in sys.path:
        sys.path.insert(0, os.path.abspath(src))
    resolve_device(f"emu:{arch}")
    runtime.set_checks("all")
    kernel = next(k for k in fam.FAMILY if k.name == kname)
    seen: dict[str, str] = {}
    real_compare = fam.compare

    def compare(k: Any, dtype: str, buffers: dict[str, torch.Tensor]) -> Any:
        seen.update({name: _sha(t) for name, t in buffers.items()})
        return real_compare(k, dtype, buffers)

    fam.compare = compare
    try:
        with _launches() as launches, contextlib.redirect_stdout(io.StringIO()):
            row = fam.run_case(kernel, src, arch, dt, int(n), execute=True)
    finally:
        fam.compare = real_compare
    digest = _finish({}, launches, fault=row.detail if row.status == "fault" else "")
    digest["outputs"] = seen
    digest["status"] = row.status
    return digest


def run_case(case: str, src: str = "") -> dict[str, Any]:
    return run_family_case(case, src) if case.startswith("flydsl/") else run_lnbench_case(case)

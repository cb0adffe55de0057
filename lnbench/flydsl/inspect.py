"""Facts per kernel variant: compile-only ones read from the compiled ISA and its metadata, and executed
ones from the emulated device (what each launch executed).

Each compile dumps FlyDSL's IR stages into a fresh temp dir (FLYDSL_DUMP_IR) and is guarded
against LLVM `error:` output (guard.py). The arch is switched per compile through ARCH and
FLYDSL_GPU_ARCH: FlyDSL 0.5.0 reads both on every compile (backend instances are cached per
(backend, arch) and the target enters the compile-cache key), so one process can serve both arches.

`execute_variant` runs one variant on M × N inputs (fixed seed) through the public wrappers on the emulated
device and returns an ExecutedKernel per launch: wave-instructions by class, global bytes loaded and
stored (instruction bytes, and the distinct bytes per buffer), LDS bytes, and the same per input row.
"""
from __future__ import annotations

import functools
import glob
import os
import re
import tempfile
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from lnbench.constants import DTYPES, KERNEL_OPS
from lnbench.emu.profile import LaunchCounts
from lnbench.emu.registry import CLASSES
from lnbench.flydsl import dump_cache, geometry, launch
from lnbench.flydsl.guard import guarded_compile
from lnbench.flydsl.toolkit import compile_env
from lnbench.modelled.floors import Launch
from lnbench.results import InspectRow

if TYPE_CHECKING:
    import torch

    from lnbench.emu.profile import LaunchProfile
    from lnbench.flydsl.contract import SourceSpec

_KEYS = ("kernarg_segment_size", "sgpr_count", "vgpr_count", "agpr_count", "sgpr_spill_count",
         "vgpr_spill_count", "group_segment_fixed_size", "private_segment_fixed_size")
_INSTR = re.compile(r"^\s+(?:s|v|ds|buffer|global|flat|scratch)_\w+", re.MULTILINE)
_LOAD128 = re.compile(r"\b(?:buffer|global)_load_(?:dwordx4|b128)\b")
_STORE128 = re.compile(r"\b(?:buffer|global)_store_(?:dwordx4|b128)\b")


@dataclass
class KernelFacts:
    op: str
    kernel_name: str
    arch: str
    abi: str
    dtype: str
    n: int
    kernarg_bytes: int
    kernel_args: list = field(default_factory=list)      # (offset, size, value_kind)
    launcher_slots: int = 0
    vgpr: int = 0
    sgpr: int = 0
    agpr: int = 0
    vgpr_spills: int = 0
    sgpr_spills: int = 0
    lds_bytes: int = 0
    scratch_bytes: int = 0
    loads_128bit: bool = False
    stores_128bit: bool = False
    instruction_count: int = 0
    vectorized: bool = False
    #: the kernel's final ISA as FlyDSL's LLVM backend wrote it (`inspect --isa DIR` saves it; not a table column)
    isa_text: str = field(default="", repr=False)


def parse_isa(text: str) -> dict:
    """Metadata numbers, argument list, instruction count and 128-bit memory ops of one kernel's .s."""
    meta = text[text.index("amdhsa.kernels:"):]
    out: dict = {}
    for key in _KEYS:
        hit = re.search(rf"\.{key}:\s+(\d+)", meta)
        out[key] = int(hit.group(1)) if hit else 0
    args_block = meta.split(".args:", 1)[1].split("\n    .", 1)[0]
    out["args"] = [(int(o), int(s), v) for o, s, v in re.findall(
        r"\.offset:\s+(\d+)\s+\.size:\s+(\d+)\s+\.value_kind:\s+(\w+)", args_block)]
    name = re.search(r"\.name:\s+(\S+)", meta)
    out["name"] = name.group(1) if name else ""
    code = text[:text.index("amdhsa.kernels:")]
    out["instructions"] = len(_INSTR.findall(code))
    out["load128"] = bool(_LOAD128.search(code))
    out["store128"] = bool(_STORE128.search(code))
    return out


def launcher_slots(dump_subdir: str) -> int:
    """Host dispatch slots: the %argN count of the launcher after fly-rewrite-func-signature."""
    paths = glob.glob(os.path.join(dump_subdir, "*_fly_rewrite_func_signature.mlir"))
    if not paths:
        return 0
    with open(paths[0]) as fh:
        sig = re.search(r"func\.func @\w+\((.*?)\) attributes", fh.read(), re.DOTALL)
    return len(re.findall(r"%arg\d+:", sig.group(1))) if sig else 0


def compile_dump(launcher: Callable, args: list, arch: str) -> list[tuple[str, dict, int]]:
    """Compile (COMPILE_ONLY) with IR dumps for `arch`; [(dump subdir name, isa facts, slots)]."""
    return [(name, {**parse_isa(text), "text": text}, slots) for name, text, slots in _dump(launcher, args, arch)]


def _own_dump(variant: tuple, launcher: Callable, args: list, arch: str) -> list[tuple[str, dict, int]]:
    """compile_dump of one of lnbench's own variants, through the disk cache (dump_cache) while the launch
    builders are lnbench's."""
    own = all(getattr(getattr(launch, name), "__module__", "") == launch.__name__
              for name in ("build_fwd_launcher", "build_bwd_launchers"))
    texts = dump_cache.cached_dump(variant, lambda: _dump(launcher, args, arch)) if own else _dump(launcher, args, arch)
    return [(name, {**parse_isa(text), "text": text}, slots) for name, text, slots in texts]


def _dump(launcher: Callable, args: list, arch: str) -> list[tuple[str, str, int]]:
    """The compile of compile_dump: [(dump subdir name, final ISA text, slots)]."""
    with tempfile.TemporaryDirectory(prefix="lnbench-dump-") as tmp:
        env = compile_env(arch, compile_only=True)
        env.update(FLYDSL_DUMP_IR="1", FLYDSL_DUMP_DIR=tmp)
        import flydsl.compiler as flyc
        guarded_compile(flyc.compile, launcher, *args, env=env)
        found = []
        for isa in sorted(glob.glob(os.path.join(tmp, "*", "*_final_isa.s"))):
            sub = os.path.dirname(isa)
            with open(isa) as fh:
                text = fh.read()
            found.append((os.path.basename(sub), text, launcher_slots(sub)))
        if not found:
            raise RuntimeError("FlyDSL produced no ISA dump")
        return found


def _facts(op: str, arch: str, abi: str, plan: geometry.RowPlan, vectorized: bool, dump: tuple) -> KernelFacts:
    _, isa, slots = dump
    return KernelFacts(op=op, kernel_name=isa["name"], arch=arch, abi=abi, dtype=plan.dtype, n=plan.n,
                       kernarg_bytes=isa["kernarg_segment_size"], kernel_args=isa["args"], launcher_slots=slots,
                       vgpr=isa["vgpr_count"], sgpr=isa["sgpr_count"], agpr=isa["agpr_count"],
                       vgpr_spills=isa["vgpr_spill_count"], sgpr_spills=isa["sgpr_spill_count"],
                       lds_bytes=isa["group_segment_fixed_size"], scratch_bytes=isa["private_segment_fixed_size"],
                       loads_128bit=isa["load128"], stores_128bit=isa["store128"],
                       instruction_count=isa["instructions"], vectorized=vectorized, isa_text=isa.get("text", ""))


@functools.lru_cache(maxsize=None)
def _compile_facts(op: str, dtype: str, n: int, abi: str, arch: str, eps: float,
                   strategy: str) -> tuple[KernelFacts, ...]:
    if op not in KERNEL_OPS:
        raise ValueError(f"op must be one of {KERNEL_OPS}, got {op!r}")
    if abi not in launch.ABIS:
        raise ValueError(f"abi must be one of {launch.ABIS}, got {abi!r}")
    dt = geometry.dtype_name(dtype)
    if op in ("fwd", "fwd-nostats"):
        stats = op == "fwd"
        plan = geometry.row_plan(n, dt, "fwd")
        dumps = _own_dump((op, dt, n, abi, arch, eps), launch.build_fwd_launcher(plan, eps, stats, abi),
                          launch.fwd_compile_args(plan, stats, abi), arch)
        return tuple(_facts(op, arch, abi, plan, plan.vectorized, d) for d in dumps)
    launch.check_strategy(strategy)
    plan = geometry.row_plan(n, dt, "bwd")
    main, red = launch.build_bwd_launchers(plan, strategy, abi)
    out = [_facts("bwd", arch, abi, plan, plan.vectorized, d)
           for d in _own_dump((op, dt, n, abi, arch, eps, strategy, "main"), main,
                              launch.bwd_compile_args(plan, abi), arch)]
    if red is not None:
        rp = geometry.reduce_plan(n)
        out += [_facts("bwd", arch, abi, plan, rp.vec == 4, d)
                for d in _own_dump((op, dt, n, abi, arch, eps, strategy, "reduce"), red,
                                   launch.reduce_compile_args(n, dt, abi), arch)]
    return tuple(out)


def compile_facts(op: str, dtype: str | torch.dtype, n: int, abi: str, arch: str, eps: float = 1e-5,
                  dgamma_strategy: str = "deterministic") -> list[KernelFacts]:
    """Compile one variant for `arch` (no GPU needed) and return the facts of every kernel it
    launches: one for fwd / fwd-nostats, main (+ partial-reduce for deterministic) for bwd."""
    return list(_compile_facts(op, geometry.dtype_name(dtype), int(n), abi, arch, float(eps), dgamma_strategy))


def kernel_role(name: str) -> str:
    """Kernel name without its ABI, dtype and width tokens (columns of their own): ln_fwd_bf16_n1024_pointer -> ln_fwd."""
    return re.sub(r"_(pointer|tensor|f32|f16|bf16|n\d+)(?=_|$)", "", name)


def isa_file_name(f: KernelFacts, source: str = "") -> str:
    """`gfx942-pointer-fwd-bf16-N8192-<kernel>.s`: one file per compiled kernel of a variant; a kernel source's
    start with its backend name (two sources, e.g. FlyDSL's and a fork, may name their kernels alike)."""
    kernel, prefix = (re.sub(r"[^A-Za-z0-9_.-]", "_", text) for text in (f.kernel_name, source))
    return f"{prefix + '-' if prefix else ''}{f.arch}-{f.abi}-{f.op}-{f.dtype}-N{f.n}-{kernel or 'kernel'}.s"


def facts_to_rows(facts: list[KernelFacts]) -> list[InspectRow]:
    """inspect rows of compiled kernels (kernel_args as 'offset:size:kind' joined by spaces)."""
    rows = []
    for f in facts:
        cells = asdict(f)
        cells.pop("isa_text")
        cells["kernel_args"] = " ".join(f"{o}:{s}:{k}" for o, s, k in f.kernel_args)
        rows.append(InspectRow.of(cells))
    return rows


# ---------------------------------------------------------------- executed facts (emulated device)

#: the executed profile's instruction classes, in display order
INSTRUCTION_CLASSES = CLASSES
#: the memory checker's name of the kernarg segment (not a buffer of the op: left out of its distinct bytes)
KERNARG = "kernarg segment"


@dataclass(kw_only=True)
class ExecutedKernel(LaunchCounts):
    """What one launch of a variant executed on the emulated device, for M input rows: the launch's counts
    (LaunchCounts) and the case that ran."""

    op: str
    kernel_name: str
    arch: str
    abi: str
    dtype: str
    m: int
    n: int
    dgamma_strategy: str
    buffers: dict[str, dict[str, Any]]  # name -> BufferTraffic fields (distinct bytes: compulsory traffic)
    code_object: str = ""               # sha256 of the code object that executed, 16 hex digits

    #: (the inspect row's exec_instructions)
    total = LaunchCounts.total_wave_instructions

    def unique_bytes(self, include_kernarg: bool = False) -> tuple[int, int]:
        """(distinct bytes loaded, distinct bytes stored) over the launch's buffers."""
        items = [b for name, b in self.buffers.items() if include_kernarg or name != KERNARG]
        return sum(b["unique_loaded"] for b in items), sum(b["unique_stored"] for b in items)

    def as_launch(self) -> Launch:
        """What the modelled floors (lnbench.modelled.floors) take of this launch."""
        loaded, stored = self.unique_bytes()
        threads = self.block[0] * self.block[1] * self.block[2]
        return Launch(workgroups=self.grid[0] * self.grid[1] * self.grid[2], waves_per_group=-(-threads // 64),
                      wave_instructions=dict(self.wave_instructions), unique_bytes=loaded + stored,
                      lds_bank_cycles=self.lds_bank_cycles, vgprs=self.vgprs, agprs=self.agprs, sgprs=self.sgprs,
                      lds_alloc=self.lds_alloc)

    def to_row(self) -> InspectRow:
        """The inspect row of this launch: totals, per-row values and per-class counts."""
        m = max(self.m, 1)
        loaded, stored = self.unique_bytes()
        row = InspectRow(
            op=self.op, kernel_name=self.kernel_name, arch=self.arch, abi=self.abi, dtype=self.dtype, M=self.m,
            n=self.n, dgamma_strategy=self.dgamma_strategy, grid="x".join(map(str, self.grid)),
            block="x".join(map(str, self.block)), waves=self.waves, exec_instructions=self.total,
            exec_instructions_per_row=self.total / m, global_bytes_loaded=self.global_bytes_loaded,
            global_bytes_stored=self.global_bytes_stored,
            global_bytes_per_row=(self.global_bytes_loaded + self.global_bytes_stored) / m,
            lds_bytes_executed=self.lds_bytes, code_object=self.code_object, unique_bytes_loaded=loaded,
            unique_bytes_stored=stored, lds_bank_cycles=self.lds_bank_cycles,
            lds_conflict_cycles=self.lds_conflict_cycles)
        row.set(**{f"exec_{cls}": self.wave_instructions.get(cls, 0) for cls in INSTRUCTION_CLASSES})
        return row


def _kernel_from_profile(p: LaunchProfile, op: str, arch: str, abi: str, dtype: str, m: int, n: int,
                         strategy: str) -> ExecutedKernel:
    return ExecutedKernel(op=op, kernel_name=p.kernel, arch=arch, abi=abi, dtype=dtype, m=m, n=n,
                          dgamma_strategy=strategy if op == "bwd" else "", grid=(*p.grid,),
                          block=(*p.block,), wave_instructions=dict(p.wave_instructions),
                          global_bytes_loaded=p.global_bytes_loaded, global_bytes_stored=p.global_bytes_stored,
                          lds_bytes=p.lds_bytes, buffers={k: v.to_dict() for k, v in p.buffers.items()},
                          code_object=getattr(p, "code_object_sha256", "")[:16],
                          lds_bank_cycles=p.lds_bank_cycles, lds_conflict_cycles=p.lds_conflict_cycles,
                          vgprs=p.vgprs, agprs=p.agprs, sgprs=p.sgprs, lds_alloc=p.lds_alloc)


def execute_variant(op: str, dtype: str, m: int, n: int, abi: str, arch: str, eps: float = 1e-5,
                    dgamma_strategy: str = "deterministic", seed: int = 0,
                    source: "SourceSpec | None" = None) -> list[ExecutedKernel]:
    """Run one variant on seeded M × N inputs on the emulated device for `arch` (activated here; it must be
    available, else LnbenchUsageError) and return what each launch of the op executed (the backward's
    mean/rstd come from an unprofiled forward). With `source`, the variant is that kernel source's launcher
    (its ABI read from the launcher, `abi` ignored)."""
    import torch

    from lnbench.run.device import activate, emu_device
    from lnbench.emu import runtime

    if op not in KERNEL_OPS:
        raise ValueError(f"op must be one of {KERNEL_OPS}, got {op!r}")
    dt = geometry.dtype_name(dtype)
    activate(emu_device(arch))
    gen = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=gen).to(DTYPES[dt])  # noqa: E731
    x, w, b, dy = make(m, n), make(n), make(n), make(m, n)
    fwd: Callable[[bool], tuple]
    bwd: Callable[[Any, Any], object]
    if source is None:
        fwd = lambda stats: launch.forward(x, w, b, eps, stats, abi)  # noqa: E731  (y, mean, rstd)
        bwd = lambda mean, rstd: launch.backward(dy, x, w, mean, rstd, abi, dgamma_strategy)  # noqa: E731
    else:
        from lnbench.flydsl import contract
        kind = "bwd" if op == "bwd" else "fwd"
        launcher = contract.build(source, kind, n, dt, arch, op == "fwd", eps)
        if launcher is None:
            raise ValueError(f"kernel source {source.name} has no {kind} builder")
        abi = launcher.abi
        dgamma_strategy = "accumulate" if op == "bwd" else ""
        fwd = lambda stats: _called(contract.forward_call(source, x, w, b, eps, stats))  # noqa: E731
        bwd = lambda mean, rstd: _called(contract.backward_call(source, dy, x, w, mean, rstd))  # noqa: E731
    if op == "bwd":
        _, mean, rstd = fwd(True)          # the stats: from the same source's forward
        with runtime.launch_scope({}) as launches:
            bwd(mean, rstd)
    else:
        with runtime.launch_scope({}) as launches:
            fwd(op == "fwd")
    return [_kernel_from_profile(p, op, arch, abi, dt, m, n, dgamma_strategy) for p in launches]


def _called(call: Callable[[], None] | None) -> tuple:
    """Run a contract call; its outputs."""
    assert call is not None                 # a backward call: the source's backward builder was found above
    call()
    return call.outputs  # type: ignore[attr-defined]


def source_facts(source: "SourceSpec", op: str, dtype: str, n: int, arch: str, eps: float = 1e-5
                 ) -> list[KernelFacts]:
    """Compile-only facts of a kernel source's launcher for `op` (lnbench.flydsl.contract); [] when the source
    has no backward builder and op is bwd."""
    from lnbench.flydsl import contract
    if op not in KERNEL_OPS:
        raise ValueError(f"op must be one of {KERNEL_OPS}, got {op!r}")
    dt = geometry.dtype_name(dtype)
    built = contract.build(source, "bwd" if op == "bwd" else "fwd", int(n), dt, arch, op == "fwd", float(eps),
                           fresh=True)
    if built is None:
        return []
    out = []
    for _, isa, slots in compile_dump(built.fn, contract.compile_args(built, dt, n=int(n)), arch):
        out.append(KernelFacts(op=op, kernel_name=isa["name"], arch=arch, abi=built.abi, dtype=dt, n=int(n),
                               kernarg_bytes=isa["kernarg_segment_size"], kernel_args=isa["args"],
                               launcher_slots=slots, vgpr=isa["vgpr_count"], sgpr=isa["sgpr_count"],
                               agpr=isa["agpr_count"], vgpr_spills=isa["vgpr_spill_count"],
                               sgpr_spills=isa["sgpr_spill_count"], lds_bytes=isa["group_segment_fixed_size"],
                               scratch_bytes=isa["private_segment_fixed_size"], loads_128bit=isa["load128"],
                               stores_128bit=isa["store128"], instruction_count=isa["instructions"],
                               isa_text=isa.get("text", "")))
    return out

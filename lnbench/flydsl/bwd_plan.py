"""The deterministic backward's plan per (M, N, dtype, target): pure Python, no FlyDSL (issue 55).

Compulsory bytes (lnbench.perf.bytes_model, "bwd"): read x, dy, γ, mean, rstd, write dx, dγ, dβ
    = 3·M·N·e + 3·N·e + 2·M·4.
A plan's distinct bytes are those plus what its design adds. Two families, each deterministic (every sum in a
fixed order, no float atomics):

rows    the persistent row kernel (lnbench.flydsl.kernels_bwd.build_bwd) with P programs, each writing one fp32
        dγ/dβ partial row, then the partial-reduce kernel (build_reduce) adds the P rows per column in a fixed
        order. Extra bytes: 16·P·N (dγ and dβ partials written and read back), plus, where a program's partials
        live in its workspace row (wide rows), 8·N per program that owns a second row group (read-modify-write).
        P is today's grid (geometry.bwd_programs) where that stays within BUDGET of the compulsory bytes, else
        the largest P that does.
strip   for few, long rows, where P programs cannot be both few enough for the partials and many enough to fill
        the GPU. The rows are cut into `chunks` of Mc rows whose x and dy fit half the last-level (Infinity)
        cache; per chunk two launches:
          A  row sums: program (row group, segment) adds Σ dy·γ and Σ dy·γ·x̂ over its `seg` columns of each of
             its rows and writes them, fp32, to C1/C2 [Mc, S_A] (8 B per row and segment);
          B  strip: program (strip, row block) owns `strip` columns; for each of its rows it adds the row's S_A
             partial sums in segment order (c1, c2), reads x and dy of its columns AGAIN, writes dx and adds
             dy·x̂, dy to its dγ/dβ in registers (row slots combined in LDS, slot order). With one row block and
             one chunk its dγ/dβ are final (written in γ's dtype); else one fp32 partial row per (chunk, row
             block) and the partial-reduce kernel adds them.
        B's read of x and dy is a second read. On MI300X/MI325X/MI350X/MI355X (256 MB Infinity Cache) it hits
        the cache when it follows A at once and the chunk's x and dy (≤ half the cache) are still there; the
        plan's `distinct_bytes` count it once (HBM), `model_bytes` count it twice, as the modelled floors do
        (each launch's distinct bytes, summed). Not measured on a GPU.

Memory-bound (the rule): every launch's modelled VALU floor, estimated as lnbench.modelled.floors computes it
from the VALU wave-instructions it would execute (per element VALU_PER_ELEM, measured on the emulated device
for today's kernels, docs/measurements.md; plus VALU_PER_WAVE of fixed work per wave), stays at or below
MEMORY_MARGIN of its memory floor (its bytes over the target's HBM peak). That puts enough waves on enough CUs:
the busiest CU's VALU time, not the count of programs, decides.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from lnbench.constants import ELEM_BYTES
from lnbench.flydsl import geometry
from lnbench.modelled.targets import Target

#: the most a plan's distinct bytes may exceed the compulsory bytes by (issue 55: 1.15×)
BUDGET = 0.15
#: a launch is memory-bound when its estimated VALU floor is at most its memory floor (the modelled floors' rule);
#: the chooser first looks for a plan whose every launch stays under MEMORY_MARGIN of it (the estimate's margin)
MEMORY_MARGIN = 0.9
#: VALU wave-instructions per element of x, per launch kind and arch, 16-bit dtypes (fp32: ×F32_VALU). From the
#: emulated sweeps (docs/measurements.md, "bwd, emu:gfx950" and the gfx942 sweep after item 7): today's main
#: kernel executes 0.12-0.18 (gfx950) and 0.15-0.22 (gfx942) per element; the strip launches are estimated from
#: their code (A: the row-sum half of a row; B: the dx half plus the row's c1/c2 and the dγ/dβ fma)
VALU_PER_ELEM = {"rows": {"gfx950": 0.19, "gfx942": 0.23}, "A": {"gfx950": 0.12, "gfx942": 0.15},
                 "B": {"gfx950": 0.19, "gfx942": 0.23}}
F32_VALU = 1.3
#: scalar-width strips (odd N) execute more VALU per element: the emulated floors of 256x4097 bf16's launch B were
#: 1.00-1.24 of its memory floor where the 16-bit estimate said 0.84-1.02
SCALAR_VALU = 1.4
#: fixed VALU work per wave of a launch (set-up, reductions; the reduce kernel's: its waves executed 25-26 VALU
#: with one step of (vec + 2) at 4096x256 bf16, emulated; B also adds its rows' segment sums)
VALU_PER_WAVE = {"main": 40, "reduce": 20, "A": 40, "B": 60}
#: the share of the last-level cache one chunk's x and dy may take (the rest: dx, other traffic)
LLC_SHARE = 0.5
#: strip widths of launch B tried, in bytes of a row: no narrower than 64 B (below that a wave's loads would use
#: part of every cache line they touch: the L2 would pay what the model does not count)
STRIP_BYTES = (512, 1024, 256, 128, 64)
#: today's grid is kept where it is within BUDGET and its estimated VALU / memory ratio is at most this (the
#: estimate errs by up to ~0.4 either way against the emulated floors: a grid that works is not churned for it)
KEEP_TODAY = 1.4
#: threads of a launch-B block (its row slots × the strip's lanes): more rows at once, fewer trips of its row loop
STRIP_BLOCK = 256
#: the most segments launch A cuts a row into (launch B adds that many partial sums per row)
MAX_SEGMENTS = 16


def compulsory_bytes(m: int, n: int, dtype: object) -> int:
    """Read x, dy, γ, mean, rstd; write dx, dγ, dβ (lnbench.perf.bytes_model.op_bytes("bwd"))."""
    e = ELEM_BYTES[geometry.dtype_name(dtype)]
    return 3 * m * n * e + 3 * n * e + 2 * m * 4


@dataclass(frozen=True)
class LaunchEstimate:
    """One launch of a plan on one target: what it moves and its estimated floors (µs)."""

    name: str
    programs: int
    waves: int                   # per program
    model_bytes: int             # its distinct bytes (what the modelled floors count for it)
    valu: float                  # estimated VALU wave-instructions
    memory_us: float
    valu_us: float

    @property
    def memory_bound(self) -> bool:
        return self.valu_us <= self.memory_us

    @property
    def ratio(self) -> float:
        return self.valu_us / self.memory_us if self.memory_us else math.inf


@dataclass(frozen=True)
class BwdPlan:
    """The backward's plan for one shape and dtype on one arch (valid on `targets`)."""

    m: int
    n: int
    dtype: str
    arch: str
    kind: str                    # "rows" | "strip"
    programs: int                # rows: P; strip: launch B's programs per chunk
    compulsory_bytes: int
    distinct_bytes: int          # HBM bytes (strip: B's second read of x/dy from the Infinity Cache)
    model_bytes: int             # Σ over launches of each one's distinct bytes
    # strip: chunks of rows, rows per chunk, segments of A and their width, B's strip width, strips, row blocks
    chunks: int = 1
    chunk_rows: int = 0
    segments: int = 1
    seg: int = 0
    strip: int = 0
    strips: int = 0
    row_blocks: int = 1
    seg_kind: str = "fwd"        # launch A's segment geometry: the forward's element budget, or the backward's
    targets: tuple[str, ...] = ()
    launches: dict[str, tuple[LaunchEstimate, ...]] = field(default_factory=dict, compare=False)

    @property
    def ratio(self) -> float:
        """distinct / compulsory bytes."""
        return self.distinct_bytes / self.compulsory_bytes

    @property
    def model_ratio(self) -> float:
        return self.model_bytes / self.compulsory_bytes

    @property
    def relies_on_llc(self) -> bool:
        return self.kind == "strip"

    @property
    def partial_rows(self) -> int:
        """fp32 dγ/dβ partial rows the reduce kernel adds (0: none, B writes dγ/dβ)."""
        if self.kind == "rows":
            return self.programs
        rows = self.chunks * self.row_blocks
        return rows if rows > 1 else 0

    def bound(self, target: str | None = None) -> str:
        """'memory' when every launch is memory-bound on the target (every target: None), else the first
        launch that is not, as 'valu (NAME)'."""
        for name, launches in self.launches.items():
            if target is not None and name != target:
                continue
            for est in launches:
                if not est.memory_bound:
                    return f"valu ({est.name})"
        return "memory"

    def worst_ratio(self, target: str | None = None) -> float:
        """The largest estimated VALU / memory floor over the launches."""
        return max((est.ratio for name, ls in self.launches.items() if target in (None, name) for est in ls),
                   default=0.0)

    def describe(self) -> str:
        """One line: plan, its grid, distinct/compulsory bytes (and the model's count where it differs)."""
        head = f"{self.kind} P={self.programs}" if self.kind == "rows" else (
            f"strip {self.strips}x{self.row_blocks} (seg {self.segments}, chunks {self.chunks})")
        tail = (f"; model {self.model_ratio:.2f}x, 2nd x/dy read from LLC" if self.relies_on_llc else "")
        return f"{head}: {self.distinct_bytes / 1e6:.3g}/{self.compulsory_bytes / 1e6:.3g} MB = {self.ratio:.3f}x{tail}"


def _estimate(name: str, programs: int, waves: int, nbytes: int, valu: float, t: Target) -> LaunchEstimate:
    """A launch's memory floor (cold) and VALU floor as lnbench.modelled.floors computes them."""
    g = max(programs, 1)
    busiest = math.ceil(g / t.cus)
    per_wave = valu / (g * waves) + VALU_PER_WAVE[name]
    lanes = t.simd_lanes or 16
    cycles = math.ceil(busiest * waves / t.simds) * per_wave * (64 / lanes)
    return LaunchEstimate(name, g, waves, nbytes, per_wave * g * waves, nbytes / (t.hbm_gbps * 1e3),
                          cycles / t.clock_hz * 1e6)


def _k(kind: str, arch: str, dt: str, vec: int = 0) -> float:
    """VALU wave-instructions per element; scalar-width rows (vec 1: odd N) ×SCALAR_VALU."""
    return VALU_PER_ELEM[kind][arch] * (F32_VALU if dt == "f32" else 1.0) * (SCALAR_VALU if vec == 1 else 1.0)


def _reduce_estimate(rows: int, n: int, wbytes: int, t: Target) -> LaunchEstimate:
    rp = geometry.reduce_plan(n)
    nbytes = 2 * rows * n * 4 + 2 * n * wbytes
    steps = -(-rows // rp.splits)
    valu = rp.grid() * (rp.block // 64) * steps * (rp.vec + 2)
    return _estimate("reduce", rp.grid(), rp.block // 64, nbytes, valu, t)


def rows_extra(m: int, n: int, dtype: object, programs: int) -> int:
    """Workspace bytes of the rows plan with `programs` programs (lnbench.perf.bytes_model.flydsl_bwd_workspace)."""
    plan = geometry.row_plan(n, dtype, "bwd")
    partial = programs * n * 4
    reads = partial
    if not plan.acc_in_registers:
        groups = -(-m // plan.batch)
        reads += max(0, min(programs, groups - programs)) * n * 4
    return 2 * (reads + partial)


def _rows_at(m: int, n: int, dt: str, arch: str, targets: Sequence[Target], p: int) -> BwdPlan:
    rp = geometry.row_plan(n, dt, "bwd")
    comp = compulsory_bytes(m, n, dt)
    extra = rows_extra(m, n, dt, p)
    e = ELEM_BYTES[dt]
    waves = max(1, rp.block // 64)
    launches: dict[str, tuple[LaunchEstimate, ...]] = {}
    for t in targets:
        main_bytes = comp - 2 * n * e + extra - 8 * p * n       # its partial rows written, the RMW read-backs
        main = _estimate("main", p, waves, main_bytes, _k("rows", arch, dt) * m * n, t)
        launches[t.name] = (main, _reduce_estimate(p, n, e, t))
    return BwdPlan(m=m, n=n, dtype=dt, arch=arch, kind="rows", programs=p, compulsory_bytes=comp,
                   distinct_bytes=comp + extra, model_bytes=comp + extra, targets=tuple(t.name for t in targets),
                   launches=launches)


def _rows(m: int, n: int, dt: str, arch: str, targets: Sequence[Target]) -> BwdPlan:
    """Today's grid where it is within BUDGET and memory-bound; else the grid of fewest bytes that is, among
    the largest P within BUDGET and today's P, the CU count and its multiples below it; else the largest P
    within BUDGET."""
    rp = geometry.row_plan(n, dt, "bwd")
    comp = compulsory_bytes(m, n, dt)
    groups = -(-m // (rp.batch if rp.streaming else rp.rows_per_block))
    today = geometry.bwd_programs(m, rp, arch)
    plan = _rows_at(m, n, dt, arch, targets, today)
    if _ok(plan, 1.0) or (plan.ratio <= 1 + BUDGET and plan.worst_ratio() <= KEEP_TODAY):
        return plan                       # today's grid, where it is within BUDGET (and not far from memory-bound)
    cap = today
    while cap > 1 and rows_extra(m, n, dt, cap) > BUDGET * comp:
        cap -= 1
    top = min(groups, 2 * geometry.CU_COUNT[arch])
    while top > cap and rows_extra(m, n, dt, top) > BUDGET * comp:
        top -= 1
    cus = min(t.cus for t in targets)
    cands = sorted({p for p in (cap, top, today, cus, 2 * cus, cus // 2) if 1 <= p <= max(cap, top) and p <= groups})
    plans = [_rows_at(m, n, dt, arch, targets, p) for p in cands]
    good = [p for p in plans if _ok(p)]
    if good:
        return good[0]
    return _rows_at(m, n, dt, arch, targets, max(cap, top))


def strip_geometry(n: int, dt: str, width: int, align_elems: int | None = None,
                   block: int = 0, kind: str = "bwd") -> geometry.RowPlan:
    """Row geometry of `width` columns of an N-column row (aligned as N and the base pointers are: its vector width
    divides N and align_elems); `block`: threads a block of several row slots grows to (launch B: STRIP_BLOCK);
    kind "fwd": the forward's element budget per thread (launch A keeps nothing across a second pass: fewer waves
    a row, whose fixed work, the reduction and set-up, is paid fewer times)."""
    vec = math.gcd(n, 16 // ELEM_BYTES[dt])
    if align_elems is not None:
        vec = math.gcd(vec, align_elems)
    plan = geometry.row_plan(width, dt, kind, align_elems=vec)
    if block and plan.lanes <= geometry.WAVE and plan.block < block:
        plan = dataclasses.replace(plan, rows_per_block=block // plan.lanes)
    return plan


def _strip(m: int, n: int, dt: str, arch: str, targets: Sequence[Target], strip_bytes: int,
           segments: int, row_blocks: int, seg_kind: str = "fwd") -> BwdPlan | None:
    """The strip plan of these parameters (None where launch A's segment would stream or B's strip has one row
    slot a block: the kernels keep a segment in registers and combine several slots)."""
    e = ELEM_BYTES[dt]
    vec = math.gcd(n, 16 // e)
    comp = compulsory_bytes(m, n, dt)
    llc = min((t.llc_mib or 0.0) for t in targets) * 2 ** 20
    chunks = max(1, math.ceil(2 * m * n * e / (LLC_SHARE * llc))) if llc else 1
    mc = -(-m // chunks)
    chunks = -(-m // mc)
    strip = min(-(-n // vec) * vec, max(vec, strip_bytes // e // vec * vec))
    strips = -(-n // strip)
    seg = -(-(-(-n // segments)) // vec) * vec
    segments = -(-n // seg)
    pa = strip_geometry(n, dt, seg, block=geometry.SMALL_ROW_BLOCK, kind=seg_kind)
    pb = strip_geometry(n, dt, strip, block=STRIP_BLOCK)
    if pa.streaming or pb.streaming or pb.rows_per_block < 2:
        return None
    a_programs = segments * -(-mc // pa.rows_per_block)
    b_groups = -(-mc // pb.rows_per_block)
    row_blocks = min(row_blocks, b_groups)
    partial_rows = chunks * row_blocks
    # per chunk: A reads x, dy, γ, mean, rstd and writes C1/C2; B reads them again plus C1/C2, writes dx and dγ/dβ
    c_bytes = 8 * mc * segments
    a_bytes = 2 * mc * n * e + n * e + 8 * mc + c_bytes
    dgb = 2 * n * e if partial_rows == 1 else 2 * row_blocks * n * 4
    b_bytes = 3 * mc * n * e + n * e + 8 * mc + c_bytes + dgb
    reduce_bytes = 2 * partial_rows * n * 4 + 2 * n * e if partial_rows > 1 else 0
    model = chunks * (a_bytes + b_bytes) + reduce_bytes
    distinct = model - 2 * m * n * e                            # B's x/dy read from the LLC
    launches: dict[str, tuple[LaunchEstimate, ...]] = {}
    for t in targets:
        est = [_estimate("A", a_programs, pa.block // 64 or 1, a_bytes, _k("A", arch, dt, pa.vec) * mc * n, t),
               _estimate("B", strips * row_blocks, pb.block // 64 or 1, b_bytes, _k("B", arch, dt, pb.vec) * mc * n, t)]
        if partial_rows > 1:
            est.append(_reduce_estimate(partial_rows, n, e, t))
        launches[t.name] = tuple(est)
    return BwdPlan(m=m, n=n, dtype=dt, arch=arch, kind="strip", programs=strips * row_blocks,
                   compulsory_bytes=comp, distinct_bytes=distinct, model_bytes=model, chunks=chunks, chunk_rows=mc,
                   segments=segments, seg=seg, strip=strip, strips=strips, row_blocks=row_blocks, seg_kind=seg_kind,
                   targets=tuple(t.name for t in targets), launches=launches)


def _ok(plan: BwdPlan, margin: float = MEMORY_MARGIN) -> bool:
    return plan.distinct_bytes <= (1 + BUDGET) * plan.compulsory_bytes and plan.worst_ratio() <= margin


def _strip_candidates(m: int, n: int, dt: str, arch: str, targets: Sequence[Target]) -> Iterable[BwdPlan]:
    for sb in STRIP_BYTES:
        for rb in (1, 2, 4, 8, 16):
            segs = 1
            while segs <= MAX_SEGMENTS:
                for kind in ("fwd", "bwd"):           # fewer waves a row (fewer instructions) first
                    plan = _strip(m, n, dt, arch, targets, sb, segs, rb, kind)
                    if plan is not None:
                        yield plan
                segs *= 2


def choose(m: int, n: int, dtype: object, targets: Target | Sequence[Target]) -> BwdPlan:
    """The plan for (M, N, dtype) valid on every target given (all of one arch): the rows plan where it is within
    BUDGET and memory-bound, else the first strip plan that is (fewest chunks' partial rows, widest strips, fewest
    segments), first with every launch's VALU estimate under MEMORY_MARGIN of its memory floor, then under 1.0;
    else the plan within BUDGET of the lowest VALU / memory ratio. Rows that fit in registers only: M ≥ 1."""
    ts = [targets] if isinstance(targets, Target) else list(targets)
    if not ts or len({t.arch for t in ts}) != 1:
        raise ValueError("choose() needs one or more targets of one arch")
    if m < 1 or n < 1:
        raise ValueError(f"need M, N >= 1, got {m}x{n}")
    dt, arch = geometry.dtype_name(dtype), ts[0].arch
    rows = _rows(m, n, dt, arch, ts)
    strips = list(_strip_candidates(m, n, dt, arch, ts))
    for margin in (MEMORY_MARGIN, 1.0):
        for cand in (rows, *strips):
            if _ok(cand, margin):
                return cand
    return min((rows, *strips), key=lambda p: (p.ratio > 1 + BUDGET, p.worst_ratio()))


def default_targets(arch: str) -> list[Target]:
    """The packaged config's targets of `arch` (lnbench/configs/default.toml)."""
    from lnbench.modelled.targets import all_targets
    from lnbench.settings import packaged_table
    return [t for t in all_targets({"targets": packaged_table("targets")}).values() if t.arch == arch]


#: below this many elements (M·N) the backend keeps today's rows plan: such an op moves under 6 MB (bf16), less
#: HBM time than one kernel launch takes on these GPUs, so its bytes do not decide its time (and the emulator's
#: differential fixtures of tiny shapes keep their bits)
MIN_ELEMS = 1 << 20

_memo: dict[tuple, BwdPlan] = {}


def plan_for(m: int, n: int, dtype: object, arch: str) -> BwdPlan:
    """The plan the FlyDSL backend launches on `arch`: valid on every packaged target of that arch (today's rows
    plan below MIN_ELEMS)."""
    key = (m, n, geometry.dtype_name(dtype), arch)
    if key not in _memo:
        ts = default_targets(arch)
        if m * n < MIN_ELEMS:
            rp = geometry.row_plan(n, dtype, "bwd")
            _memo[key] = _rows_at(m, n, key[2], arch, ts, geometry.bwd_programs(m, rp, arch))
        else:
            _memo[key] = choose(m, n, dtype, ts)
    return _memo[key]


def note(m: int, n: int, dtype: object, arch: str, executed_bytes: int | None = None) -> str:
    """One line naming the backward's plan for (M, N, dtype) on `arch` and its bytes against the compulsory bytes
    (`executed_bytes`: the distinct bytes its launches executed on the emulated device, summed over the launches:
    the modelled floors' count), with each target's bound by the chooser's estimate."""
    plan = plan_for(m, n, dtype, arch)
    bounds = ", ".join(f"{t} {plan.bound(t).split(' ')[0]} {plan.worst_ratio(t):.2f}" for t in plan.targets)
    line = f"{geometry.dtype_name(dtype)} {m}x{n} on {arch}: {plan.describe()}"
    if m * n < MIN_ELEMS:
        line += " (today's grid: below 2^20 elements)"
    if executed_bytes is not None:
        line += f"; executed {executed_bytes / 1e6:.3g} MB = {executed_bytes / plan.compulsory_bytes:.2f}x"
    return f"{line}; estimated VALU/memory: {bounds}"

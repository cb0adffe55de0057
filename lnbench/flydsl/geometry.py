"""Launch geometry per (N, dtype): pure Python, unit-testable without FlyDSL.

A row of N elements is cut into `chunks` of `vec` elements (vec = the largest power of two that
divides N, capped at 16 bytes, so every access is aligned and no access straddles the row end).
`lanes` threads share a row (a power of two below a wave, else whole waves: as few as hold the row in
`tiles` tiles); each thread owns `tiles` chunks (tile t of lane l is
chunk l + t*lanes). Rows narrower than a wave share a wave (lanes < 64); several rows share a block up
to `block` threads. Chunks beyond the row end (chunks % lanes != 0) are masked by the buffer
descriptor's bounds.

Register paths keep all `tiles` of a row in registers (up to elem_budget elements: MAX_ELEMS_PER_THREAD,
or MAX_ELEMS_FWD_WIDE for the forward's 16-byte 16-bit rows; fewer scalar tiles in the backward, whose
addresses cost a register each). Longer rows, any N, take the
streaming path (`streaming`): one 1024-thread block per row, the first `head` tiles in registers and
the rest visited by a runtime loop, `step` tiles per iteration, re-read from global memory (L2) in
each pass. The backward's streaming path keeps no tiles (head 0) and processes `batch` rows at once so
that one read-modify-write of its dγ/dβ workspace row serves them all.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from lnbench.settings import parse_dtypes
from lnbench.constants import ELEM_BYTES
from lnbench.errors import LnbenchUsageError

WAVE = 64
MAX_BLOCK = 1024
SMALL_ROW_BLOCK = 256            # block size when several rows share a block
#: compute units per arch, for the persistent backward grid
CU_COUNT = {"gfx942": 304, "gfx950": 256}
#: fp32 elements a thread keeps per row (x, and dy in the backward); above this the row streams.
MAX_ELEMS_PER_THREAD = {"fwd": 32, "bwd": 32}
#: the forward's budget for 16-bit rows read in 16-byte vectors (8 tiles of 8): half the waves per row,
#: so the per-wave work (reductions, set-up) is paid half as often. Narrower accesses keep the budget above
#: (each tile also holds an address register).
MAX_ELEMS_FWD_WIDE = 64
#: elements per thread the backward's register path aims for (it also keeps dy and the dγ/dβ partials);
#: the forward fills its budget (fewest waves per row)
TARGET_ELEMS = {"bwd": 8}
#: backward: above this many elements per thread the dγ/dβ partials live in the program's own
#: workspace row (read-modify-write, L2-resident) instead of registers, so nothing spills.
BWD_REG_ACC_MAX = 16
#: backward, scalar-width (vec 1) rows: each scalar tile also costs an address register, so fewer of
#: them fit than the element budgets say. Measured (gfx942/gfx950): register mode spilled 1-2 VGPRs at
#: 13 tiles (N = 12289) and not at 12; workspace mode (x kept, dy re-read) spilled at 29-32 tiles
#: (f16, N = 28673..32767) and used ~100 of 128 VGPRs at 25. Above these, scalar rows take the next mode.
BWD_SCALAR_REG_TILES = 12
BWD_SCALAR_WS_TILES = 24
#: streaming forward: elements per thread of the register-resident head (its mean is the pivot m0)
STREAM_HEAD_ELEMS = 32
#: streaming forward: tiles per loop iteration (loads in flight per thread) by vector width: 16 elements
#: (8 at scalar width, where each tile also holds an address)
STREAM_FWD_STEP = {1: 8, 2: 8, 4: 4, 8: 2}
#: streaming backward: rows processed together, so that one read-modify-write of the dγ/dβ workspace row
#: per tile serves them all (one tile of each per loop iteration). Measured at 65536 f32/bf16: VGPRs
#: 66/94 for 2 rows, 100/128 for 3; at scalar width 4 rows reached 94 SGPRs, 2 rows 86.
STREAM_BWD_BATCH = 2
PROGRAMS_PER_CU = 2
MIN_ROWS_PER_PROGRAM = 8
#: the same for workspace-mode rows (dγ/dβ read-modify-written in the partial row): such a row is 2-3× the
#: VALU work of a register-path row's bytes, so with 8 the few programs of a short M were VALU-bound
#: (512x32768 bf16: 64 programs for 256 CUs, VALU floor 25.2 us against 16.8 us of memory on the MI350X)
MIN_ROWS_PER_PROGRAM_WS = 4
#: buffer descriptors count bytes in 32 bits (and the kernels' byte arithmetic is Int32): the longest row
MAX_ROW_BYTES = 2 ** 31 - 1


def dtype_name(dtype: object) -> str:
    """'f32' / 'f16' / 'bf16' from a torch dtype or a name (lnbench.settings' alias table)."""
    try:
        return parse_dtypes([str(dtype).replace("torch.", "")])[0]
    except LnbenchUsageError:
        raise ValueError(f"unsupported dtype {dtype!r}: use float32, float16 or bfloat16") from None


def _pow2_ceil(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


@dataclass(frozen=True)
class RowPlan:
    """Geometry of one row-wise kernel (forward or backward main kernel)."""

    n: int
    dtype: str
    kind: str                 # "fwd" | "bwd"
    vec: int                  # elements per access (aligned, never straddles the row end)
    vec_max: int              # elements in 16 bytes
    chunks: int               # n // vec
    lanes: int                # threads per row (power of two)
    rows_per_block: int
    tiles: int                # chunks per thread (kept in registers unless streaming)
    streaming: bool = False   # rows too long for registers: runtime loop over the tiles past `head`
    head: int = 0             # streaming: tiles kept in registers (the forward's pivot); else == tiles
    step: int = 1             # streaming: tiles per loop iteration
    batch: int = 1            # streaming backward: rows processed together (one workspace RMW per tile)

    @property
    def block(self) -> int:
        return self.lanes * self.rows_per_block

    @property
    def vectorized(self) -> bool:
        """True when every access is a 128-bit one."""
        return self.vec == self.vec_max

    @property
    def masked(self) -> bool:
        """True when the last tile has chunks beyond the row end."""
        return self.chunks % self.lanes != 0

    @property
    def waves_per_row(self) -> int:
        """Waves sharing one row (1 also when several rows share a wave)."""
        return max(1, self.lanes // WAVE)

    @property
    def elems_per_thread(self) -> int:
        return self.tiles * self.vec

    @property
    def acc_in_registers(self) -> bool:
        """Backward: dγ/dβ partials kept in registers across rows (else in the workspace row)."""
        return (not self.streaming and self.elems_per_thread <= BWD_REG_ACC_MAX
                and (self.vec > 1 or self.tiles <= BWD_SCALAR_REG_TILES))

    @property
    def full_tiles(self) -> int:
        """Tiles with every lane's chunk inside the row (the last tile is partial when `masked`)."""
        return self.chunks // self.lanes

    @property
    def mode(self) -> str:
        """'registers' | 'workspace' (backward: x kept, dγ/dβ in the workspace row) | 'stream'."""
        if self.streaming:
            return "stream"
        if self.kind == "bwd" and not self.acc_in_registers:
            return "workspace"
        return "registers"

    def grid(self, m: int) -> int:
        """Blocks for M rows (forward: one row group per block)."""
        return max(1, -(-m // self.rows_per_block))


def elem_budget(kind: str, vec: int) -> int:
    """Elements a thread keeps per row on a register path (more: the row streams)."""
    return MAX_ELEMS_FWD_WIDE if kind == "fwd" and vec == 8 else MAX_ELEMS_PER_THREAD[kind]


def row_plan(n: int, dtype: object, kind: str = "fwd", align_elems: int | None = None) -> RowPlan:
    """Choose the geometry for rows of n elements.

    align_elems: the element alignment every base pointer is known to have (None: 16 bytes);
    pass 1 for a misaligned storage offset to force the scalar-width path.
    """
    if n < 1:
        raise ValueError(f"N must be >= 1, got {n}")
    if kind not in MAX_ELEMS_PER_THREAD:
        raise ValueError(f"kind must be 'fwd' or 'bwd', got {kind!r}")
    dt = dtype_name(dtype)
    if n * 4 > MAX_ROW_BYTES:                   # the fp32 rows: dγ/dβ partials (and f32 x)
        raise ValueError(f"N={n}: an fp32 row of {n * 4} bytes exceeds what a buffer descriptor addresses "
                         f"({MAX_ROW_BYTES} bytes); largest N is {MAX_ROW_BYTES // 4}")
    vec_max = 16 // ELEM_BYTES[dt]
    cap = vec_max if align_elems is None else min(vec_max, align_elems)
    vec = math.gcd(n, 1 << (max(1, cap).bit_length() - 1))
    chunks = n // vec
    # the forward fills its element budget (fewest waves per row: the per-wave work, reductions and set-up,
    # is spread over more elements); the backward aims for TARGET_ELEMS
    limit = elem_budget(kind, vec)
    tiles_target = max(1, (limit if kind == "fwd" else TARGET_ELEMS["bwd"]) // vec)
    want = -(-chunks // tiles_target)
    if _pow2_ceil(want) < WAVE:                  # several rows share a wave: a power of two of lanes each
        lanes = _pow2_ceil(want)
        rows_per_block = SMALL_ROW_BLOCK // lanes
        tiles = -(-chunks // lanes)
    else:                                        # whole waves, as few as the tiles allow
        lanes = min(MAX_BLOCK, -(-want // WAVE) * WAVE)
        rows_per_block = 1
        tiles = -(-chunks // lanes)
        lanes = -(-(-(-chunks // tiles)) // WAVE) * WAVE
        if kind == "bwd" and lanes == WAVE:
            # a one-wave row: the backward's program takes SMALL_ROW_BLOCK // WAVE rows at once, so its
            # persistent grid (PROGRAMS_PER_CU per CU) keeps every SIMD of a CU busy, not one in two
            rows_per_block = SMALL_ROW_BLOCK // WAVE
    too_many_scalar = kind == "bwd" and vec == 1 and tiles > BWD_SCALAR_WS_TILES
    if tiles * vec <= limit and not too_many_scalar:
        return RowPlan(n=n, dtype=dt, kind=kind, vec=vec, vec_max=vec_max, chunks=chunks, lanes=lanes,
                       rows_per_block=rows_per_block, tiles=tiles, head=tiles)
    # streaming: one block of MAX_BLOCK threads per row, a runtime loop over the tiles
    lanes = MAX_BLOCK
    tiles = -(-chunks // lanes)
    if kind == "fwd":
        head, batch, step = min(STREAM_HEAD_ELEMS // vec, chunks // lanes), 1, STREAM_FWD_STEP[vec]
    else:
        head, batch, step = 0, STREAM_BWD_BATCH, 1
    return RowPlan(n=n, dtype=dt, kind=kind, vec=vec, vec_max=vec_max, chunks=chunks, lanes=lanes,
                   rows_per_block=1, tiles=tiles, streaming=True, head=head, step=step, batch=batch)


def max_n(dtype: object, kind: str = "fwd") -> int:
    """Largest N whose row fits in registers (16-byte aligned rows); longer rows stream."""
    return MAX_BLOCK * elem_budget(kind, 16 // ELEM_BYTES[dtype_name(dtype)])


def fits_in_registers(n: int, dtype: object, kind: str = "fwd", align_elems: int | None = None) -> bool:
    """True when rows of n elements take a register path (no streaming)."""
    return not row_plan(n, dtype, kind, align_elems).streaming


def bwd_programs(m: int, plan: RowPlan, arch: str = "gfx942") -> int:
    """Persistent-grid size P for the backward: enough programs to fill the GPU (2 per CU), but
    each should own >= MIN_ROWS_PER_PROGRAM rows (_WS in workspace mode) so the [P, N] fp32 partials stay
    small next to the x/dy traffic. Streaming rows: one program per CU, each owning whole batches."""
    cus = CU_COUNT.get(arch, 304)
    if plan.streaming:
        # a streaming row is long work already, and its 1024-thread program fills a CU
        return max(1, min(cus, -(-m // plan.batch)))
    groups = max(1, -(-m // plan.rows_per_block))
    want = -(-groups // (MIN_ROWS_PER_PROGRAM if plan.acc_in_registers else MIN_ROWS_PER_PROGRAM_WS))
    return max(1, min(PROGRAMS_PER_CU * cus, want))


#: partial-reduce kernel: threads per workgroup, the most threads across a column strip (16 threads × 16 bytes:
#: 256 contiguous bytes of every partial row; the rest of the block splits the partial rows), the fewest strips
#: a plan narrows its strips for (a narrow N's few strips would each sum all rows on few CUs), and the largest
#: fan-in of the split combine's later levels
REDUCE_BLOCK = 256
REDUCE_COLS = 16
REDUCE_MIN_STRIPS = 64
REDUCE_FAN = 8


def bwd_partial_rows(programs: int, plan: RowPlan, strategy: str) -> int:
    """fp32 dγ (and dβ) workspace rows of the backward: one per program (the deterministic kernel adds a
    block's row slots in LDS first), else one per row slot (the atomic strategy's wide-row accumulation)."""
    return programs if strategy == "deterministic" else programs * plan.rows_per_block


@dataclass(frozen=True)
class ReducePlan:
    """Column reduction of the [rows, N] fp32 partials. A workgroup owns a strip of `cols` chunks of `vec`
    columns; its `splits` groups of `cols` threads sum the rows s, s+splits, s+2·splits, ... of their chunk
    (a fixed order). The splits' sums are then added in LDS by a fixed tree (`fans`: level l adds fans[l]
    consecutive split sums per output, lowest split first), so the result is bitwise reproducible. Narrow
    strips keep the grid wide however narrow the row, and the tree keeps the combine short however many
    splits."""

    n: int
    vec: int
    cols: int                 # threads across a strip (a power of two)
    splits: int               # row splits of a workgroup (a power of two)

    @property
    def block(self) -> int:
        return self.cols * self.splits

    @property
    def strip(self) -> int:
        """Columns of one workgroup."""
        return self.cols * self.vec

    @property
    def fans(self) -> tuple[int, ...]:
        """Fan-ins of the combine's levels: the first takes 2·vec split sums per output (every thread adds
        one output's group), the later ones at most REDUCE_FAN, until one sum per output is left ((1,): one
        split, nothing to add)."""
        out: list[int] = []
        rows = self.splits
        while rows > 1:
            f = min(rows, 2 * self.vec if not out else REDUCE_FAN)
            out.append(f)
            rows //= f
        return tuple(out) or (1,)

    def grid(self) -> int:
        return max(1, -(-self.n // self.strip))


def reduce_plan(n: int) -> ReducePlan:
    """Strips of up to REDUCE_COLS chunks, narrower (down to one chunk) while that keeps fewer than
    REDUCE_MIN_STRIPS strips: the sums' work spreads over more CUs, each thread summing fewer rows."""
    vec = math.gcd(n, 4)
    chunks = n // vec
    cols = 1
    while cols < REDUCE_COLS and chunks // (2 * cols) >= REDUCE_MIN_STRIPS:
        cols *= 2
    splits = REDUCE_BLOCK // cols
    while splits > 1 and splits * n * 4 > MAX_ROW_BYTES:     # a split's byte offset stays in Int32
        splits //= 2
    return ReducePlan(n=n, vec=vec, cols=cols, splits=splits)

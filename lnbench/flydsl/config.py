"""Launch geometry per (N, dtype): pure Python, unit-testable without FlyDSL.

A row of N elements is cut into `chunks` of `vec` elements (vec = the largest power of two that
divides N, capped at 16 bytes, so every access is aligned and no access straddles the row end).
`lanes` threads share a row (a power of two); each thread holds `tiles` chunks in registers.
Rows narrower than a wave share a wave (lanes < 64); several rows share a block up to `block` threads.
Chunks beyond the row end (chunks % lanes != 0) are masked by the buffer descriptor's bounds.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from lnbench.config import parse_dtypes
from lnbench.errors import LnbenchUsageError

WAVE = 64
MAX_BLOCK = 1024
SMALL_ROW_BLOCK = 256            # block size when several rows share a block
ELEM_BYTES = {"f32": 4, "f16": 2, "bf16": 2}
#: compute units per arch, for the persistent backward grid
CU_COUNT = {"gfx942": 304, "gfx950": 256}
#: fp32 elements a thread keeps per row (x, and dy in the backward); above this the row would spill.
MAX_ELEMS_PER_THREAD = {"fwd": 32, "bwd": 32}
#: backward: above this many elements per thread the dγ/dβ partials live in the program's own
#: workspace row (read-modify-write, L2-resident) instead of registers, so nothing spills.
BWD_REG_ACC_MAX = 16
PROGRAMS_PER_CU = 2
MIN_ROWS_PER_PROGRAM = 8


def dtype_name(dtype: object) -> str:
    """'f32' / 'f16' / 'bf16' from a torch dtype or a name (lnbench.config's alias table)."""
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
    tiles: int                # chunks per thread, kept in registers

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
        return self.elems_per_thread <= BWD_REG_ACC_MAX

    @property
    def access_bits(self) -> int:
        return self.vec * ELEM_BYTES[self.dtype] * 8

    def grid(self, m: int) -> int:
        """Blocks for M rows (forward: one row group per block)."""
        return max(1, -(-m // self.rows_per_block))


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
    vec_max = 16 // ELEM_BYTES[dt]
    cap = vec_max if align_elems is None else min(vec_max, align_elems)
    vec = math.gcd(n, 1 << (max(1, cap).bit_length() - 1))
    chunks = n // vec
    # aim for ~16 fp32 values of x per thread (8 in the backward, which also keeps dy and dγ/dβ)
    target_elems = 16 if kind == "fwd" else 8
    tiles_target = max(1, target_elems // vec)
    lanes = min(MAX_BLOCK, _pow2_ceil(-(-chunks // tiles_target)))
    if lanes >= WAVE:
        rows_per_block = 1
    else:
        rows_per_block = SMALL_ROW_BLOCK // lanes
    tiles = -(-chunks // lanes)
    limit = MAX_ELEMS_PER_THREAD[kind]
    if tiles * vec > limit:
        raise ValueError(f"N={n} {dt}: {tiles * vec} elements per thread exceed the register budget "
                         f"({limit}) of the {kind} kernel; largest supported N is {max_n(dt, kind)}")
    return RowPlan(n=n, dtype=dt, kind=kind, vec=vec, vec_max=vec_max, chunks=chunks, lanes=lanes,
                   rows_per_block=rows_per_block, tiles=tiles)


def max_n(dtype: object, kind: str = "fwd") -> int:
    """Largest N whose row fits in registers (16-byte aligned rows)."""
    return MAX_BLOCK * MAX_ELEMS_PER_THREAD[kind]


def fits_in_registers(n: int, dtype: object, kind: str = "fwd") -> bool:
    try:
        row_plan(n, dtype, kind)
    except ValueError:
        return False
    return True


def bwd_programs(m: int, plan: RowPlan, arch: str = "gfx942") -> int:
    """Persistent-grid size P for the backward: enough programs to fill the GPU (2 per CU), but
    each should own >= MIN_ROWS_PER_PROGRAM rows so the [P*rows_per_block, N] fp32 partials stay
    small next to the x/dy traffic."""
    cus = CU_COUNT.get(arch, 304)
    groups = max(1, -(-m // plan.rows_per_block))
    want = -(-groups // MIN_ROWS_PER_PROGRAM)
    return max(1, min(PROGRAMS_PER_CU * cus, want))


@dataclass(frozen=True)
class ReducePlan:
    """Column reduction of the [rows, N] fp32 partials: one thread per `vec` columns."""

    n: int
    vec: int
    block: int

    def grid(self) -> int:
        return max(1, -(-(self.n // self.vec) // self.block))


def reduce_plan(n: int) -> ReducePlan:
    vec = math.gcd(n, 4)
    cols = n // vec
    block = min(256, max(WAVE, _pow2_ceil(cols)))
    return ReducePlan(n=n, vec=vec, block=block)

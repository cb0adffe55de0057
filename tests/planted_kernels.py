"""A small FlyDSL kernel with planted bugs, for tests/test_emu_planted.py (FlyDSL reads this source).

`row_sum` writes y[r] = sum(x[r, :]) for an (M, N) fp32 tensor: one workgroup of BLOCK threads (4
waves) per row, plain global loads (`(ptr + i).load()`, no buffer descriptor: nothing masks an access
past the end) under a tail guard, an xor-butterfly sum inside each wave, one partial per wave in LDS, a
barrier, and every thread adding the partials; thread 0 stores the row's sum.

`PLANT` picks the variant at trace time; each planted bug is the only difference from CORRECT:

    NO_BARRIER        the s_barrier between the LDS partial writes and their reads is dropped
                      (waves read the other waves' partials with no barrier: an LDS race)
    TAIL_OFF_BY_ONE   the row-tail guard is `j <= N` instead of `j < N`: one lane reads x[r, N], the next
                      row's first element, and on the last row the element past the end of x
    XOR_SKIP_STAGE    the butterfly runs 5 stages (offsets 32..2) instead of 6: lane 0 ends with the sum
                      of the even lanes of its wave only (a wrong reduction, wrong values)
    XOR_WRONG_OFFSET  the butterfly's last offset is 2 instead of 1 (offsets 32, 16, 8, 4, 2, 2)
    ACCUMULATE_INTO_Y thread 0 stores y[r] + sum instead of sum: it reads the workspace row y[r] before any
                      workgroup wrote it (y starts uninitialized: initcheck)
    SHARED_PARTIAL    workgroup r stores its sum into y[r // 2]: workgroups 2k and 2k+1 write the same partial
                      row (a cross-workgroup race)
    LDS_UNWRITTEN     the last wave does not store its partial, but every thread still reads all NWAVES
                      partials: a read of LDS bytes no wave of the workgroup wrote (initcheck)
"""
# no `from __future__ import annotations`: FlyDSL reads the annotations as real types

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import const_expr, range_constexpr

WAVE, BLOCK = 64, 256
NWAVES = BLOCK // WAVE

CORRECT = "correct"
NO_BARRIER = "no_barrier"
TAIL_OFF_BY_ONE = "tail_off_by_one"
XOR_SKIP_STAGE = "xor_skip_stage"
XOR_WRONG_OFFSET = "xor_wrong_offset"
ACCUMULATE_INTO_Y = "accumulate_into_y"
SHARED_PARTIAL = "shared_partial"
LDS_UNWRITTEN = "lds_unwritten"
PLANTS = (CORRECT, NO_BARRIER, TAIL_OFF_BY_ONE, XOR_SKIP_STAGE, XOR_WRONG_OFFSET, ACCUMULATE_INTO_Y,
          SHARED_PARTIAL, LDS_UNWRITTEN)


def butterfly_offsets(plant: str) -> list[int]:
    """The xor offsets of the wave sum (trace-time Python)."""
    if plant == XOR_SKIP_STAGE:
        return [32, 16, 8, 4, 2]
    if plant == XOR_WRONG_OFFSET:
        return [32, 16, 8, 4, 2, 2]
    return [32, 16, 8, 4, 2, 1]


@fx.struct
class Partials:                                   # LDS: one fp32 per wave
    part: fx.Array[fx.Float32, NWAVES, 16]


@flyc.kernel
def row_sum(X: fx.Pointer, Y: fx.Pointer, N: fx.Constexpr[int], PLANT: fx.Constexpr[str]):
    row, tid = fx.block_idx.x, fx.thread_idx.x
    lane, wave = tid % WAVE, tid // WAVE
    off = fx.Int64(row) * N                       # 64-bit element offset of this row
    part = fx.SharedAllocator().allocate(Partials).peek().part.view(fx.make_layout(NWAVES, 1))

    acc = fx.Float32(0.0)
    for base in range_constexpr(0, N, BLOCK):
        j = tid + base
        if const_expr(PLANT == TAIL_OFF_BY_ONE):
            if j <= N:                            # planted: one past the row's last element
                acc = acc + (X + (off + fx.Int64(j))).load()
        else:
            if j < N:
                acc = acc + (X + (off + fx.Int64(j))).load()

    for s in range_constexpr(len(butterfly_offsets(PLANT))):
        acc = acc + acc.shuffle_xor(butterfly_offsets(PLANT)[s], WAVE)

    if const_expr(PLANT == LDS_UNWRITTEN):
        if lane == 0:
            if wave < NWAVES - 1:                 # planted: the last wave's partial is never stored
                fx.memref_store(acc, part, wave)
    else:
        if lane == 0:
            fx.memref_store(acc, part, wave)
    if const_expr(PLANT != NO_BARRIER):
        fx.gpu.barrier()                          # planted (NO_BARRIER): this barrier is missing
    total = fx.Float32(0.0)
    for i in range_constexpr(NWAVES):
        total = total + fx.memref_load(part, i)
    if tid == 0:
        if const_expr(PLANT == ACCUMULATE_INTO_Y):
            (Y + fx.Int64(row)).store((Y + fx.Int64(row)).load() + total)     # planted: reads y[r] unwritten
        elif const_expr(PLANT == SHARED_PARTIAL):
            (Y + fx.Int64(row // 2)).store(total)                              # planted: rows 2k, 2k+1 share
        else:
            (Y + fx.Int64(row)).store(total)


@flyc.jit
def launch_row_sum(X: fx.Pointer, Y: fx.Pointer, m: fx.Int32, N: fx.Constexpr[int], PLANT: fx.Constexpr[str],
                   stream: fx.Stream = fx.Stream(None)):
    row_sum(X, Y, N, PLANT).launch(grid=(m, 1, 1), block=(BLOCK, 1, 1), stream=stream)


def compile_row_sum(n: int, plant: str = CORRECT):
    """The compiled launcher; call it as fn(x.data_ptr(), y.data_ptr(), m, n, plant, None)."""
    if plant not in PLANTS:
        raise ValueError(f"unknown plant {plant!r}; one of {PLANTS}")
    p = flyc.from_c_void_p(fx.Float32, None)
    return flyc.compile(launch_row_sum, p, flyc.from_c_void_p(fx.Float32, None), 1, n, plant, None)

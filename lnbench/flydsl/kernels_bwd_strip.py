"""The strip plan's backward kernels (lnbench.flydsl.bwd_plan, kind "strip"), Pointer and Tensor ABI.

A  row sums (build_rowsums): program b owns segment a = b % S of the rows of group b // S (R rows, one per row
   slot of its block). Each slot adds, over its segment, wdy = dy·γ and wdy·x̂ (x̂ = (x - mean)·rstd) in fp32,
   sums its lanes (a fixed butterfly) and writes them to C1[r, a], C2[r, a] ([m, S] fp32).
B  strip (build_strip): program b owns strip s = b % strips (`plan.n` columns) of the row groups rb, rb + RB, ...
   (rb = b // strips, RB row blocks). Per row: c1 = Σ_a C1[r, a], c2 likewise, added in segment order; x and dy of
   its columns read again, dx = (wdy - (c1 + x̂·c2)/N)·rstd written, dy·x̂ and dy added to the slot's dγ/dβ in
   registers. At the end the R slots' sums are added in LDS in a fixed order (_combine), and
   written as γ's dtype (final: one row block, one chunk) or as the block's fp32 partial row (the partial-reduce
   kernel adds those). Every sum is in a fixed order: the results do not depend on launch timing.

The rows of a group sit N elements apart, so one uniform descriptor covers the group from the segment's (strip's)
first column to the end of its last row inside M; a chunk past the segment's end (or the row's) is sent past every
row (loads 0, its store dropped), never into the neighbouring columns.
"""
# no `from __future__ import annotations`: FlyDSL reads the annotations as real types
from typing import Any, Callable

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import const_expr, range_constexpr
from flydsl.compiler.ast_rewriter import InsertEmptyYieldForSCFFor as _ScfFor

from lnbench.constants import ELEM_BYTES
from lnbench.flydsl import rowio
from lnbench.flydsl.geometry import RowPlan
from lnbench.flydsl.kernels_bwd import FAST, _dx_terms, _xhat_of
from lnbench.flydsl.reduce import WAVE, RowReducer


def _group_view(plan: RowPlan, n: int, ptr, first_col, rows_valid, esize: int):
    """Chunked view of R rows of N from column `first_col` of the group's first row, bounded at the end of its
    last row inside M (rows_valid rows; 0: nothing)."""
    R = plan.rows_per_block
    nb = rows_valid * (n * esize) - first_col * esize
    return rowio.chunked(ptr, R * n, plan.vec, nb)


def _chunk_at(plan: RowPlan, n: int, slot, lane, t: int, valid_chunks):
    """Chunk index of tile t of the slot's row in a group view; past the segment's valid chunks: past every row."""
    idx = lane + t * plan.lanes
    past = fx.Int32(plan.rows_per_block * (n // plan.vec))
    return (idx < valid_chunks).select(idx + slot * (n // plan.vec), past)


def _gamma_at(plan: RowPlan, n: int, lane, t: int, valid_chunks):
    """γ's chunk of tile t, past the segment's valid chunks: past the row (0.0, never a neighbour's γ, which an
    inf would turn into NaN against the masked dy = 0)."""
    idx = lane + t * plan.lanes
    return (idx < valid_chunks).select(idx, fx.Int32(n // plan.vec))


def _valid_chunks(plan: RowPlan, n: int, a, count: int):
    """Chunks of segment a (of `count`, each plan.n wide) inside the row: plan.chunks, fewer for the last."""
    last = (n - (count - 1) * plan.n) // plan.vec
    if last == plan.chunks:
        return fx.Int32(plan.chunks)
    return (a == count - 1).select(fx.Int32(last), fx.Int32(plan.chunks))


def _strided_loop(start, stop, step, body: Callable, carry: tuple) -> tuple:
    """scf.for g in range(start, stop, step) (traced Int32 bounds, not unrolled): carry = body(g, *carry)
    (module-level code is not AST-rewritten: the loop is built directly, as rowio.runtime_loop does)."""
    names = tuple(f"carry{k}" for k in range(len(carry)))

    def fn(iv, _names, *inner):
        return tuple(body(fx.Int32(iv), *inner))

    out = _ScfFor.scf_for_dispatch(fx.Int32(start), fx.Int32(stop), fx.Int32(step), fn, result_names=names,
                                   result_values=tuple(carry), unroll=1)
    return tuple(out) if len(names) > 1 else (out,)


def _rows_valid(g, m, R: int):
    """Rows of group g inside M: R, fewer in the last group (a group test, not a min: the emulator has no
    s_min_i32)."""
    return (g == (m + (R - 1)) // R - 1).select(m - g * R, fx.Int32(R))


def _slots(plan: RowPlan):
    tid = fx.thread_idx.x
    if plan.rows_per_block == 1:
        return tid, fx.Int32(0), tid
    return tid, tid // plan.lanes, tid % plan.lanes


def _row_stats(ptr, r0, R: int, slot, rows_valid):
    return rowio.load_f32_at(ptr + fx.Int64(r0), R, slot, rows_valid * 4)


def build_rowsums(plan: RowPlan, n: int, segments: int, abi: str, name: str = "") -> Callable:
    """Launcher (X, DY, W, Mean, Rstd, C1, C2, m, r_first, stream) of kernel A over rows r_first .. r_first + m - 1
    (a chunk; C1/C2 hold the chunk's rows); `plan`: the geometry of one segment."""
    R, BLOCK, dt, S = plan.rows_per_block, plan.block, plan.dtype, segments
    esize = ELEM_BYTES[dt]
    kname = name or f"ln_bwd_rowsums_{dt}_n{n}_s{S}_{abi}"
    floats = RowReducer.lds_floats(plan.lanes, values=2, slots=1)
    if floats:
        @fx.struct
        class Scratch:
            part: fx.Array[fx.Float32, floats, 16]

    def body(X, DY, W, Mean, Rstd, C1, C2, m, r_first):
        X, DY = (T + fx.Int64(r_first) * n for T in (X, DY))
        Mean, Rstd = (T + fx.Int64(r_first) for T in (Mean, Rstd))
        tid, slot, lane = _slots(plan)
        part = None
        if const_expr(floats > 0):
            part = fx.SharedAllocator().allocate(Scratch).peek().part.view(fx.make_layout(floats, 1))
        reducer = RowReducer(plan.lanes, part, tid // WAVE) if plan.lanes > WAVE else RowReducer(plan.lanes)
        b = fx.Int32(fx.block_idx.x)
        a, g = b % S, b // S
        r0 = g * R
        rows_valid = _rows_valid(g, m, R)
        first = a * plan.n
        valid = _valid_chunks(plan, n, a, S)
        off = fx.Int64(r0) * n + fx.Int64(first)
        atom = rowio.copy_atom(plan.vec, dt)
        xv = _group_view(plan, n, X + off, first, rows_valid, esize)
        dyv = _group_view(plan, n, DY + off, first, rows_valid, esize)
        wv = rowio.chunked(W + fx.Int64(first), n, plan.vec, fx.Int32(n * esize) - first * esize)
        mean = _row_stats(Mean, r0, R, slot, rows_valid)
        rstd = _row_stats(Rstd, r0, R, slot, rows_valid)
        xhat_of = _xhat_of(mean, rstd, plan.vec, dt)
        s1: Any = None                    # DSL vectors after the first tile
        s2: Any = None
        for t in range_constexpr(plan.tiles):
            at = _chunk_at(plan, n, slot, lane, t, valid)
            x = rowio.load_f32(atom, xv, at, plan.vec, dt)
            dy = rowio.load_f32(atom, dyv, at, plan.vec, dt)
            gam = rowio.load_f32(atom, wv, _gamma_at(plan, n, lane, t, valid), plan.vec, dt)
            wdy = dy * gam
            xh = xhat_of(x)
            s1 = wdy if s1 is None else s1 + wdy
            s2 = wdy * xh if s2 is None else fx.fma(wdy, xh, s2)
        c1, c2 = reducer.sum2(s1.reduce(fx.ReductionOp.ADD, fastmath=FAST),
                              s2.reduce(fx.ReductionOp.ADD, fastmath=FAST))
        at = (lane == 0).select(slot * S + a, fx.Int32(R * S))           # one writer lane per row
        nb = rows_valid * (S * 4)
        rowio.store_f32_at(C1 + fx.Int64(r0) * S, R * S + 1, at, c1, nb)
        rowio.store_f32_at(C2 + fx.Int64(r0) * S, R * S + 1, at, c2, nb)

    def grid(m):
        return (m + (R - 1)) // R * S

    if abi == "pointer":
        @flyc.kernel(name=kname)
        def kern(X: fx.Pointer, DY: fx.Pointer, W: fx.Pointer, Mean: fx.Pointer, Rstd: fx.Pointer,
                 C1: fx.Pointer, C2: fx.Pointer, m: fx.Int32, r_first: fx.Int32):
            body(X, DY, W, Mean, Rstd, C1, C2, m, r_first)

        @flyc.jit
        def launch(X: fx.Pointer, DY: fx.Pointer, W: fx.Pointer, Mean: fx.Pointer, Rstd: fx.Pointer,
                   C1: fx.Pointer, C2: fx.Pointer, m: fx.Int32, r_first: fx.Int32, stream: fx.Stream = fx.Stream(None)):
            kern(X, DY, W, Mean, Rstd, C1, C2, m, r_first).launch(grid=(grid(m), 1, 1), block=(BLOCK, 1, 1),
                                                              stream=stream)
    elif abi == "tensor":
        @flyc.kernel(name=kname)
        def kern(X: fx.Tensor, DY: fx.Tensor, W: fx.Tensor, Mean: fx.Tensor, Rstd: fx.Tensor,
                 C1: fx.Tensor, C2: fx.Tensor, m: fx.Int32, r_first: fx.Int32):
            body(*[fx.get_iter(T) for T in (X, DY, W, Mean, Rstd, C1, C2)], m, r_first)  # type: ignore[call-arg]

        @flyc.jit
        def launch(X: fx.Tensor, DY: fx.Tensor, W: fx.Tensor, Mean: fx.Tensor, Rstd: fx.Tensor,
                   C1: fx.Tensor, C2: fx.Tensor, m: fx.Int32, r_first: fx.Int32, stream: fx.Stream = fx.Stream(None)):
            kern(X, DY, W, Mean, Rstd, C1, C2, m, r_first).launch(grid=(grid(m), 1, 1), block=(BLOCK, 1, 1),
                                                              stream=stream)
    else:
        raise ValueError(f"abi must be 'pointer' or 'tensor', got {abi!r}")
    return launch


def _parts_per_output(plan: RowPlan) -> int:
    """Q: how many threads add one output's R slot values in the combine's first stage, each 2·tiles·vec of them
    (every thread of the block busy); 1 where the outputs do not divide the block evenly (then each output's
    thread adds all R)."""
    outs, R = 2 * plan.tiles * plan.vec * plan.lanes, plan.rows_per_block
    if outs >= plan.block or plan.block % outs or R % (plan.block // outs):
        return 1
    return plan.block // outs


def _combine_floats(plan: RowPlan) -> int:
    outs, q = 2 * plan.tiles * plan.vec * plan.lanes, _parts_per_output(plan)
    return outs * (plan.rows_per_block + 4) + (outs * q if q > 1 else 0)


def _combine(plan: RowPlan, acc, part, og, ob, tid, slot, lane, nbytes, out_dtype: str) -> None:
    """The R row slots' dγ/dβ sums added in LDS in a fixed order, and stored (og/ob: the strip's first column,
    bound `nbytes`). Output o = (k·tv + te)·lanes + lane (k: dγ, dβ; te: a lane's value) keeps its R slot values
    side by side at o·(R + 4) (read as 16-byte vectors; the pitch of R + 4 dwords spreads a wave's writes over the
    banks). Where the outputs divide the block (Q = block / outputs > 1), thread t adds slots j·R/Q .. (j+1)·R/Q - 1
    of output t % outputs (j = t // outputs) and the output's thread then adds its Q part sums, j = 0 first: every
    thread works, each reads R/Q values, not R. Else thread t adds outputs t, t + block, ... over all R slots."""
    R, lanes, vec, n = plan.rows_per_block, plan.lanes, plan.vec, plan.n
    tv, pitch = plan.tiles * vec, plan.rows_per_block + 4
    for k in range_constexpr(2):
        for t in range_constexpr(plan.tiles):
            for e in range_constexpr(vec):
                o = (k * tv + t * vec + e) * lanes + lane
                fx.memref_store(acc[k * plan.tiles + t][e], part, o * pitch + slot)
    fx.gpu.barrier()
    views = [rowio.chunked(ptr, n + 1, 1, nbytes) for ptr in (og, ob)]
    atom = rowio.copy_atom(1, out_dtype)
    outs, q_parts = 2 * tv * lanes, _parts_per_output(plan)
    sums = []
    if const_expr(q_parts > 1):
        per, second = R // q_parts, outs * pitch           # slots per part; where the part sums go
        o1, j = tid % outs, tid // outs
        at1 = o1 * pitch + j * per
        part_sum = fx.memref_load(part, at1)
        for i in range_constexpr(1, per):
            part_sum = part_sum + fx.memref_load(part, at1 + i)
        fx.memref_store(part_sum, part, second + o1 * q_parts + j)
        fx.gpu.barrier()
        ok = tid < outs
        at = ok.select(second + tid * q_parts, fx.Int32(second))
        total = fx.memref_load(part, at)
        for i in range_constexpr(1, q_parts):
            total = total + fx.memref_load(part, at + i)
        sums.append((tid, ok, total))
    else:
        for q in range_constexpr(-(-outs // plan.block)):
            o = tid + q * plan.block
            ok = o < outs
            at = ok.select(o * pitch, fx.Int32(0))
            total = fx.memref_load(part, at)
            for i in range_constexpr(1, R):
                total = total + fx.memref_load(part, at + i)
            sums.append((o, ok, total))
    for o, ok, total in sums:
        k, r = o // (tv * lanes), o % (tv * lanes)
        te, ln = r // lanes, r % lanes
        col = ((te // vec) * lanes + ln) * vec + te % vec             # past the strip's bound: dropped
        for kk in range_constexpr(2):
            rowio.store_from_f32(atom, views[kk], (ok & (k == kk)).select(col, fx.Int32(n)),
                                 fx.full(1, total, fx.Float32), 1, out_dtype)


def build_strip(plan: RowPlan, n: int, segments: int, final: bool, wdtype: str, abi: str, name: str = "") -> Callable:
    """Launcher (X, DY, DX, W, Mean, Rstd, C1, C2, OG, OB, m, rb, r_first, p_first, stream) of kernel B over rows
    r_first .. r_first + m - 1 (a chunk); `plan`: the geometry of one strip; OG/OB: dγ/dβ in `wdtype` (final) or
    the fp32 partial rows, this chunk's rb row blocks from row p_first."""
    R, BLOCK, dt, S = plan.rows_per_block, plan.block, plan.dtype, segments
    if R < 2:
        raise ValueError("a strip's block holds several row slots")
    esize = ELEM_BYTES[dt]
    strips = -(-n // plan.n)
    kname = name or f"ln_bwd_strip_{dt}_n{n}_w{plan.n}_s{S}_{'fin' if final else 'par'}_{abi}"
    floats = _combine_floats(plan)

    @fx.struct
    class Scratch:
        part: fx.Array[fx.Float32, floats, 16]

    def body(X, DY, DX, W, Mean, Rstd, C1, C2, OG, OB, m, rb_count, r_first, p_first):
        X, DY, DX = (T + fx.Int64(r_first) * n for T in (X, DY, DX))
        Mean, Rstd = (T + fx.Int64(r_first) for T in (Mean, Rstd))
        tid, slot, lane = _slots(plan)
        part = fx.SharedAllocator().allocate(Scratch).peek().part.view(fx.make_layout(floats, 1))
        b = fx.Int32(fx.block_idx.x)
        s, rb = b % strips, b // strips
        first = s * plan.n
        valid = _valid_chunks(plan, n, s, strips)
        atom = rowio.copy_atom(plan.vec, dt)
        wv = rowio.chunked(W + fx.Int64(first), n, plan.vec, fx.Int32(n * esize) - first * esize)
        gammas = [rowio.load_f32(atom, wv, _gamma_at(plan, n, lane, t, valid), plan.vec, dt)
                  for t in range_constexpr(plan.tiles)]
        groups = (m + (R - 1)) // R
        zeros = tuple(fx.full(plan.vec, 0.0, fx.Float32) for _ in range(2 * plan.tiles))

        def group(g, *acc):
            """Row group g: its rows' dx, and their dy·x̂, dy added to the slot's sums (tile order)."""
            r0 = g * R
            rows_valid = _rows_valid(g, m, R)
            mean = _row_stats(Mean, r0, R, slot, rows_valid)
            rstd = _row_stats(Rstd, r0, R, slot, rows_valid)
            c1: Any = None
            c2: Any = None
            for a in range_constexpr(S):                  # the row's segment sums, in segment order
                v1 = rowio.load_f32_at(C1 + fx.Int64(r0) * S, R * S, slot * S + a, rows_valid * (S * 4))
                v2 = rowio.load_f32_at(C2 + fx.Int64(r0) * S, R * S, slot * S + a, rows_valid * (S * 4))
                c1 = v1 if c1 is None else c1 + v1
                c2 = v2 if c2 is None else c2 + v2
            off = fx.Int64(r0) * n + fx.Int64(first)
            xv = _group_view(plan, n, X + off, first, rows_valid, esize)
            dyv = _group_view(plan, n, DY + off, first, rows_valid, esize)
            dxv = _group_view(plan, n, DX + off, first, rows_valid, esize)
            xhat_of = _xhat_of(mean, rstd, plan.vec, dt)
            dx_of = _dx_terms(c1 * (1.0 / n), c2 * (1.0 / n), rstd, plan.vec)
            new_g, new_b = [], []
            for t in range_constexpr(plan.tiles):
                at = _chunk_at(plan, n, slot, lane, t, valid)
                dy = rowio.load_f32(atom, dyv, at, plan.vec, dt)
                xh = xhat_of(rowio.load_f32(atom, xv, at, plan.vec, dt))
                rowio.store_from_f32(atom, dxv, at, dx_of(dy * gammas[t], xh), plan.vec, dt)
                new_g.append(fx.fma(dy, xh, acc[t]))
                new_b.append(acc[plan.tiles + t] + dy)
            return (*new_g, *new_b)

        acc = _strided_loop(rb, groups, rb_count, group, zeros)
        cols = (valid * plan.vec) * (ELEM_BYTES[wdtype] if final else 4)
        if const_expr(final):
            _combine(plan, acc, part, OG + fx.Int64(first), OB + fx.Int64(first), tid, slot, lane, cols, wdtype)
        else:
            row = fx.Int64(p_first + rb) * n + fx.Int64(first)
            _combine(plan, acc, part, OG + row, OB + row, tid, slot, lane, cols, "f32")

    if abi == "pointer":
        @flyc.kernel(name=kname)
        def kern(X: fx.Pointer, DY: fx.Pointer, DX: fx.Pointer, W: fx.Pointer, Mean: fx.Pointer, Rstd: fx.Pointer,
                 C1: fx.Pointer, C2: fx.Pointer, OG: fx.Pointer, OB: fx.Pointer, m: fx.Int32, rb: fx.Int32,
                 r_first: fx.Int32, p_first: fx.Int32):
            body(X, DY, DX, W, Mean, Rstd, C1, C2, OG, OB, m, rb, r_first, p_first)

        @flyc.jit
        def launch(X: fx.Pointer, DY: fx.Pointer, DX: fx.Pointer, W: fx.Pointer, Mean: fx.Pointer,
                   Rstd: fx.Pointer, C1: fx.Pointer, C2: fx.Pointer, OG: fx.Pointer, OB: fx.Pointer, m: fx.Int32,
                   rb: fx.Int32, r_first: fx.Int32, p_first: fx.Int32, stream: fx.Stream = fx.Stream(None)):
            kern(X, DY, DX, W, Mean, Rstd, C1, C2, OG, OB, m, rb, r_first, p_first).launch(
                grid=(rb * strips, 1, 1), block=(BLOCK, 1, 1), stream=stream)
    elif abi == "tensor":
        @flyc.kernel(name=kname)
        def kern(X: fx.Tensor, DY: fx.Tensor, DX: fx.Tensor, W: fx.Tensor, Mean: fx.Tensor, Rstd: fx.Tensor,
                 C1: fx.Tensor, C2: fx.Tensor, OG: fx.Tensor, OB: fx.Tensor, m: fx.Int32, rb: fx.Int32,
                 r_first: fx.Int32, p_first: fx.Int32):
            body(*[fx.get_iter(T) for T in (X, DY, DX, W, Mean, Rstd, C1, C2, OG, OB)],  # type: ignore[call-arg]
                 m, rb, r_first, p_first)

        @flyc.jit
        def launch(X: fx.Tensor, DY: fx.Tensor, DX: fx.Tensor, W: fx.Tensor, Mean: fx.Tensor, Rstd: fx.Tensor,
                   C1: fx.Tensor, C2: fx.Tensor, OG: fx.Tensor, OB: fx.Tensor, m: fx.Int32, rb: fx.Int32,
                   r_first: fx.Int32, p_first: fx.Int32, stream: fx.Stream = fx.Stream(None)):
            kern(X, DY, DX, W, Mean, Rstd, C1, C2, OG, OB, m, rb, r_first, p_first).launch(
                grid=(rb * strips, 1, 1), block=(BLOCK, 1, 1), stream=stream)
    else:
        raise ValueError(f"abi must be 'pointer' or 'tensor', got {abi!r}")
    return launch

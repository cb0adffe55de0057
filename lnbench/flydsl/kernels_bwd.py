"""LayerNorm backward kernels and @flyc.jit launchers, Pointer and Tensor ABI.

Main kernel, persistent grid of P programs, each owning rows g = pid, pid+P, ... (row groups of
rows_per_block rows): x and dy are read once into registers, then
    x̂ = (x - mean)·rstd,  wdy = dy·γ,  (c1, c2) = mean over the row of (wdy, wdy·x̂)  [one 2-value reduction]
    dx = (wdy - c1 - x̂·c2)·rstd
and dγ += dy·x̂, dβ += dy accumulate in fp32 per thread (registers; or, for very wide rows, the
program's own workspace row). Rows too long for registers stream (bwd_batch): `batch` rows at a time,
a runtime loop over the tiles reads x, dy and γ for (c1, c2), and a second loop reads them again to
write dx and add the batch's dγ/dβ to the workspace row in one read-modify-write per tile.
The epilogue depends on the dγ strategy:
  deterministic: store the fp32 partials to row pid*R+slot of a [P*R, N] workspace; the reduce
                 kernel then sums rows 0..P*R-1 per column in that fixed order (bitwise reproducible);
  atomic:        fp32 global atomic adds (agent scope) into [N] fp32 accumulators (order varies).
"""
# no `from __future__ import annotations`: FlyDSL reads the annotations as real types
from typing import Callable

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import const_expr, range_constexpr

from lnbench.constants import ELEM_BYTES, STRATEGIES
from lnbench.flydsl import rowio
from lnbench.flydsl.geometry import ReducePlan, RowPlan
from lnbench.flydsl.reduce import WAVE, RowReducer

FAST = fx.FastMathFlags.fast


def _f32_parts(vec: int) -> tuple[int, int]:
    """An fp32 chunk of `vec` values is moved as `k` pieces of `w` (<= 16 bytes each)."""
    w = min(vec, 4)
    return w, vec // w


def _ws_load(view, idx, vec):
    w, k = _f32_parts(vec)
    atom = rowio.copy_atom(w, "f32")
    parts = [rowio.load_f32(atom, view, idx * k + i, w, "f32") for i in range(k)]
    return parts


def _ws_store(view, idx, vec, parts) -> None:
    w, k = _f32_parts(vec)
    atom = rowio.copy_atom(w, "f32")
    for i in range(k):
        rowio.store_from_f32(atom, view, idx * k + i, parts[i], w, "f32")


def _split(v, vec):
    """fp32 vector of `vec` -> list of pieces matching _f32_parts."""
    w, k = _f32_parts(vec)
    if k == 1:
        return [v]
    return [v.shuffle(v, list(range(i * w, (i + 1) * w))) for i in range(k)]


def bwd_row(plan: RowPlan, x_ptr, dy_ptr, dx_ptr, gammas, mean, rstd, row_nbytes, lane,
            reducer: RowReducer, acc_g, acc_b, ws_view):
    """Backward of one row; returns the updated (acc_g, acc_b) lists (register mode) or updates
    the workspace row `ws_view` in place (workspace mode). No runtime `if`: shared by both ABIs."""
    n, vec, lanes, dt = plan.n, plan.vec, plan.lanes, plan.dtype
    atom = rowio.copy_atom(vec, dt)
    xv = rowio.chunked(x_ptr, n, vec, row_nbytes)
    dyv = rowio.chunked(dy_ptr, n, vec, row_nbytes)
    dxv = rowio.chunked(dx_ptr, n, vec, row_nbytes)

    # keep only the loaded x and dy (tensor dtype) live across the reduction; x̂ and wdy are
    # recomputed afterwards, and γ is re-read (L1/L2-resident) when it is not kept in registers
    atom_w = rowio.copy_atom(vec, dt)
    wv = rowio.chunked(gammas, n, vec, n * ELEM_BYTES[dt]) if not isinstance(gammas, list) else None

    def gamma(t):
        if isinstance(gammas, list):
            return gammas[t]
        return rowio.load_f32(atom_w, wv, lane + t * lanes, vec, dt)

    xr, dyr = [], []
    s1 = fx.Float32(0.0)
    s2 = fx.Float32(0.0)
    for t in range_constexpr(plan.tiles):
        idx = lane + t * lanes
        x = rowio.load_raw(atom, xv, idx, vec, dt)                    # past the end / past M: zeros
        dy = rowio.load_raw(atom, dyv, idx, vec, dt)
        xr.append(x)
        if const_expr(plan.acc_in_registers):
            dyr.append(dy)
        xhat = (rowio.widen(x, dt) - mean) * rstd
        wdy = rowio.widen(dy, dt) * gamma(t)
        s1 = s1 + wdy.reduce(fx.ReductionOp.ADD, fastmath=FAST)
        s2 = s2 + (wdy * xhat).reduce(fx.ReductionOp.ADD, fastmath=FAST)
    c1, c2 = reducer.sum2(s1, s2)
    c1 = c1 * (1.0 / n)
    c2 = c2 * (1.0 / n)
    new_g, new_b = [], []
    for t in range_constexpr(plan.tiles):
        idx = lane + t * lanes
        xhat = (rowio.widen(xr[t], dt) - mean) * rstd
        if const_expr(plan.acc_in_registers):
            dy = rowio.widen(dyr[t], dt)
        else:                       # very wide rows: re-read dy (L2-resident) instead of spilling
            dy = rowio.load_f32(atom, dyv, idx, vec, dt)
        wdy = dy * gamma(t)
        dx = (wdy - c1 - xhat * c2) * rstd
        rowio.store_from_f32(atom, dxv, idx, dx, vec, dt)
        g = dy * xhat
        if const_expr(plan.acc_in_registers):
            new_g.append(acc_g[t] + g)
            new_b.append(acc_b[t] + dy)
        else:
            gv, bv = ws_view
            old_g = _ws_load(gv, idx, vec)
            old_b = _ws_load(bv, idx, vec)
            _ws_store(gv, idx, vec, [o + q for o, q in zip(old_g, _split(g, vec))])
            _ws_store(bv, idx, vec, [o + q for o, q in zip(old_b, _split(dy, vec))])
    reducer.fence()                                   # the next row reuses the LDS slots
    if const_expr(not plan.acc_in_registers):
        return acc_g, acc_b
    return new_g, new_b


def load_gammas(plan: RowPlan, w_ptr, lane):
    """γ as fp32 register tiles (register mode), else the pointer itself (re-read per use)."""
    if not plan.acc_in_registers:
        return w_ptr
    atom = rowio.copy_atom(plan.vec, plan.dtype)
    wv = rowio.chunked(w_ptr, plan.n, plan.vec, plan.n * ELEM_BYTES[plan.dtype])
    return [rowio.load_f32(atom, wv, lane + t * plan.lanes, plan.vec, plan.dtype) for t in range_constexpr(plan.tiles)]


def ws_views(plan: RowPlan, wsg_ptr, wsb_ptr, ws_row):
    """(dγ, dβ) fp32 workspace row views, split in <= 16-byte pieces (streaming plans: the row pointers,
    viewed per tile by _ws_at)."""
    w, _ = _f32_parts(plan.vec)
    off = fx.Int64(ws_row) * plan.n
    if plan.streaming:
        return wsg_ptr + off, wsb_ptr + off
    nb = plan.n * 4
    return rowio.chunked(wsg_ptr + off, plan.n, w, nb), rowio.chunked(wsb_ptr + off, plan.n, w, nb)


def _tile_nbytes(plan: RowPlan, t, elem_bytes: int):
    """Descriptor bytes of tile t: the rest of the row from the tile's start (a whole tile and more, except
    for the partial last one, which it masks). Computed at run time for a traced t, so the partial tile runs
    in the loop too and no descriptor is hoisted out of it."""
    tile = plan.lanes * plan.vec * elem_bytes
    if isinstance(t, int):
        return min(tile, plan.n * elem_bytes - t * tile)
    if not plan.masked:
        return tile
    return fx.Int32(plan.n * elem_bytes) - t * tile


def _ws_at(plan: RowPlan, views, t, lane):
    """((dγ view, dβ view), chunk index) of tile t in the workspace row."""
    if not plan.streaming:
        return views, lane + t * plan.lanes
    w, _ = _f32_parts(plan.vec)
    nb = _tile_nbytes(plan, t, 4)
    tv = [rowio.chunked(ptr + fx.Int64(t) * (plan.lanes * plan.vec), plan.lanes * plan.vec, w, nb) for ptr in views]
    return tuple(tv), lane


def _tiles(plan: RowPlan, body, carry: tuple = ()) -> tuple:
    """carry = body(t, *carry) for every tile t: unrolled for register paths, a runtime loop (the partial
    last tile included: body masks it by t) for streaming plans."""
    if not plan.streaming:
        for t in range_constexpr(plan.tiles):
            carry = tuple(body(t, *carry))
        return carry
    return rowio.tile_loop(0, plan.tiles, plan.step, body, carry)


def zero_ws(plan: RowPlan, views, lane) -> None:
    z = fx.full(plan.vec, 0.0, fx.Float32)

    def tile(t):
        (gv, bv), idx = _ws_at(plan, views, t, lane)
        _ws_store(gv, idx, plan.vec, _split(z, plan.vec))
        _ws_store(bv, idx, plan.vec, _split(z, plan.vec))
        return ()
    _tiles(plan, tile)


def epilogue(plan: RowPlan, strategy: str, acc_g, acc_b, views, dg_ptr, db_ptr, lane) -> None:
    """Hand this program's partials over: workspace row (deterministic) or atomics (atomic)."""
    w, k = _f32_parts(plan.vec)
    ratom = rowio.copy_atom(w, "f32")

    def tile(t):
        (gv, bv), idx = _ws_at(plan, views, t, lane)
        if const_expr(plan.acc_in_registers):
            g_parts, b_parts = _split(acc_g[t], plan.vec), _split(acc_b[t], plan.vec)
        if const_expr(strategy == "deterministic"):
            if const_expr(plan.acc_in_registers):
                _ws_store(gv, idx, plan.vec, g_parts)
                _ws_store(bv, idx, plan.vec, b_parts)
        else:
            partial = (t + 1) * plan.lanes > plan.chunks if isinstance(t, int) else plan.masked
            inside = (lane + t * plan.lanes < plan.chunks) if partial else None
            dg, db = dg_ptr, db_ptr
            if const_expr(plan.streaming):              # columns relative to the tile (uniform base)
                dg = dg_ptr + fx.Int64(t) * (plan.lanes * plan.vec)
                db = db_ptr + fx.Int64(t) * (plan.lanes * plan.vec)
            for piece in range_constexpr(k):
                if const_expr(plan.acc_in_registers):
                    gp, bp = g_parts[piece], b_parts[piece]
                else:                                   # one piece at a time keeps registers low
                    gp = rowio.load_f32(ratom, gv, idx * k + piece, w, "f32")
                    bp = rowio.load_f32(ratom, bv, idx * k + piece, w, "f32")
                for e in range_constexpr(w):
                    col = idx * plan.vec + piece * w + e
                    gval, bval = gp[e], bp[e]
                    if const_expr(inside is not None):
                        col = inside.select(col, 0)                     # masked: add +0.0 to column 0
                        gval = inside.select(gval, 0.0)
                        bval = inside.select(bval, 0.0)
                    fx.atomic_add(dg + fx.Int64(col), gval, syncscope=fx.rocdl.SyncScope.Agent)
                    fx.atomic_add(db + fx.Int64(col), bval, syncscope=fx.rocdl.SyncScope.Agent)
        return ()

    if const_expr(strategy == "deterministic" and not plan.acc_in_registers):
        return                                          # the workspace row already holds the partials
    _tiles(plan, tile)


def bwd_batch(plan: RowPlan, g, m, row_ptrs, mean_ptr, rstd_ptr, w_ptr, lane, reducer: RowReducer,
              ws_row) -> None:
    """Streaming backward of rows g*batch .. g*batch+batch-1 (rows past M masked), no runtime `if`.

    Pass 1 (runtime loop over the tiles): x, dy, γ -> per row Σwdy and Σwdy·x̂, for all rows of the batch
    in ONE reduction of 2·batch values. Pass 2 (the same loop again): x, dy, γ re-read (L2) -> dx, and
    the batch's Σ dy·x̂ and Σ dy added to the workspace row (one read-modify-write per tile for the whole
    batch, in a fixed order). Every tile is read through its own descriptor (rowio.tile_view); chunks past
    the row end load zeros (dy = 0 adds nothing) and their stores are dropped.
    row_ptrs(row) -> (x, dy, dx) typed pointers of that row; ws_row: this program's (dγ, dβ) row pointers.
    """
    n, vec, lanes, dt = plan.n, plan.vec, plan.lanes, plan.dtype
    esize = ELEM_BYTES[dt]
    atom = rowio.copy_atom(vec, dt)
    rows = []
    for k in range_constexpr(plan.batch):
        row = fx.Int32(g) * plan.batch + k
        ok = row < m
        st_nb = ok.select(fx.Int32(4), fx.Int32(0))
        rows.append((*row_ptrs(row), rowio.load_scalar_f32(mean_ptr, row, st_nb),
                     rowio.load_scalar_f32(rstd_ptr, row, st_nb), ok))

    def view(ptr, t, ok=None):
        nb = _tile_nbytes(plan, t, esize)
        return rowio.tile_view(ptr, t, lanes, vec, nb if ok is None else ok.select(fx.Int32(nb), fx.Int32(0)))

    def terms(t):
        """(γ, [(x̂, dy) per row]) of tile t, fp32."""
        gam = rowio.load_f32(atom, view(w_ptr, t), lane, vec, dt)
        out = []
        for x_ptr, dy_ptr, _, mean, rstd, ok in rows:
            x = rowio.load_f32(atom, view(x_ptr, t, ok), lane, vec, dt)
            dy = rowio.load_f32(atom, view(dy_ptr, t, ok), lane, vec, dt)
            out.append(((x - mean) * rstd, dy))
        return gam, out

    def stats(t, *sums):
        gam, xd = terms(t)
        new = []
        for k in range_constexpr(plan.batch):
            xhat, dy = xd[k]
            wdy = dy * gam
            new.append(sums[2 * k] + wdy.reduce(fx.ReductionOp.ADD, fastmath=FAST))
            new.append(sums[2 * k + 1] + (wdy * xhat).reduce(fx.ReductionOp.ADD, fastmath=FAST))
        return tuple(new)

    sums = _tiles(plan, stats, tuple(fx.Float32(0.0) for _ in range(2 * plan.batch)))
    sums = reducer.sum_n(list(sums))
    cs = [(sums[2 * k] * (1.0 / n), sums[2 * k + 1] * (1.0 / n)) for k in range(plan.batch)]

    def apply(t):
        gam, xd = terms(t)
        g_sum = b_sum = None
        for k in range_constexpr(plan.batch):
            xhat, dy = xd[k]
            c1, c2 = cs[k]
            _, _, dx_ptr, _, rstd, ok = rows[k]
            rowio.store_from_f32(atom, view(dx_ptr, t, ok), lane, (dy * gam - c1 - xhat * c2) * rstd, vec, dt)
            g_sum = dy * xhat if g_sum is None else g_sum + dy * xhat
            b_sum = dy if b_sum is None else b_sum + dy
        (gv, bv), idx = _ws_at(plan, ws_row, t, lane)
        old_g = _ws_load(gv, idx, vec)
        old_b = _ws_load(bv, idx, vec)
        _ws_store(gv, idx, vec, [o + q for o, q in zip(old_g, _split(g_sum, vec))])
        _ws_store(bv, idx, vec, [o + q for o, q in zip(old_b, _split(b_sum, vec))])
        return ()

    _tiles(plan, apply)
    reducer.fence()                                   # the next batch reuses the LDS slots


def build_bwd(plan: RowPlan, strategy: str, abi: str, name: str = "") -> Callable:
    """@flyc.jit launcher of the main backward kernel.

    Launcher args: (X, DY, W, Mean, Rstd, DX, WSg, WSb, DG, DB, m, p, stream).
    WSg/WSb: fp32 [p*R, N] workspace (deterministic, or the wide-row accumulation mode);
    DG/DB: fp32 [N] accumulators for the atomic strategy (ignored by the deterministic kernel
    apart from the argument slot, so one launcher signature serves both).
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"dgamma strategy must be one of {STRATEGIES}, got {strategy!r}")
    R, BLOCK, n = plan.rows_per_block, plan.block, plan.n
    G = plan.batch if plan.streaming else R            # rows per group of the persistent loop
    floats = RowReducer.lds_floats(plan.lanes, values=2 * plan.batch, slots=1)
    kname = name or f"ln_bwd_{plan.dtype}_n{n}_{abi}_{strategy[:3]}"
    full = n * ELEM_BYTES[plan.dtype]
    uses_ws = strategy == "deterministic" or not plan.acc_in_registers

    if floats:
        @fx.struct
        class Scratch:
            part: fx.Array[fx.Float32, floats, 16]

    def setup():
        tid = fx.thread_idx.x
        if R == 1:
            slot, lane = fx.Int32(0), tid
        else:
            slot, lane = tid // plan.lanes, tid % plan.lanes
        if floats:
            part = fx.SharedAllocator().allocate(Scratch).peek().part.view(fx.make_layout(floats, 1))
            reducer = RowReducer(plan.lanes, part, tid // WAVE)
        else:
            reducer = RowReducer(plan.lanes)
        return slot, lane, reducer

    def row_masks(row, m):
        if R == 1:
            return full, 4
        ok = row < m
        return ok.select(fx.Int32(full), fx.Int32(0)), ok.select(fx.Int32(4), fx.Int32(0))

    def zeros():
        if plan.streaming:                              # nothing carried in registers across rows
            return [], []
        return ([fx.full(plan.vec, 0.0, fx.Float32) for _ in range(plan.tiles)],
                [fx.full(plan.vec, 0.0, fx.Float32) for _ in range(plan.tiles)])

    if abi == "pointer":
        @flyc.kernel(name=kname)
        def kern(X: fx.Pointer, DY: fx.Pointer, W: fx.Pointer, Mean: fx.Pointer, Rstd: fx.Pointer,
                 DX: fx.Pointer, WSg: fx.Pointer, WSb: fx.Pointer, DG: fx.Pointer, DB: fx.Pointer,
                 m: fx.Int32, p: fx.Int32):
            slot, lane, reducer = setup()
            pid = fx.Int32(fx.block_idx.x)
            gammas = load_gammas(plan, W, lane)
            views = ws_views(plan, WSg, WSb, pid * R + slot) if const_expr(uses_ws) else (None, None)
            if const_expr(not plan.acc_in_registers):
                zero_ws(plan, views, lane)
            acc_g, acc_b = zeros()
            groups = (m + (G - 1)) // G
            for g in range(pid, groups, p):
                if const_expr(plan.streaming):
                    bwd_batch(plan, g, m, lambda r: (X + fx.Int64(r) * n, DY + fx.Int64(r) * n,
                                                     DX + fx.Int64(r) * n),
                              Mean, Rstd, W, lane, reducer, views)
                else:
                    row = fx.Int32(g) * R + slot
                    row_nb, st_nb = row_masks(row, m)
                    off = fx.Int64(row) * n
                    mean = rowio.load_scalar_f32(Mean, row, st_nb)
                    rstd = rowio.load_scalar_f32(Rstd, row, st_nb)
                    acc_g, acc_b = bwd_row(plan, X + off, DY + off, DX + off, gammas, mean, rstd, row_nb, lane,
                                           reducer, acc_g, acc_b, views)
            epilogue(plan, strategy, acc_g, acc_b, views, DG, DB, lane)

        @flyc.jit
        def launch(X: fx.Pointer, DY: fx.Pointer, W: fx.Pointer, Mean: fx.Pointer, Rstd: fx.Pointer,
                   DX: fx.Pointer, WSg: fx.Pointer, WSb: fx.Pointer, DG: fx.Pointer, DB: fx.Pointer,
                   m: fx.Int32, p: fx.Int32, stream: fx.Stream = fx.Stream(None)):
            kern(X, DY, W, Mean, Rstd, DX, WSg, WSb, DG, DB, m, p).launch(
                grid=(p, 1, 1), block=(BLOCK, 1, 1), stream=stream)
    elif abi == "tensor":
        @flyc.kernel(name=kname)
        def kern(X: fx.Tensor, DY: fx.Tensor, W: fx.Tensor, Mean: fx.Tensor, Rstd: fx.Tensor,
                 DX: fx.Tensor, WSg: fx.Tensor, WSb: fx.Tensor, DG: fx.Tensor, DB: fx.Tensor,
                 m: fx.Int32, p: fx.Int32):
            slot, lane, reducer = setup()
            pid = fx.Int32(fx.block_idx.x)
            gammas = load_gammas(plan, fx.get_iter(W), lane)
            views = (ws_views(plan, fx.get_iter(WSg), fx.get_iter(WSb), pid * R + slot)
                     if const_expr(uses_ws) else (None, None))
            if const_expr(not plan.acc_in_registers):
                zero_ws(plan, views, lane)
            acc_g, acc_b = zeros()
            groups = (m + (G - 1)) // G
            for g in range(pid, groups, p):
                if const_expr(plan.streaming):
                    bwd_batch(plan, g, m, lambda r: (fx.get_iter(fx.slice(X, (r, None))),
                                                     fx.get_iter(fx.slice(DY, (r, None))),
                                                     fx.get_iter(fx.slice(DX, (r, None)))),
                              fx.get_iter(Mean), fx.get_iter(Rstd), fx.get_iter(W), lane, reducer, views)
                else:
                    row = fx.Int32(g) * R + slot
                    row_nb, st_nb = row_masks(row, m)
                    mean = rowio.load_scalar_f32(fx.get_iter(Mean), row, st_nb)
                    rstd = rowio.load_scalar_f32(fx.get_iter(Rstd), row, st_nb)
                    acc_g, acc_b = bwd_row(plan, fx.get_iter(fx.slice(X, (row, None))),
                                           fx.get_iter(fx.slice(DY, (row, None))),
                                           fx.get_iter(fx.slice(DX, (row, None))), gammas, mean, rstd, row_nb,
                                           lane, reducer, acc_g, acc_b, views)
            epilogue(plan, strategy, acc_g, acc_b, views, fx.get_iter(DG), fx.get_iter(DB), lane)

        @flyc.jit
        def launch(X: fx.Tensor, DY: fx.Tensor, W: fx.Tensor, Mean: fx.Tensor, Rstd: fx.Tensor,
                   DX: fx.Tensor, WSg: fx.Tensor, WSb: fx.Tensor, DG: fx.Tensor, DB: fx.Tensor,
                   m: fx.Int32, p: fx.Int32, stream: fx.Stream = fx.Stream(None)):
            kern(X, DY, W, Mean, Rstd, DX, WSg, WSb, DG, DB, m, p).launch(
                grid=(p, 1, 1), block=(BLOCK, 1, 1), stream=stream)
    else:
        raise ValueError(f"abi must be 'pointer' or 'tensor', got {abi!r}")
    return launch


def build_reduce(rp: ReducePlan, wdtype: str, abi: str, name: str = "") -> Callable:
    """@flyc.jit launcher summing the [rows, N] fp32 partials per column in row order 0..rows-1
    and writing dγ/dβ in the weight dtype. Launcher args: (WSg, WSb, DG, DB, rows, stream)."""
    n, vec, BLOCK = rp.n, rp.vec, rp.block
    kname = name or f"ln_bwd_reduce_{wdtype}_n{n}_{abi}"
    out_nb = n * ELEM_BYTES[wdtype]

    def body(gp, bp, dgp, dbp, rows):
        col = fx.Int32(fx.block_idx.x) * BLOCK + fx.thread_idx.x            # chunk of `vec` columns
        atom = rowio.copy_atom(vec, "f32")
        acc = [fx.full(vec, 0.0, fx.Float32), fx.full(vec, 0.0, fx.Float32)]
        return col, atom, acc

    def finish(col, acc, dgp, dbp):
        oatom = rowio.copy_atom(vec, wdtype)
        rowio.store_from_f32(oatom, rowio.chunked(dgp, n, vec, out_nb), col, acc[0], vec, wdtype)
        rowio.store_from_f32(oatom, rowio.chunked(dbp, n, vec, out_nb), col, acc[1], vec, wdtype)

    def step(atom, gp, bp, r, col, acc):
        off = fx.Int64(r) * n
        g = rowio.load_f32(atom, rowio.chunked(gp + off, n, vec, n * 4), col, vec, "f32")
        b = rowio.load_f32(atom, rowio.chunked(bp + off, n, vec, n * 4), col, vec, "f32")
        return [acc[0] + g, acc[1] + b]

    if abi == "pointer":
        @flyc.kernel(name=kname)
        def kern(WSg: fx.Pointer, WSb: fx.Pointer, DG: fx.Pointer, DB: fx.Pointer, rows: fx.Int32):
            col, atom, acc = body(WSg, WSb, DG, DB, rows)
            for r in range(fx.Int32(0), rows, fx.Int32(1)):
                acc = step(atom, WSg, WSb, r, col, acc)
            finish(col, acc, DG, DB)

        @flyc.jit
        def launch(WSg: fx.Pointer, WSb: fx.Pointer, DG: fx.Pointer, DB: fx.Pointer, rows: fx.Int32,
                   stream: fx.Stream = fx.Stream(None)):
            kern(WSg, WSb, DG, DB, rows).launch(grid=(rp.grid(), 1, 1), block=(BLOCK, 1, 1), stream=stream)
    elif abi == "tensor":
        @flyc.kernel(name=kname)
        def kern(WSg: fx.Tensor, WSb: fx.Tensor, DG: fx.Tensor, DB: fx.Tensor, rows: fx.Int32):
            gp, bp = fx.get_iter(WSg), fx.get_iter(WSb)
            col, atom, acc = body(gp, bp, None, None, rows)
            for r in range(fx.Int32(0), rows, fx.Int32(1)):
                acc = step(atom, gp, bp, r, col, acc)
            finish(col, acc, fx.get_iter(DG), fx.get_iter(DB))

        @flyc.jit
        def launch(WSg: fx.Tensor, WSb: fx.Tensor, DG: fx.Tensor, DB: fx.Tensor, rows: fx.Int32,
                   stream: fx.Stream = fx.Stream(None)):
            kern(WSg, WSb, DG, DB, rows).launch(grid=(rp.grid(), 1, 1), block=(BLOCK, 1, 1), stream=stream)
    else:
        raise ValueError(f"abi must be 'pointer' or 'tensor', got {abi!r}")
    return launch

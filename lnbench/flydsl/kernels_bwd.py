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
  deterministic: store the fp32 partials to row pid of a [P, N] workspace (a block of R > 1 rows adds
                 its row slots in LDS first, slot 0 first: combine_slots); the reduce kernel then sums
                 the P rows per column in a fixed order (ReducePlan; bitwise reproducible);
  atomic:        fp32 global atomic adds (agent scope) into [N] fp32 accumulators (order varies).
"""
# no `from __future__ import annotations`: FlyDSL reads the annotations as real types
from typing import Any, Callable, Sequence

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import const_expr, range_constexpr

from lnbench.constants import ELEM_BYTES, STRATEGIES
from lnbench.flydsl import rowio
from lnbench.flydsl.geometry import ReducePlan, RowPlan, _pow2_ceil
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


def _pieces(v, vec: int, w: int) -> list:
    """fp32 vector of `vec` -> its vec // w consecutive pieces of w (the whole vector when w == vec)."""
    if w == vec:
        return [v]
    return [v.shuffle(v, list(range(i * w, (i + 1) * w))) for i in range(vec // w)]


def _piecewise(fn: Callable, vec: int, w: int) -> Callable:
    """fn applied to the pieces of w of its fp32 vector arguments, the results joined into one vector of `vec`.
    Its row constants are then w wide: in a runtime tile loop fewer of them are rebuilt by moves (gfx950,
    256x65536: 3 VALU fewer per tile)."""
    if w == vec:
        return fn

    def apply(*vs):
        outs = [fn(*ps) for ps in zip(*(_pieces(v, vec, w) for v in vs))]
        width = w
        while len(outs) > 1:
            outs = [a.shuffle(b, list(range(2 * width))) for a, b in zip(outs[::2], outs[1::2])]
            width *= 2
        return outs[0]
    return apply


def _uniform(v):
    """A row constant every lane holds (a row statistic) moved to a scalar register (v_readfirstlane): the
    streaming loops' packed ops read it there, where from a vector register they rebuild a (value, value) pair
    by two v_mov every tile (gfx950, 256x65536: -20 VALU per batch and wave)."""
    return fx.Float32(fx.rocdl.readfirstlane(fx.Float32.ir_type, v))


def _dx_terms(c1, c2, rstd, vec: int, w: int = 0):
    """dx(wdy, x̂) = (wdy - c1 - x̂·c2)·rstd as two fused multiply-adds, wdy·rstd + (x̂·(-c2·rstd) - c1·rstd):
    the row's scalars are scaled once (no cancellation: every term is of the size of wdy·rstd). w: see _piecewise."""
    w = w or vec
    c2r = fx.full(w, -(c2 * rstd), fx.Float32)
    c1r = fx.full(w, -(c1 * rstd), fx.Float32)
    r = fx.full(w, rstd, fx.Float32)
    return _piecewise(lambda wdy, xhat: fx.fma(wdy, r, fx.fma(xhat, c2r, c1r)), vec, w)


def _xhat_of(mean, rstd, vec: int, dt: str, w: int = 0):
    """x -> x̂ = (x - mean)·rstd of fp32 x. 16-bit inputs: one packed fma per element pair, x·rstd + (-mean·rstd);
    the rounding of -mean·rstd shifts x̂ by at most 2^-24·|mean|·rstd, 2^13 (f16) to 2^16 (bf16) times below
    the input's own rounding. fp32 inputs keep the subtraction first (their rounding is of that size). w: see
    _piecewise."""
    w = w or vec
    r = fx.full(w, rstd, fx.Float32)
    if dt == "f32":
        m = fx.full(w, mean, fx.Float32)
        return _piecewise(lambda x: (x - m) * r, vec, w)
    c = fx.full(w, -(mean * rstd), fx.Float32)
    return _piecewise(lambda x: fx.fma(x, r, c), vec, w)


def bwd_row(plan: RowPlan, x_ptr, dy_ptr, dx_ptr, gammas, mean, rstd, rows_nbytes, slot, lane,
            reducer: RowReducer, acc_g, acc_b, ws_view, first=None):
    """Backward of row `slot` of a group of rows_per_block rows; returns the updated (acc_g, acc_b) lists
    (register mode) or updates the workspace row `ws_view` in place (workspace mode; `first`: see _ws_at).
    No runtime `if`:
    shared by both ABIs. x/dy/dx_ptr point at the group's first row and rows_nbytes bounds the group's rows
    inside M, so every access goes through one uniform descriptor (no per-lane loop over descriptors)."""
    n, vec, lanes, dt, R = plan.n, plan.vec, plan.lanes, plan.dtype, plan.rows_per_block
    atom = rowio.copy_atom(vec, dt)
    xv = rowio.chunked(x_ptr, R * n, vec, rows_nbytes)
    dyv = rowio.chunked(dy_ptr, R * n, vec, rows_nbytes)
    dxv = rowio.chunked(dx_ptr, R * n, vec, rows_nbytes)

    def at(t):
        """Chunk index of tile t in the group's view; a chunk past the row end of a row that is not the
        group's last is sent past the group's end (loads 0, its store dropped), never into the next row."""
        idx = lane + t * lanes
        if const_expr(R == 1):
            return idx
        if const_expr((t + 1) * lanes > plan.chunks):
            return (idx < plan.chunks).select(idx + slot * plan.chunks, fx.Int32(R * plan.chunks))
        return idx + slot * plan.chunks

    # keep only the loaded x and dy (tensor dtype) live across the reduction; x̂ and wdy are
    # recomputed afterwards, and γ is re-read (L1/L2-resident) when it is not kept in registers
    atom_w = rowio.copy_atom(vec, dt)
    wv = rowio.chunked(gammas, n, vec, n * ELEM_BYTES[dt]) if not isinstance(gammas, list) else None

    def gamma(t):
        if isinstance(gammas, list):
            return gammas[t]
        return rowio.load_f32(atom_w, wv, lane + t * lanes, vec, dt)

    xhat_of = _xhat_of(mean, rstd, vec, dt)
    xr, dyr = [], []
    s1v: Any = None                    # DSL vectors after the first tile
    s2v: Any = None
    for t in range_constexpr(plan.tiles):
        x = rowio.load_raw(atom, xv, at(t), vec, dt)                  # past the end / past M: zeros
        dy = rowio.load_raw(atom, dyv, at(t), vec, dt)
        xr.append(x)
        if const_expr(plan.acc_in_registers):
            dyr.append(dy)
        xhat = xhat_of(rowio.widen(x, dt))
        wdy = rowio.widen(dy, dt) * gamma(t)
        # the tiles summed as vectors (packed adds, Σwdy·x̂ by packed fmas), each vector reduced once
        s1v = wdy if s1v is None else s1v + wdy
        s2v = wdy * xhat if s2v is None else fx.fma(wdy, xhat, s2v)
    c1, c2 = reducer.sum2(s1v.reduce(fx.ReductionOp.ADD, fastmath=FAST),
                          s2v.reduce(fx.ReductionOp.ADD, fastmath=FAST))
    dx_of = _dx_terms(c1 * (1.0 / n), c2 * (1.0 / n), rstd, vec)
    new_g, new_b = [], []
    for t in range_constexpr(plan.tiles):
        idx = lane + t * lanes
        xhat = xhat_of(rowio.widen(xr[t], dt))
        if const_expr(plan.acc_in_registers):
            dy = rowio.widen(dyr[t], dt)
        else:                       # very wide rows: re-read dy (L2-resident) instead of spilling
            dy = rowio.load_f32(atom, dyv, at(t), vec, dt)
        rowio.store_from_f32(atom, dxv, at(t), dx_of(dy * gamma(t), xhat), vec, dt)
        if const_expr(plan.acc_in_registers and acc_g is None):      # the program's first row group
            new_g.append(dy * xhat)
            new_b.append(dy)
        elif const_expr(plan.acc_in_registers):
            new_g.append(fx.fma(dy, xhat, acc_g[t]))
            new_b.append(acc_b[t] + dy)
        else:
            (gv, bv), _ = _ws_at(plan, ws_view, t, lane)
            (gr, br), _ = _ws_at(plan, ws_view, t, lane, first)
            old_g = _ws_load(gr, idx, vec)
            old_b = _ws_load(br, idx, vec)
            dys = _split(dy, vec)
            _ws_store(gv, idx, vec, [fx.fma(d, q, o) for o, d, q in zip(old_g, dys, _split(xhat, vec))])
            _ws_store(bv, idx, vec, [o + d for o, d in zip(old_b, dys)])
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
    """(dγ, dβ) fp32 workspace row pointers of this program (viewed per use by _ws_at)."""
    off = fx.Int64(ws_row) * plan.n
    return wsg_ptr + off, wsb_ptr + off


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


def _ws_at(plan: RowPlan, ptrs, t, lane, first=None):
    """((dγ view, dβ view), chunk index) of tile t in the workspace row, split in <= 16-byte pieces.

    first: a traced bool, true in a program's first row group; the views then read nothing (a bound of 0
    bytes loads zeros), so the first read-modify-write is a plain store and the row needs no zeroing pass.
    Every program owns at least one group (geometry.bwd_programs), so every partial row is written."""
    w, _ = _f32_parts(plan.vec)
    if not plan.streaming:
        base, size, nb, idx = ptrs, plan.n, plan.n * 4, lane + t * plan.lanes
    else:
        step = plan.lanes * plan.vec
        base, size, nb, idx = [ptr + fx.Int64(t) * step for ptr in ptrs], step, _tile_nbytes(plan, t, 4), lane
    if first is not None:
        nb = first.select(fx.Int32(0), fx.Int32(nb) if isinstance(nb, int) else nb)
    return tuple(rowio.chunked(ptr, size, w, nb) for ptr in base), idx


def _tiles(plan: RowPlan, body, carry: tuple = ()) -> tuple:
    """carry = body(t, *carry) for every tile t: unrolled for register paths, a runtime loop (the partial
    last tile included: body masks it by t) for streaming plans."""
    if not plan.streaming:
        for t in range_constexpr(plan.tiles):
            carry = tuple(body(t, *carry))
        return carry
    return rowio.tile_loop(0, plan.tiles, plan.step, body, carry)


def epilogue(plan: RowPlan, strategy: str, acc_g, acc_b, views, dg_ptr, db_ptr, lane) -> None:
    """Hand this program's partials over: workspace row (deterministic) or atomics (atomic)."""
    w, k = _f32_parts(plan.vec)
    ratom = rowio.copy_atom(w, "f32")

    def tile(t):
        if const_expr(views[0] is None):               # atomic, partials in registers: no workspace
            (gv, bv), idx = (None, None), lane + t * plan.lanes
        else:
            (gv, bv), idx = _ws_at(plan, views, t, lane)
        if const_expr(plan.acc_in_registers):
            g_parts, b_parts = _split(acc_g[t], plan.vec), _split(acc_b[t], plan.vec)
        if const_expr(strategy == "deterministic"):
            if const_expr(plan.acc_in_registers):
                _ws_store(gv, idx, plan.vec, g_parts)
                _ws_store(bv, idx, plan.vec, b_parts)
        else:
            partial = (t + 1) * plan.lanes > plan.chunks if isinstance(t, int) else plan.masked
            inside: Any = (lane + t * plan.lanes < plan.chunks) if partial else None
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


def combine_floats(plan: RowPlan) -> int:
    """LDS floats combine_slots needs: dγ and dβ of R slots, tiles·vec values per lane padded to a power of two."""
    return 2 * plan.rows_per_block * _pow2_ceil(plan.tiles * plan.vec) * plan.lanes


def combine_slots(plan: RowPlan, acc_g, acc_b, part, ws_g, ws_b, tid, slot, lane) -> None:
    """Deterministic strategy, several rows per block: add the R row slots' dγ/dβ partials in LDS (slot 0
    first) and store their sum as the program's ONE partial row (ws_g/ws_b: its row pointers). Thread t
    sums outputs t, t+block, ... (fp32 scalars, dγ then dβ). A slot's `tiles·vec` values per lane are padded to
    a power of two (combine_floats), so that every index is a shift (the emulator has no v_mad_u32_u24); an
    output that does not exist stores past the bound."""
    R, lanes, vec, n = plan.rows_per_block, plan.lanes, plan.vec, plan.n
    tv = plan.tiles * vec
    padded = _pow2_ceil(tv) * lanes                      # LDS floats of one slot's dγ (or dβ) partial
    for k, acc in enumerate((acc_g, acc_b)):
        for t in range_constexpr(plan.tiles):
            for e in range_constexpr(vec):
                fx.memref_store(acc[t][e], part, (k * R + slot) * padded + (t * vec + e) * lanes + lane)
    fx.gpu.barrier()
    # views one element longer than the row: a size-1 view would fold the past-the-bound index to 0
    views = [rowio.chunked(ptr, n + 1, 1, n * 4) for ptr in (ws_g, ws_b)]
    atom = rowio.copy_atom(1, "f32")
    for q in range_constexpr(-(-2 * padded // plan.block)):
        o = tid + q * plan.block
        k, r = o // padded, o % padded
        te, ln = r // lanes, r % lanes
        ok = (o < 2 * padded) & (te < tv)
        at = ok.select(k * (R * padded) + r, fx.Int32(0))
        total = fx.memref_load(part, at)
        for i in range_constexpr(1, R):
            total = total + fx.memref_load(part, at + i * padded)
        col = ((te // vec) * lanes + ln) * vec + te % vec              # past the row end: dropped by the bound
        for kk in range_constexpr(2):
            rowio.store_from_f32(atom, views[kk], (ok & (k == kk)).select(col, fx.Int32(n)),
                                 fx.full(1, total, fx.Float32), 1, "f32")


def bwd_batch(plan: RowPlan, g, m, row_ptrs, mean_ptr, rstd_ptr, w_ptr, lane, reducer: RowReducer,
              ws_row, first) -> None:
    """Streaming backward of rows g*batch .. g*batch+batch-1 (rows past M masked), no runtime `if`.

    Pass 1 (runtime loop over the tiles): x, dy, γ -> per row Σwdy and Σwdy·x̂, for all rows of the batch
    in ONE reduction of 2·batch values. Pass 2 (the same loop again): x, dy, γ re-read (L2) -> dx, and
    the batch's Σ dy·x̂ and Σ dy added to the workspace row (one read-modify-write per tile for the whole
    batch, in a fixed order). Every tile is read through its own descriptor (rowio.tile_view); chunks past
    the row end load zeros (dy = 0 adds nothing) and their stores are dropped.
    row_ptrs(row) -> (x, dy, dx) typed pointers of that row; ws_row: this program's (dγ, dβ) row pointers;
    first: this is the program's first batch (its workspace row is not read: _ws_at).
    """
    n, vec, lanes, dt = plan.n, plan.vec, plan.lanes, plan.dtype
    esize = ELEM_BYTES[dt]
    atom = rowio.copy_atom(vec, dt)
    rows = []
    # rstd in a scalar register, except where the partial last tile runs after the loop with its own descriptors:
    # there the SGPRs run out (gfx942, Tensor ABI, atomic, N = 32776: 2 spilled)
    scalar = (lambda v: v) if plan.masked else _uniform
    for k in range_constexpr(plan.batch):
        row = fx.Int32(g) * plan.batch + k
        ok = row < m
        st_nb = ok.select(fx.Int32(4), fx.Int32(0))
        rows.append((*row_ptrs(row), rowio.load_scalar_f32(mean_ptr, row, st_nb),
                     scalar(rowio.load_scalar_f32(rstd_ptr, row, st_nb)), ok))
    w = min(vec, 2)                                   # row constants as pairs: see _piecewise
    xhat_ofs = [_xhat_of(r[3], r[4], vec, dt, w) for r in rows]

    def view(ptr, t, ok=None):
        nb = _tile_nbytes(plan, t, esize)
        return rowio.tile_view(ptr, t, lanes, vec, nb if ok is None else ok.select(fx.Int32(nb), fx.Int32(0)))

    def terms(t):
        """(γ, [(x̂, dy) per row]) of tile t, fp32."""
        gam = rowio.load_f32(atom, view(w_ptr, t), lane, vec, dt)
        out = []
        for (x_ptr, dy_ptr, _, _, _, ok), xhat_of in zip(rows, xhat_ofs):
            x = rowio.load_f32(atom, view(x_ptr, t, ok), lane, vec, dt)
            dy = rowio.load_f32(atom, view(dy_ptr, t, ok), lane, vec, dt)
            out.append((xhat_of(x), dy))
        return gam, out

    # per row, Σwdy and Σwdy·x̂ carried across the tiles as element pairs (w = 2; 1 at scalar width): a tile adds
    # its pairs into them in order (packed adds, packed fmas for Σwdy·x̂), and each pair is reduced once at the end

    def stats(t, *sums):
        gam, xd = terms(t)
        new = []
        for k in range_constexpr(plan.batch):
            xhat, dy = xd[k]
            wdys, xhats = _pieces(dy * gam, vec, w), _pieces(xhat, vec, w)
            s1, s2 = sums[2 * k], sums[2 * k + 1]
            for a, b in zip(wdys, xhats):
                s1, s2 = s1 + a, fx.fma(a, b, s2)
            new += [s1, s2]
        return tuple(new)

    sums: Sequence[Any] = _tiles(plan, stats, tuple(fx.full(w, 0.0, fx.Float32) for _ in range(2 * plan.batch)))
    sums = reducer.sum_n([v.reduce(fx.ReductionOp.ADD, fastmath=FAST) if w > 1 else v[0] for v in sums])
    dx_ofs = [_dx_terms(sums[2 * k] * (1.0 / n), sums[2 * k + 1] * (1.0 / n), rows[k][4], vec, w)
              for k in range(plan.batch)]

    def apply(t):
        gam, xd = terms(t)
        for k in range_constexpr(plan.batch):
            xhat, dy = xd[k]
            _, _, dx_ptr, _, _, ok = rows[k]
            rowio.store_from_f32(atom, view(dx_ptr, t, ok), lane, dx_ofs[k](dy * gam, xhat), vec, dt)
        (gv, bv), idx = _ws_at(plan, ws_row, t, lane)
        (gr, br), _ = _ws_at(plan, ws_row, t, lane, first)
        g_sum = _ws_load(gr, idx, vec)
        b_sum = _ws_load(br, idx, vec)
        for k in range_constexpr(plan.batch):           # the batch's rows added in order, one fma per pair
            xhat, dy = xd[k]
            dys = _split(dy, vec)
            g_sum = [fx.fma(d, q, o) for o, d, q in zip(g_sum, dys, _split(xhat, vec))]
            b_sum = [o + d for o, d in zip(b_sum, dys)]
        _ws_store(gv, idx, vec, g_sum)
        _ws_store(bv, idx, vec, b_sum)
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
    # several rows per block (deterministic): the slots' partials are added in LDS into one row per program
    combine = strategy == "deterministic" and R > 1
    if R > 1 and not plan.acc_in_registers:
        raise ValueError("a block of several rows keeps its dγ/dβ partials in registers")
    floats = max(RowReducer.lds_floats(plan.lanes, values=2 * plan.batch, slots=1),
                 combine_floats(plan) if combine else 0)
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
        part = None
        if floats:
            part = fx.SharedAllocator().allocate(Scratch).peek().part.view(fx.make_layout(floats, 1))
        reducer = RowReducer(plan.lanes, part, tid // WAVE) if plan.lanes > WAVE else RowReducer(plan.lanes)
        return tid, slot, lane, reducer, part

    def ws_row(pid, slot):
        return pid if combine else pid * R + slot

    def group_masks(g, groups, m, peeled=False):
        """(x/dy/dx bytes, stats bytes) of group g's rows inside M: uniform, so one descriptor per buffer.
        Only the last group can reach past M (a group test, not a min: the emulator has no s_min_i32).
        peeled: the program's first group, run before the loop: it moves nothing when the program owns no group
        (a launch with more programs than groups; bwd_programs never makes one)."""
        if R == 1 and not peeled:
            return full, 4
        rows = fx.Int32(1) if R == 1 else (fx.Int32(g) == groups - 1).select(m - fx.Int32(g) * R, fx.Int32(R))
        if peeled:
            rows = (fx.Int32(g) < groups).select(rows, fx.Int32(0))
        return rows * full, rows * 4

    # register-path partials: the program's first row group is peeled off the loop and starts them (dγ = dy·x̂,
    # dβ = dy), so no zeroed partials are carried in and no first adds run
    peel = plan.acc_in_registers

    def reg_group(g, groups, m, ptrs_of, mean_ptr, rstd_ptr, gammas, slot, lane, reducer, acc_g, acc_b, views,
                  pid, peeled=False):
        """bwd_row of row group g; ptrs_of(row0) -> its (x, dy, dx) pointers."""
        row0 = fx.Int32(g) * R
        rows_nb, st_nb = group_masks(g, groups, m, peeled)
        mean = stats(mean_ptr, row0, slot, st_nb)
        rstd = stats(rstd_ptr, row0, slot, st_nb)
        x_ptr, dy_ptr, dx_ptr = ptrs_of(row0)
        return bwd_row(plan, x_ptr, dy_ptr, dx_ptr, gammas, mean, rstd, rows_nb, slot, lane, reducer, acc_g, acc_b,
                       views, fx.Int32(g) == pid)

    def stats(ptr, row0, slot, st_nb):
        if R == 1:
            return rowio.load_scalar_f32(ptr, row0, st_nb)
        return rowio.load_f32_at(ptr + fx.Int64(row0), R, slot, st_nb)

    def finish(acc_g, acc_b, views, part, WSg, WSb, DG, DB, tid, slot, lane, pid):
        if const_expr(combine):
            off = fx.Int64(pid) * n
            combine_slots(plan, acc_g, acc_b, part, WSg + off, WSb + off, tid, slot, lane)
        else:
            epilogue(plan, strategy, acc_g, acc_b, views, DG, DB, lane)

    def zeros():
        if plan.streaming or peel:                      # nothing carried in / the peeled group starts them
            return [], []
        return ([fx.full(plan.vec, 0.0, fx.Float32) for _ in range(plan.tiles)],
                [fx.full(plan.vec, 0.0, fx.Float32) for _ in range(plan.tiles)])

    if abi not in ("pointer", "tensor"):
        raise ValueError(f"abi must be 'pointer' or 'tensor', got {abi!r}")
    T = fx.Pointer if abi == "pointer" else fx.Tensor          # the ABIs differ in their argument type and in
    ptr = (lambda v: v) if abi == "pointer" else fx.get_iter    # where a row's pointer comes from (ptrs_of)

    def row_ptrs(tensors, r):
        """(x, dy, dx) pointers of row r: from the base pointer (Pointer ABI), or the layout's row (Tensor ABI)."""
        if abi == "pointer":
            return tuple(t + fx.Int64(r) * n for t in tensors)
        return tuple(fx.get_iter(fx.slice(t, (r, None))) for t in tensors)

    @flyc.kernel(name=kname)
    def kern(X: T, DY: T, W: T, Mean: T, Rstd: T, DX: T, WSg: T, WSb: T,  # type: ignore[valid-type]
             DG: T, DB: T, m: fx.Int32, p: fx.Int32):  # type: ignore[valid-type]
        tid, slot, lane, reducer, part = setup()
        pid = fx.Int32(fx.block_idx.x)
        gammas = load_gammas(plan, ptr(W), lane)
        views = ws_views(plan, ptr(WSg), ptr(WSb), ws_row(pid, slot)) if const_expr(uses_ws) else (None, None)
        acc_g, acc_b = zeros()
        groups = (m + (G - 1)) // G
        ptrs_of = lambda row0: row_ptrs((X, DY, DX), row0)  # noqa: E731
        start = pid
        if const_expr(peel):
            acc_g, acc_b = reg_group(pid, groups, m, ptrs_of, ptr(Mean), ptr(Rstd), gammas, slot, lane, reducer, None,
                                     None, views, pid, peeled=True)
            start = pid + p
        for g in range(start, groups, p):
            if const_expr(plan.streaming):
                bwd_batch(plan, g, m, lambda r: row_ptrs((X, DY, DX), r), ptr(Mean), ptr(Rstd), ptr(W), lane, reducer,
                          views, fx.Int32(g) == pid)
            else:
                acc_g, acc_b = reg_group(g, groups, m, ptrs_of, ptr(Mean), ptr(Rstd), gammas, slot, lane, reducer,
                                         acc_g, acc_b, views, pid)
        finish(acc_g, acc_b, views, part, ptr(WSg), ptr(WSb), ptr(DG), ptr(DB), tid, slot, lane, pid)

    @flyc.jit
    def launch(X: T, DY: T, W: T, Mean: T, Rstd: T, DX: T, WSg: T, WSb: T,  # type: ignore[valid-type]
               DG: T, DB: T, m: fx.Int32, p: fx.Int32, stream: fx.Stream = fx.Stream(None)):  # type: ignore[valid-type]
        kern(X, DY, W, Mean, Rstd, DX, WSg, WSb, DG, DB, m, p).launch(
            grid=(p, 1, 1), block=(BLOCK, 1, 1), stream=stream)
    return launch


def build_reduce(rp: ReducePlan, wdtype: str, abi: str, name: str = "") -> Callable:
    """@flyc.jit launcher summing the [rows, N] fp32 partials per column and writing dγ/dβ in the weight
    dtype (the fixed order of ReducePlan: a split's row of the ragged last step, then its other rows in order,
    then the splits' sums by the tree of rp.fans in LDS, lowest split first). Launcher args: (WSg, WSb, DG,
    DB, rows, stream)."""
    n, vec, cols, S, BLOCK, strip = rp.n, rp.vec, rp.cols, rp.splits, rp.block, rp.strip
    kname = name or f"ln_bwd_reduce_{wdtype}_n{n}_{abi}"
    out_nb = n * ELEM_BYTES[wdtype]
    outs = 2 * strip                                  # dγ and dβ values of a strip: output o is value
    #                                                   o // cols (k·vec + e) of column thread o % cols
    # the splits' sums in LDS: value q of thread t at q·plane + t (writes: consecutive lanes, consecutive
    # dwords). A first-level job reads its sums `cols` dwords apart, two a ds_read2 (16 lanes a pass);
    # plane ≡ 2·cols (mod 32 banks) puts the pairs of the 16 / cols outputs of a pass side by side in 32
    # banks. One column thread: 4 adjacent sums a ds_read2_b64 (8 lanes, the 8 outputs), plane ≡ 4
    plane = BLOCK + max(2 * cols, 4)
    counts, rows_left = [], S                         # each level's sums: (rows left) × outs
    for f in rp.fans:
        rows_left //= f
        counts.append(rows_left * outs)
    floats_a, floats_b = 2 * vec * plane, max(counts)

    @fx.struct
    class Scratch:
        a: fx.Array[fx.Float32, floats_a, 16]
        b: fx.Array[fx.Float32, floats_b, 16]

    past = S * (n // vec)                             # a chunk index past every split's rows: masked

    def start():
        tid = fx.thread_idx.x
        first = fx.Int32(fx.block_idx.x) * strip                          # the strip's first column
        # chunk of (split s, column thread c) in a view starting at the strip of the step's first row;
        # a chunk past the row end (the last strip) is masked, never read from the next row
        idx = (tid // cols) * (n // vec) + tid % cols
        idx = (first + (tid % cols) * vec < n).select(idx, fx.Int32(past))
        return tid, first, idx

    def step(gp, bp, r0, first, idx, acc=None):
        """Rows r0 .. r0+S-1 (split s: row r0+s) added to acc (None: they start it); idx masks what is not
        to be read (0.0)."""
        nb = fx.Int32(S * n * 4) - first * 4
        off = fx.Int64(r0) * n + fx.Int64(first)
        atom = rowio.copy_atom(vec, "f32")
        g = rowio.load_f32(atom, rowio.chunked(gp + off, S * n, vec, nb), idx, vec, "f32")
        b = rowio.load_f32(atom, rowio.chunked(bp + off, S * n, vec, nb), idx, vec, "f32")
        return [g, b] if acc is None else [acc[0] + g, acc[1] + b]

    def tail(gp, bp, rows, tid, first, idx):
        """The last rows % S rows start the sums (no zeros to add them to): split s reads row full + s only
        when it exists (no min: the emulator has no s_min_i32)."""
        full = rows - rows % S
        return step(gp, bp, full, first, (tid // cols < rows - full).select(idx, fx.Int32(past)))

    def finish(tid, first, acc, dgp, dbp):
        """The splits' sums through LDS, then the levels of rp.fans: a job (output o, group g) adds the
        group's fans[l] sums of o in split order; the last level's jobs store the outputs (dγ first, then
        dβ, by the column's mask). With fewer jobs than threads a thread past them skips the level (scf.if):
        a wave without a job runs none of its VALU work or LDS reads."""
        scratch = fx.SharedAllocator().allocate(Scratch).peek()
        bufs = [scratch.a.view(fx.make_layout(floats_a, 1)), scratch.b.view(fx.make_layout(floats_b, 1))]
        for k in range_constexpr(2):
            for e in range_constexpr(vec):
                fx.memref_store(acc[k][e], bufs[0], (k * vec + e) * plane + tid)
        fx.gpu.barrier()
        oatom = rowio.copy_atom(1, wdtype)
        views = [rowio.chunked(ptr, n + 1, 1, out_nb) for ptr in (dgp, dbp)]     # n + 1: see combine_slots
        last = len(rp.fans) - 1
        for lvl in range_constexpr(len(rp.fans)):
            f, jobs = rp.fans[lvl], counts[lvl]
            src, dst = bufs[lvl % 2], bufs[1 - lvl % 2]
            for q in range_constexpr(-(-jobs // BLOCK)):
                slot = tid + q * BLOCK

                def job(*, slot=slot, lvl=lvl, f=f, src=src, dst=dst):
                    o, g = slot % outs, slot // outs
                    if lvl == 0:
                        at, pitch = (o // cols) * plane + g * (f * cols) + o % cols, cols
                    else:
                        at, pitch = g * (f * outs) + o, outs
                    total = fx.memref_load(src, at)
                    for i in range_constexpr(1, f):
                        total = total + fx.memref_load(src, at + i * pitch)
                    if lvl < last:
                        fx.memref_store(total, dst, slot)
                    else:
                        col = first + (o % cols) * vec + (o // cols) % vec
                        for kk in range_constexpr(2):
                            rowio.store_from_f32(oatom, views[kk], (o // strip == kk).select(col, fx.Int32(n)),
                                                 fx.full(1, total, fx.Float32), 1, wdtype)
                if jobs >= (q + 1) * BLOCK:
                    job()
                else:
                    rowio.when(slot < jobs, job)
            if lvl < last:
                fx.gpu.barrier()

    if abi == "pointer":
        @flyc.kernel(name=kname)
        def kern(WSg: fx.Pointer, WSb: fx.Pointer, DG: fx.Pointer, DB: fx.Pointer, rows: fx.Int32):
            tid, first, idx = start()
            acc = tail(WSg, WSb, rows, tid, first, idx)
            for r0 in range(fx.Int32(0), rows - rows % S, fx.Int32(S)):
                acc = step(WSg, WSb, r0, first, idx, acc)
            finish(tid, first, acc, DG, DB)

        @flyc.jit
        def launch(WSg: fx.Pointer, WSb: fx.Pointer, DG: fx.Pointer, DB: fx.Pointer, rows: fx.Int32,
                   stream: fx.Stream = fx.Stream(None)):
            kern(WSg, WSb, DG, DB, rows).launch(grid=(rp.grid(), 1, 1), block=(BLOCK, 1, 1), stream=stream)
    elif abi == "tensor":
        @flyc.kernel(name=kname)
        def kern(WSg: fx.Tensor, WSb: fx.Tensor, DG: fx.Tensor, DB: fx.Tensor, rows: fx.Int32):
            gp, bp = fx.get_iter(WSg), fx.get_iter(WSb)
            tid, first, idx = start()
            acc = tail(gp, bp, rows, tid, first, idx)
            for r0 in range(fx.Int32(0), rows - rows % S, fx.Int32(S)):
                acc = step(gp, bp, r0, first, idx, acc)
            finish(tid, first, acc, fx.get_iter(DG), fx.get_iter(DB))

        @flyc.jit
        def launch(WSg: fx.Tensor, WSb: fx.Tensor, DG: fx.Tensor, DB: fx.Tensor, rows: fx.Int32,
                   stream: fx.Stream = fx.Stream(None)):
            kern(WSg, WSb, DG, DB, rows).launch(grid=(rp.grid(), 1, 1), block=(BLOCK, 1, 1), stream=stream)
    else:
        raise ValueError(f"abi must be 'pointer' or 'tensor', got {abi!r}")
    return launch

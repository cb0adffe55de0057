"""LayerNorm forward kernels and @flyc.jit launchers, Pointer and Tensor ABI.

y = (x - mean) * rstd * weight + bias per row; fp32 math; mean and variance from the row centred on
a first mean (register-resident rows: one read of x, two reductions; longer rows stream, see fwd_row);
eps baked in.
store_stats decides at trace time whether fp32 mean/rstd (M,) are written at all.
"""
# no `from __future__ import annotations`: FlyDSL reads the annotations as real types

from typing import Callable

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import const_expr, range_constexpr

from lnbench.constants import ELEM_BYTES
from lnbench.flydsl.geometry import RowPlan
from lnbench.flydsl.reduce import WAVE, RowReducer
from lnbench.flydsl import rowio

FAST = fx.FastMathFlags.fast


def _lds_struct(plan: RowPlan, values: int, slots: int):
    floats = RowReducer.lds_floats(plan.lanes, values, slots)
    if floats == 0:
        return None

    @fx.struct
    class Scratch:
        part: fx.Array[fx.Float32, floats, 16]

    return Scratch, floats


def fwd_row(plan: RowPlan, eps: float, store_stats: bool, x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr,
            slot, rows_nbytes, stat_nbytes, lane, reducer: RowReducer) -> None:
    """The whole forward of row `slot` of the block's group of rows_per_block rows (shared by both ABIs; no
    runtime if). x_ptr/y_ptr/mean_ptr/rstd_ptr point at the group's first row (its first stat).

    rows_nbytes bounds x/y to the group's rows inside M and stat_nbytes (4 per such row) the stats: both
    are uniform, so every access goes through one uniform descriptor (no per-lane loop over descriptors);
    a row past M is masked by the bound, and the stats are written by lane 0 of each row alone (the other
    lanes' indices lie past the bound).

    Register path (plan.head == plan.tiles): the row is read once into registers; m0 = Σx/N.
    Streaming path (plan.streaming, rows too long for registers; one row per block): the first `head`
    tiles stay in registers and m0 is their mean; the tiles after them are read again from memory (L2)
    in the centred pass and in the output pass, by a runtime loop of `step` tiles per iteration, each
    tile through its own descriptor (rowio.tile_view). Both paths then form d = x - m0 over the whole
    row and ONE two-value reduction (Σd, Σd²): mean = m0 + Σd/N, var = Σd²/N - (Σd/N)². With the head
    a fraction f of the row, (mean - m0)² is at most var·(1-f)/f (the head/rest split of the variance),
    so the shift costs at most a factor 1 + (1-f)/f of fp32 rounding in var, never E[x²]-mean²-style
    cancellation.
    """
    n, vec, lanes, dt, R = plan.n, plan.vec, plan.lanes, plan.dtype, plan.rows_per_block
    full = n * ELEM_BYTES[dt]
    atom = rowio.copy_atom(vec, dt)
    stream = plan.streaming
    if const_expr(stream):
        tile_bytes = lanes * vec * ELEM_BYTES[dt]
        if not isinstance(rows_nbytes, int) or rows_nbytes != full:
            raise ValueError("the streaming forward runs one (real) row per block")
        ptrs = {"x": x_ptr, "y": y_ptr, "w": w_ptr, "b": b_ptr}

        def at(name, t):
            """(view, index) of tile t of a row: the tile's own descriptor, indexed by lane."""
            nb = min(tile_bytes, full - t * tile_bytes) if isinstance(t, int) else tile_bytes
            return rowio.tile_view(ptrs[name], t, lanes, vec, nb), lane
    else:
        views = {"x": rowio.chunked(x_ptr, R * n, vec, rows_nbytes), "y": rowio.chunked(y_ptr, R * n, vec, rows_nbytes),
                 "w": rowio.chunked(w_ptr, n, vec, full), "b": rowio.chunked(b_ptr, n, vec, full)}
        first = slot * plan.chunks if R > 1 else 0          # this row's first chunk in the group's view

        def at(name, t):
            idx = lane + t * lanes
            if const_expr(name in ("x", "y") and R > 1):
                if const_expr((t + 1) * lanes > plan.chunks):
                    # the group's view does not end with the row: a chunk past the row end is sent past the
                    # group's end instead (loads 0, its store dropped), never into the next row
                    inside = idx < plan.chunks
                    return views[name], inside.select(idx + first, fx.Int32(R * plan.chunks))
                return views[name], idx + first
            return views[name], idx

    def load(name, t, raw=False):
        view, idx = at(name, t)
        if const_expr(raw):
            return rowio.load_raw(atom, view, idx, vec, dt)
        return rowio.load_f32(atom, view, idx, vec, dt)               # past the end: zeros

    def reg(t):
        """Head tile t as fp32 (the streaming head is kept in the tensor dtype: half the registers)."""
        return rowio.widen(xs[t], dt) if stream else xs[t]

    xs = [load("x", t, raw=stream) for t in range_constexpr(plan.head)]
    rough, shift, var, ds = _pivot_stats(plan, reducer, lane, xs, reg, load)
    rstd = fx.rsqrt(var + eps, fastmath=FAST)
    # x̂ = (x - mean)·rstd = d·rstd - shift·rstd, one fma of the row's scalars (shift is small next to the row's
    # spread: no cancellation), then y = x̂·w + b: two packed fmas per element pair, no per-column w·rstd
    r_vec = fx.full(vec, rstd, fx.Float32)
    c_vec = fx.full(vec, -(shift * rstd), fx.Float32)

    def output(t, d):
        w = load("w", t)
        b = load("b", t)
        view, idx = at("y", t)
        rowio.store_from_f32(atom, view, idx, fx.fma(fx.fma(d, r_vec, c_vec), w, b), vec, dt)

    for t in range_constexpr(plan.head):
        output(t, reg(t) - rough if stream else ds[t])
    if const_expr(stream):
        def output_mem(t):
            output(t, load("x", t) - rough)
            return ()
        rowio.tile_loop(plan.head, plan.full_tiles - plan.head, plan.step, output_mem)
        if const_expr(plan.masked):
            output_mem(plan.full_tiles)

    if const_expr(store_stats):
        mean = rough + shift
        writer = lane * R + slot                              # in bounds for lane 0 of a row inside M only
        rowio.store_f32_at(mean_ptr, R * lanes, writer, mean, stat_nbytes)
        rowio.store_f32_at(rstd_ptr, R * lanes, writer, rstd, stat_nbytes)


def _pivot_stats(plan: RowPlan, reducer: RowReducer, lane, xs: list, reg: Callable, load: Callable):
    """(m0, shift, var, ds) of the row: m0 = the mean of the register tiles (the whole row, or the streaming
    head), then a pass over the whole row (tiles past the head re-read by `load`) and one two-value reduction
    (Σd, Σd²) of d = x - m0: mean = m0 + shift with shift = Σd/N, var = Σd²/N - shift². Two reductions.
    ds: the register path's d per tile (kept for the output pass), else None.

    The register tiles are summed as vectors (Σx by packed adds, Σd² by packed fmas) and each vector is reduced
    once at the end, not every tile reduced on its own and then added; the register tiles' Σd comes from the
    Σx vector (less count·m0 per element slot), not from a second vector sum."""
    n, lanes, vec = plan.n, plan.lanes, plan.vec
    head_elems = plan.head * lanes * vec if plan.streaming else n     # the streaming head has only full tiles
    accv = reg(0)
    for t in range_constexpr(1, plan.head):
        accv = accv + reg(t)
    rough = reducer.sum(accv.reduce(fx.ReductionOp.ADD, fastmath=FAST), slot=0) * (1.0 / head_elems)
    # Σd of the register tiles as accv - count·m0 per element slot (count: the slot's tiles inside the row; loads
    # past the row end read 0), one fma: count·m0 is not rounded on its own. For 16-bit inputs accv is exact
    # (a slot's sum of bf16/f16 values fits fp32's mantissa), so this Σd is rounded once. A rounded count·m0
    # was off by one ulp of head·|m0|: on a row of equal values near 1e3 with one lane per row (N = 7, 14, 15)
    # that is as large as Σd itself, and var = Σd²/N - shift² came out -1.1e-9 instead of 0 (rstd 316.246,
    # not 1/√eps = 316.228: verify's offset rows)
    count = float(plan.head)
    if const_expr(plan.masked and not plan.streaming):
        inside = (lane + (plan.head - 1) * lanes) < plan.chunks
        count = inside.select(float(plan.head), float(plan.head - 1))
    s1 = fx.fma(fx.full(vec, -rough, fx.Float32), fx.full(vec, count, fx.Float32), accv)
    s1 = s1.reduce(fx.ReductionOp.ADD, fastmath=FAST)

    def centred(t, x):
        """Tile t (value x) centred on m0; a tile reaching past the row end is masked."""
        d = x - rough
        if const_expr(isinstance(t, int) and (t + 1) * lanes > plan.chunks):
            inside = (lane + t * lanes) < plan.chunks
            d = d * inside.select(1.0, 0.0)
        return d

    # sum(d) corrects the mean (a plain sum of N values is off by ~sqrt(N) ulps of |mean|, found by executing
    # the f32 offset rows), and sum(d^2) - n * shift^2 is the variance without E[x^2] - mean^2 cancellation
    ds = [centred(t, reg(t)) for t in range_constexpr(plan.head)]
    sqv = ds[0] * ds[0]
    for t in range_constexpr(1, plan.head):
        sqv = fx.fma(ds[t], ds[t], sqv)
    sq = sqv.reduce(fx.ReductionOp.ADD, fastmath=FAST)
    kept: list | None = ds
    if const_expr(plan.streaming):
        def centred_mem(t, a, b):
            d = centred(t, load("x", t))
            return (a + d.reduce(fx.ReductionOp.ADD, fastmath=FAST),
                    b + (d * d).reduce(fx.ReductionOp.ADD, fastmath=FAST))
        s1, sq = rowio.tile_loop(plan.head, plan.full_tiles - plan.head, plan.step, centred_mem, (s1, sq))
        if const_expr(plan.masked):
            s1, sq = centred_mem(plan.full_tiles, s1, sq)
        kept = None
    s1, sq = reducer.sum2(s1, sq, slot=1)
    shift = s1 * (1.0 / n)
    return rough, shift, sq * (1.0 / n) - shift * shift, kept


def _geometry(plan: RowPlan):
    """Thread -> (row slot, lane in row, wave) from the static plan."""
    tid = fx.thread_idx.x
    lanes = plan.lanes
    if plan.rows_per_block == 1:
        return 0, tid, tid // WAVE
    return tid // lanes, tid % lanes, tid // WAVE


def _masks(plan: RowPlan, first_row, m):
    """(x/y byte count, stats byte count) of the block's rows inside M: uniform across the block."""
    full = plan.n * ELEM_BYTES[plan.dtype]
    R = plan.rows_per_block
    if R == 1:                                     # grid == M: every row is real
        return full, 4
    # only the grid's last block can reach past M (a block test, not min(R, m - first_row), which compiles
    # to s_min_i32)
    last = fx.Int32(fx.block_idx.x) == (m + (R - 1)) // R - 1
    rows = last.select(m - first_row, fx.Int32(R))
    return rows * full, rows * 4


def build_fwd(plan: RowPlan, eps: float, store_stats: bool, abi: str, name: str = "") -> Callable:
    """Return the @flyc.jit launcher for one forward variant.

    Pointer ABI launcher: (X, W, B, Y[, Mean, Rstd], m, stream), every tensor a typed fx.Pointer.
    Tensor ABI launcher: the same order with fx.Tensor (dynamic layout) arguments.
    """
    eps = float(eps)
    R, BLOCK = plan.rows_per_block, plan.block
    lds = _lds_struct(plan, values=2, slots=2)
    kname = name or f"ln_fwd_{plan.dtype}_n{plan.n}_{abi}{'' if store_stats else '_nostats'}"

    def reducer_for(wave):
        if lds is None:
            return RowReducer(plan.lanes)
        part = fx.SharedAllocator().allocate(lds[0]).peek().part.view(fx.make_layout(lds[1], 1))
        return RowReducer(plan.lanes, part, wave)

    def ptr_body(X, W, B, Y, Mean, Rstd, m):
        slot, lane, wave = _geometry(plan)
        row = fx.Int32(fx.block_idx.x) * R                         # the block's first row
        off = fx.Int64(row) * plan.n                               # 64-bit row offset
        rows_nb, stat_nb = _masks(plan, row, m)
        mp = Mean + fx.Int64(row) if Mean is not None else None
        rp = Rstd + fx.Int64(row) if Rstd is not None else None
        fwd_row(plan, eps, store_stats, X + off, W, B, Y + off, mp, rp, slot, rows_nb, stat_nb, lane,
                reducer_for(wave))

    def tensor_body(X, W, B, Y, Mean, Rstd, m):
        slot, lane, wave = _geometry(plan)
        row = fx.Int32(fx.block_idx.x) * R
        rows_nb, stat_nb = _masks(plan, row, m)
        xr = fx.get_iter(fx.slice(X, (row, None)))                 # the layout's (64-bit) row stride
        yr = fx.get_iter(fx.slice(Y, (row, None)))
        mp = fx.get_iter(Mean) + fx.Int64(row) if Mean is not None else None
        rp = fx.get_iter(Rstd) + fx.Int64(row) if Rstd is not None else None
        fwd_row(plan, eps, store_stats, xr, fx.get_iter(W), fx.get_iter(B), yr, mp, rp, slot, rows_nb, stat_nb,
                lane, reducer_for(wave))

    if abi not in ("pointer", "tensor"):
        raise ValueError(f"abi must be 'pointer' or 'tensor', got {abi!r}")
    T = fx.Pointer if abi == "pointer" else fx.Tensor          # the ABIs differ in their argument type alone
    body = ptr_body if abi == "pointer" else tensor_body
    if store_stats:
        @flyc.kernel(name=kname)
        def kern(X: T, W: T, B: T, Y: T, Mean: T, Rstd: T, m: fx.Int32):  # type: ignore[valid-type]
            body(X, W, B, Y, Mean, Rstd, m)

        @flyc.jit
        def launch(X: T, W: T, B: T, Y: T, Mean: T, Rstd: T, m: fx.Int32,  # type: ignore[valid-type]
                   stream: fx.Stream = fx.Stream(None)):
            kern(X, W, B, Y, Mean, Rstd, m).launch(grid=((m + (R - 1)) // R, 1, 1), block=(BLOCK, 1, 1),
                                                   stream=stream)
    else:
        @flyc.kernel(name=kname)
        def kern(X: T, W: T, B: T, Y: T, m: fx.Int32):  # type: ignore[valid-type]
            body(X, W, B, Y, None, None, m)

        @flyc.jit
        def launch(X: T, W: T, B: T, Y: T, m: fx.Int32,  # type: ignore[valid-type]
                   stream: fx.Stream = fx.Stream(None)):
            kern(X, W, B, Y, m).launch(grid=((m + (R - 1)) // R, 1, 1), block=(BLOCK, 1, 1), stream=stream)
    return launch

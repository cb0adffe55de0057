"""Shared builders of the test kernel sources: one wave (64 lanes) per row, lanes striding over N. (No
`from __future__ import annotations`: FlyDSL reads the launchers' argument types, which forward_launchers is given.)"""

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import const_expr, range_constexpr

WAVE = 64
ELEM = {"f32": fx.Float32, "f16": fx.Float16, "bf16": fx.BFloat16}


def _wave_sum(v):
    for i in range_constexpr(6):
        v = v + v.shuffle_xor(WAVE >> (i + 1), WAVE)
    return v


def _ptr_rows(n: int, elem):
    """Accessors of a Pointer-ABI kernel: load(ptr, row, j) / store(ptr, row, j, value) as f32."""
    def load(p, row, j, t=elem):
        return (p + (fx.Int64(row) * n + j)).load().to(fx.Float32) if t is not fx.Float32 else \
            (p + (fx.Int64(row) * n + j)).load()

    def store(p, row, j, v, t=elem):
        (p + (fx.Int64(row) * n + j)).store(v.to(t) if t is not fx.Float32 else v)
    return load, store


def forward_launchers(kernel, Arg, store_stats: bool):
    """The jit launcher of a one-wave-a-row forward `kernel` (X, W, B, Y, Mean, Rstd) whose buffer arguments are
    `Arg` (fx.Pointer or fx.Tensor): (Input, Gamma, Beta, Output, Mean, Rstd, m, stream) with store_stats, else
    (Input, Gamma, Beta, Output, m, stream), Gamma standing in for the statistics it does not store."""
    if store_stats:
        @flyc.jit
        def launch(Input: Arg, Gamma: Arg, Beta: Arg, Output: Arg, Mean: Arg, Rstd: Arg, m: fx.Int32,
                   stream: fx.Stream = fx.Stream(None)):
            kernel(Input, Gamma, Beta, Output, Mean, Rstd).launch(grid=(m, 1, 1), block=(WAVE, 1, 1), stream=stream)
        return launch

    @flyc.jit
    def launch_nostats(Input: Arg, Gamma: Arg, Beta: Arg, Output: Arg, m: fx.Int32,
                       stream: fx.Stream = fx.Stream(None)):
        kernel(Input, Gamma, Beta, Output, Gamma, Gamma).launch(grid=(m, 1, 1), block=(WAVE, 1, 1), stream=stream)
    return launch_nostats


def build_forward(n: int, dtype_str: str, store_stats: bool, eps: float, fault: str = ""):
    """Pointer-ABI forward launcher (Input, Gamma, Beta, Output[, Mean, Rstd], m, stream). fault="oob": the
    last lane also writes one element past the end of its row (past y's end on the last row); fault="heavy": a
    planted second variance pass (more VALU and loads, the same values), for the modelled-perf gate."""
    elem = ELEM[dtype_str]
    load, store = _ptr_rows(n, elem)
    inv_n = 1.0 / n

    @flyc.kernel
    def test_ln_fwd(X: fx.Pointer, W: fx.Pointer, B: fx.Pointer, Y: fx.Pointer, Mean: fx.Pointer,
                    Rstd: fx.Pointer):
        row, lane = fx.block_idx.x, fx.thread_idx.x
        acc = fx.Float32(0.0)
        for base in range_constexpr(0, n, WAVE):
            j = lane + base
            if j < n:
                acc = acc + load(X, row, j)
        mean = _wave_sum(acc) * inv_n
        sq = fx.Float32(0.0)
        for base in range_constexpr(0, n, WAVE):
            j = lane + base
            if j < n:
                d = load(X, row, j) - mean
                sq = sq + d * d
        if const_expr(fault == "heavy"):    # planted extra VALU work: the same sum again, scaled by exact powers of 2
            sq2 = fx.Float32(0.0)
            for base in range_constexpr(0, n, WAVE):
                j = lane + base
                if j < n:
                    d2 = (load(X, row, j) - mean) * 2.0
                    sq2 = sq2 + d2 * d2
            sq = (sq + sq2 * 0.25) * 0.5
        rstd = fx.rsqrt(_wave_sum(sq) * inv_n + eps, fastmath=fx.FastMathFlags.fast)
        for base in range_constexpr(0, n, WAVE):
            j = lane + base
            if j < n:
                y = (load(X, row, j) - mean) * rstd * load(W, 0, j) + load(B, 0, j)
                store(Y, row, j, y)
        if const_expr(fault == "oob"):
            if lane == WAVE - 1:
                store(Y, row, n, mean)
        if const_expr(store_stats):
            if lane == 0:
                (Mean + fx.Int64(row)).store(mean)
                (Rstd + fx.Int64(row)).store(rstd)

    return forward_launchers(test_ln_fwd, fx.Pointer, store_stats)


def build_backward(n: int, dtype_str: str):
    """Pointer-ABI backward launcher (Input, Gamma, DY, Mean, Rstd, DX, DGamma, DBias, m, stream) accumulating
    fp32 dγ/dβ with atomics."""
    elem = ELEM[dtype_str]
    load, store = _ptr_rows(n, elem)
    inv_n = 1.0 / n

    @flyc.kernel
    def test_ln_bwd(X: fx.Pointer, W: fx.Pointer, DY: fx.Pointer, Mean: fx.Pointer, Rstd: fx.Pointer,
                    DX: fx.Pointer, DW: fx.Pointer, DB: fx.Pointer):
        row, lane = fx.block_idx.x, fx.thread_idx.x
        mean = (Mean + fx.Int64(row)).load()
        rstd = (Rstd + fx.Int64(row)).load()
        c1 = fx.Float32(0.0)
        c2 = fx.Float32(0.0)
        for base in range_constexpr(0, n, WAVE):
            j = lane + base
            if j < n:
                xhat = (load(X, row, j) - mean) * rstd
                wdy = load(DY, row, j) * load(W, 0, j)
                c1 = c1 + wdy
                c2 = c2 + wdy * xhat
        c1 = _wave_sum(c1) * inv_n
        c2 = _wave_sum(c2) * inv_n
        for base in range_constexpr(0, n, WAVE):
            j = lane + base
            if j < n:
                xhat = (load(X, row, j) - mean) * rstd
                dy = load(DY, row, j)
                store(DX, row, j, (dy * load(W, 0, j) - c1 - xhat * c2) * rstd)
                fx.atomic_add(DW + j, dy * xhat, syncscope=fx.rocdl.SyncScope.Agent)
                fx.atomic_add(DB + j, dy, syncscope=fx.rocdl.SyncScope.Agent)

    @flyc.jit
    def launch_bwd(Input: fx.Pointer, Gamma: fx.Pointer, DY: fx.Pointer, Mean: fx.Pointer, Rstd: fx.Pointer,
                   DX: fx.Pointer, DGamma: fx.Pointer, DBias: fx.Pointer, m: fx.Int32,
                   stream: fx.Stream = fx.Stream(None)):
        test_ln_bwd(Input, Gamma, DY, Mean, Rstd, DX, DGamma, DBias).launch(grid=(m, 1, 1), block=(WAVE, 1, 1),
                                                                           stream=stream)
    return launch_bwd

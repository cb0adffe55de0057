"""Test kernel source: Tensor ABI (fx.Tensor arguments), f32, forward only (no backward builder)."""
import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import const_expr, range_constexpr
from lnbench_test_sources.common import WAVE, forward_launchers


def build_layernorm_module(N, dtype_str, store_stats=False, eps=1e-5):
    if dtype_str != "f32":
        raise ValueError(f"this test source builds f32 only, not {dtype_str}")
    inv_n = 1.0 / N

    @flyc.kernel
    def test_ln_fwd_tensor(X: fx.Tensor, W: fx.Tensor, B: fx.Tensor, Y: fx.Tensor, Mean: fx.Tensor,
                           Rstd: fx.Tensor):
        row, lane = fx.block_idx.x, fx.thread_idx.x
        one = fx.make_layout(1, 1)
        cp = fx.make_copy_atom(fx.rocdl.BufferCopy32b(), fx.Float32)
        xd = fx.logical_divide(fx.rocdl.make_buffer_tensor(fx.slice(X, (row, None))), one)
        yd = fx.logical_divide(fx.rocdl.make_buffer_tensor(fx.slice(Y, (row, None))), one)
        wd = fx.logical_divide(fx.rocdl.make_buffer_tensor(W), one)
        bd = fx.logical_divide(fx.rocdl.make_buffer_tensor(B), one)
        r = fx.make_rmem_tensor(1, fx.Float32)

        def get(view, j):
            fx.copy(cp, fx.slice(view, (None, j)), r)
            return fx.memref_load_vec(r)[0]

        acc = fx.Float32(0.0)
        for base in range_constexpr(0, N, WAVE):
            j = lane + base
            if j < N:
                acc = acc + get(xd, j)
        for i in range_constexpr(6):
            acc = acc + acc.shuffle_xor(WAVE >> (i + 1), WAVE)
        mean = acc * inv_n
        sq = fx.Float32(0.0)
        for base in range_constexpr(0, N, WAVE):
            j = lane + base
            if j < N:
                d = get(xd, j) - mean
                sq = sq + d * d
        for i in range_constexpr(6):
            sq = sq + sq.shuffle_xor(WAVE >> (i + 1), WAVE)
        rstd = fx.rsqrt(sq * inv_n + eps, fastmath=fx.FastMathFlags.fast)
        for base in range_constexpr(0, N, WAVE):
            j = lane + base
            if j < N:
                y = (get(xd, j) - mean) * rstd * get(wd, j) + get(bd, j)
                fx.memref_store_vec(fx.full(1, y, fx.Float32), r)
                fx.copy(cp, r, fx.slice(yd, (None, j)))
        if const_expr(store_stats):
            if lane == 0:
                for t, v in ((Mean, mean), (Rstd, rstd)):
                    fx.memref_store_vec(fx.full(1, v, fx.Float32), r)
                    fx.copy(cp, r, fx.slice(fx.logical_divide(fx.rocdl.make_buffer_tensor(t), one), (None, row)))

    return forward_launchers(test_ln_fwd_tensor, fx.Tensor, store_stats)

"""Wave and block sum reductions shared by the forward and backward kernels.

Every helper here is free of runtime `if`s (module-level code is not AST-rewritten by FlyDSL,
primer pitfall 6): the LDS partial of a wave is written by all its lanes (they hold the same
bits after the butterfly), and the block total is read back by every thread in a fixed order,
so results are identical in every lane and bitwise reproducible.
"""
from __future__ import annotations

import flydsl.expr as fx

WAVE = 64
#: waves per row up to which the block reduction adds the per-wave partials one by one (measured on gfx950: at
#: 2 waves the butterfly cost 6-8 more wave-instructions per row, at 8-16 it saves 80-200 per row)
SEQUENTIAL_MAX_WAVES = 4


def _pow2_ceil(v: int) -> int:
    return 1 << max(0, (v - 1).bit_length())


def wave_sum(v, width: int):
    """xor-butterfly all-reduce over groups of `width` lanes (a power of two <= 64).

    Each step adds the same two operands in every lane of a pair, so all lanes end bit-identical.
    """
    off = width // 2
    while off >= 1:
        v = v + v.shuffle_xor(off, WAVE)
        off //= 2
    return v


def wave_sum2(a, b, width: int):
    """Two independent butterflies interleaved (a (sum, sum) pair in one pass)."""
    off = width // 2
    while off >= 1:
        a = a + a.shuffle_xor(off, WAVE)
        b = b + b.shuffle_xor(off, WAVE)
        off //= 2
    return a, b


def wave_sum_n(vals: list, width: int) -> list:
    """len(vals) independent butterflies interleaved."""
    vals = list(vals)
    off = width // 2
    while off >= 1:
        vals = [v + v.shuffle_xor(off, WAVE) for v in vals]
        off //= 2
    return vals


class RowReducer:
    """Sums over the `lanes` threads that share a row.

    lanes <= 64: a butterfly inside the wave (several rows may share one wave), no LDS.
    lanes  > 64: butterfly per wave, one fp32 per wave and value into LDS, barrier, then the W per-wave
    partials are added in a fixed order (_combine: one by one up to SEQUENTIAL_MAX_WAVES, else a second
    butterfly). `part` is an LDS view with at least
    `slots * values * W` fp32; `slot` picks a region so consecutive reductions need no barrier
    between the read of one and the write of the next.
    """

    def __init__(self, lanes: int, part=None, wave=None):
        self.lanes = lanes
        self.waves = max(1, lanes // WAVE)
        self.part = part
        self.wave = wave
        if self.waves > 1 and (part is None or wave is None):
            raise ValueError("a multi-wave row needs an LDS view and the wave index")

    @staticmethod
    def lds_floats(lanes: int, values: int, slots: int) -> int:
        """fp32 slots of LDS a kernel must allocate (0 when the row fits one wave)."""
        waves = max(1, lanes // WAVE)
        return 0 if waves == 1 else values * slots * waves

    def _combine(self, vals: list, slot: int) -> list:
        """Up to SEQUENTIAL_MAX_WAVES waves, every thread adds the W partials in order. Above, lane i of every
        group of `width` lanes (the next power of two of W) reads wave i's partial (lanes past the W waves read
        0.0) and a butterfly over the group adds them: a fixed order, the same bits in every lane, and two LDS
        reads and log2(W) adds per value where reading all W partials took W - 1 adds."""
        w = self.waves
        base = slot * len(vals) * w
        for k, v in enumerate(vals):
            fx.memref_store(v, self.part, self.wave + (base + k * w))
        fx.gpu.barrier()
        if w <= SEQUENTIAL_MAX_WAVES:                   # W - 1 adds beat the butterfly's selects and steps
            out = []
            for k in range(len(vals)):
                total = fx.memref_load(self.part, base + k * w)
                for i in range(1, w):
                    total = total + fx.memref_load(self.part, base + k * w + i)
                out.append(total)
            return out
        width = _pow2_ceil(w)
        lane = fx.thread_idx.x % width                  # every group of `width` lanes holds all W partials
        mine = lane < w
        at = mine.select(lane, fx.Int32(0))
        out = [mine.select(fx.memref_load(self.part, base + k * w + at), fx.Float32(0.0)) for k in range(len(vals))]
        return wave_sum_n(out, width)

    def sum(self, v, slot: int = 0):
        v = wave_sum(v, min(self.lanes, WAVE))
        if self.waves == 1:
            return v
        return self._combine([v], slot)[0]

    def sum2(self, a, b, slot: int = 0):
        a, b = wave_sum2(a, b, min(self.lanes, WAVE))
        if self.waves == 1:
            return a, b
        return tuple(self._combine([a, b], slot))

    def sum_n(self, vals: list, slot: int = 0) -> list:
        """Any number of sums in one pass (one barrier)."""
        vals = wave_sum_n(vals, min(self.lanes, WAVE))
        if self.waves == 1:
            return vals
        return self._combine(vals, slot)

    def fence(self) -> None:
        """Barrier before an LDS slot is reused (e.g. the next row of a persistent loop)."""
        if self.waves > 1:
            fx.gpu.barrier()

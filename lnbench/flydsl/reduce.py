"""Wave and block sum reductions shared by the forward and backward kernels.

Every helper here is free of runtime `if`s (module-level code is not AST-rewritten by FlyDSL,
primer pitfall 6): the LDS partial of a wave is written by all its lanes (they hold the same
bits after the butterfly), and the block total is read back by every thread in a fixed order,
so results are identical in every lane and bitwise reproducible.
"""
from __future__ import annotations

import flydsl.expr as fx

from lnbench.flydsl import rowio

WAVE = 64
#: gfx950: lanes a multi-wave row's in-wave butterfly covers before the LDS step. Its xor offsets up to 8 are
#: ds_swizzle (no VALU), while 16 and 32 are a v_permlane*_swap with 4 VALU of moves and selects around it per
#: value and step; each group of GROUP lanes writes its own partial instead (4 per wave), and the LDS step adds
#: them. gfx942 lowers xor 16 to ds_swizzle and xor 32 to ds_bpermute (no VALU around either): a whole wave.
GROUP = 16


def group_lanes() -> int:
    """Lanes of a multi-wave row's in-wave butterfly on the arch being compiled for (see GROUP)."""
    return GROUP if rowio._target_arch().startswith("gfx95") else WAVE


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
    lanes  > 64: butterfly over each group of group_lanes() lanes, one fp32 per group and value into LDS,
    barrier, then the G group partials (W·64/group_lanes()) are added in a fixed order (_combine). `part` is an
    LDS view with at least lds_floats(lanes, values, slots) fp32; `slot` picks a region so consecutive reductions
    need no barrier between the read of one and the write of the next.
    """

    def __init__(self, lanes: int, part=None, wave=None):
        self.lanes = lanes
        self.waves = max(1, lanes // WAVE)
        self.group = group_lanes()
        self.groups = self.waves * (WAVE // self.group)
        self.part = part
        self.wave = wave
        if self.waves > 1 and (part is None or wave is None):
            raise ValueError("a multi-wave row needs an LDS view and the wave index")

    @staticmethod
    def _layout(groups: int, values: int) -> tuple[int, int, int]:
        """(width, per, stride) of the LDS step: `width` lanes (the G partials' next power of two, at most GROUP)
        each add `per` partials; partial g sits in column g // width (one LDS read of every lane: consecutive
        dwords, no bank conflict), and consecutive columns start `stride` dwords apart, 16 banks on (mod 32), so
        a lane's two reads that the compiler pairs into one ds_read2 fall in different banks too."""
        width = min(GROUP, _pow2_ceil(groups))
        column = width * values
        return width, -(-groups // width), column + (16 - column) % 32

    @staticmethod
    def lds_floats(lanes: int, values: int, slots: int) -> int:
        """fp32 slots of LDS a kernel must allocate (0 when the row fits one wave); enough for either arch's
        group_lanes (the most partials: GROUP lanes each)."""
        waves = max(1, lanes // WAVE)
        if waves == 1:
            return 0
        _, per, stride = RowReducer._layout(waves * (WAVE // GROUP), values)
        return slots * per * stride

    def _width(self) -> int:
        """Lanes of the in-wave butterfly: the whole row up to a wave, else a group."""
        return min(self.lanes, WAVE) if self.waves == 1 else self.group

    def _combine(self, vals: list, slot: int) -> list:
        """Group g of the row writes its partials to LDS (_layout; its values side by side, read as one vector).
        Lane i of every group of `width` lanes adds partials i, i + width, ... in that order (those past G read
        as 0.0), and a butterfly over the group adds the lanes: a fixed order, the same bits in every lane."""
        g, nv = self.groups, len(vals)
        width, per, stride = self._layout(g, nv)
        base = slot * per * stride
        mine = self.wave * (WAVE // self.group) + (fx.thread_idx.x % WAVE) // self.group
        mine_at = (mine // width) * stride + (mine % width) * nv
        for k, v in enumerate(vals):
            fx.memref_store(v, self.part, mine_at + (base + k))
        fx.gpu.barrier()
        lane = fx.thread_idx.x % width
        out = []
        for k in range(nv):
            total = None
            for j in range(per):
                at = base + k + j * stride + lane * nv
                if (j + 1) * width <= g:
                    part = fx.memref_load(self.part, at)
                else:
                    # the last column is partial: lanes past G add 0.0, reading a written slot no live lane's
                    # read conflicts with: their own in column 0 (full when j > 0), else that of lane - G (the
                    # same dword as a live lane: a broadcast)
                    inside = lane + j * width < g
                    spare = base + k + (lane if j else lane - g) * nv
                    part = inside.select(fx.memref_load(self.part, inside.select(at, spare)), fx.Float32(0.0))
                total = part if total is None else total + part
            out.append(total)
        return wave_sum_n(out, width)

    def sum(self, v, slot: int = 0):
        v = wave_sum(v, self._width())
        if self.waves == 1:
            return v
        return self._combine([v], slot)[0]

    def sum2(self, a, b, slot: int = 0):
        a, b = wave_sum2(a, b, self._width())
        if self.waves == 1:
            return a, b
        return tuple(self._combine([a, b], slot))

    def sum_n(self, vals: list, slot: int = 0) -> list:
        """Any number of sums in one pass (one barrier)."""
        vals = wave_sum_n(vals, self._width())
        if self.waves == 1:
            return vals
        return self._combine(vals, slot)

    def fence(self) -> None:
        """Barrier before an LDS slot is reused (e.g. the next row of a persistent loop)."""
        if self.waves > 1:
            fx.gpu.barrier()

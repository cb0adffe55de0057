"""Cross-lane operations: reading one lane into an SGPR, lane counting, swizzles and permutes."""
from __future__ import annotations

import numpy as np

from lnbench.emu.errors import EmulatorFault
from lnbench.emu.ops_vector import out, src, src_codes
from lnbench.emu.registry import op
from lnbench.emu.state import WAVE, Step

U32, U64 = np.uint32, np.uint64
LANE = np.arange(WAVE)


def _sdst(st: Step) -> int:
    """The SGPR a lane read writes: its 8-bit VDST field holds an SGPR number (decoded as a VGPR)."""
    code = st.ins.f["vdst"]
    return code - 256 if code >= 256 else code


@op("v_readfirstlane_b32", cls="cross_lane")
def v_readfirstlane_b32(st: Step) -> None:
    """The lowest active lane (lane 0 when EXEC is 0) into an SGPR."""
    lane = st.exec_mask.argmax(axis=1)              # the first True; 0 when a row has none
    vals = src(st, 0)
    st.set_s(_sdst(st), vals[np.arange(st.k), lane] if vals.shape[1] == WAVE else vals[:, 0])


@op("v_readlane_b32", cls="cross_lane")
def v_readlane_b32(st: Step) -> None:
    lane = (st.sval(src_codes(st)[1]) & U32(63)).astype(np.int64)
    vals = np.broadcast_to(src(st, 0), (st.k, WAVE))[np.arange(st.k), lane]
    st.set_s(_sdst(st), vals.astype(U32))


@op("v_mbcnt_lo_u32_b32", "v_mbcnt_hi_u32_b32", cls="valu")
def v_mbcnt(st: Step) -> None:
    """Count the set bits of S0 below this lane (lanes 0-31 of the mask for lo, 32-63 for hi), plus S1."""
    mask = np.broadcast_to(src(st, 0), (st.k, WAVE)).astype(U64)
    hi = st.ins.name == "v_mbcnt_hi_u32_b32"
    below = np.clip(LANE - (32 if hi else 0), 0, 32).astype(U64)      # how many of the 32 bits count
    keep = np.where(below >= 32, U64(0xFFFFFFFF), (U64(1) << below) - U64(1))
    bits = np.unpackbits((mask & keep).astype(U32).view(np.uint8).reshape(st.k, WAVE, 4), axis=2).sum(axis=2)
    out(st, (bits.astype(U64) + np.broadcast_to(src(st, 1), (st.k, WAVE)).astype(U64)).astype(U32))


def swizzle_source_lanes(offset: int) -> np.ndarray:
    """ds_swizzle_b32: for each lane, the lane it reads (bit-mask mode or quad-permute mode)."""
    if offset & 0x8000:
        quad = LANE & ~3
        return quad + ((offset >> (2 * (LANE & 3))) & 3)
    and_mask, or_mask, xor_mask = offset & 0x1F, (offset >> 5) & 0x1F, (offset >> 10) & 0x1F
    group = LANE & ~31
    return group + ((((LANE & 31) & and_mask) | or_mask) ^ xor_mask)


def _gather_active(st: Step, values: np.ndarray, source: np.ndarray) -> np.ndarray:
    """values of lane source[lane] (source: (k, 64), or (64,) for every wave alike); 0 where that source lane is
    inactive."""
    if source.ndim == 1:                       # one pattern: gather columns
        picked = values[:, source]
        return picked if st.all_active else np.where(st.exec_mask[:, source], picked, U32(0))
    rows = np.arange(st.k)[:, None]
    picked = values[rows, source]
    if st.all_active:
        return picked
    return np.where(st.exec_mask[rows, source], picked, U32(0))


@op("ds_swizzle_b32", cls="cross_lane")
def ds_swizzle_b32(st: Step) -> None:
    """Reads its data from the ADDR field (the decoder's `addr`), as the hardware does."""
    offset = st.ins.f["offset0"] | (st.ins.f["offset1"] << 8)
    values = np.broadcast_to(st.vval(st.ins.f["addr"]), (st.k, WAVE))
    out(st, _gather_active(st, values, swizzle_source_lanes(offset)))


@op("ds_bpermute_b32", cls="cross_lane")
def ds_bpermute_b32(st: Step) -> None:
    """dst[lane] = data0[(addr[lane] + offset) / 4 % 64], 0 from inactive source lanes."""
    offset = st.ins.f["offset0"] | (st.ins.f["offset1"] << 8)
    addr = np.broadcast_to(st.vval(st.ins.f["addr"]), (st.k, WAVE)).astype(np.int64)
    source = ((addr + offset) // 4) % WAVE
    values = np.broadcast_to(st.vval(st.ins.f["data0"]), (st.k, WAVE))
    out(st, _gather_active(st, values, source))


@op("v_permlane16_swap_b32", "v_permlane32_swap_b32", cls="cross_lane")
def v_permlane_swap(st: Step) -> None:
    """gfx950: swap the upper 16 (32) lanes of each 32 (64) lane group of VDST with the lower ones of SRC0."""
    if st.ins.fmt.startswith("VOP3") and (st.ins.f.get("clmp", 0) or st.ins.f.get("opsel", 0)):
        raise EmulatorFault(f"{st.ins.name} with fi/bound_ctrl modifiers is not supported")
    width = 16 if "16" in st.ins.name else 32
    vd, s0 = st.ins.f["vdst"], src_codes(st)[0]
    if s0 < 256:
        raise EmulatorFault(f"{st.ins.name} needs a VGPR source")
    d = st.vval(vd).copy()
    s = st.vval(s0).copy()
    lo = (LANE % (2 * width)) < width                 # lanes whose SRC0 value moves up
    hi_lanes = np.flatnonzero(~lo)
    lo_lanes = hi_lanes - width
    new_s, new_d = s.copy(), d.copy()
    new_s[:, lo_lanes] = d[:, hi_lanes]
    new_d[:, hi_lanes] = s[:, lo_lanes]
    if vd == s0:            # one register: the swap exchanges its halves (two writes would lose one)
        st.set_v(vd, np.where(lo, new_s, new_d))
        return
    st.set_v(s0, new_s)
    st.set_v(vd, new_d)

"""Scalar ALU: SOP1, SOP2, SOPK, SOPC. Values are (waves,) uint32 arrays; SCC per wave."""
from __future__ import annotations

import numpy as np

from lnbench.emu.registry import op
from lnbench.emu.state import EXEC, Step

U32, U64, I64 = np.uint32, np.uint64, np.int64
M32 = 0xFFFFFFFF


def _i32(x: np.ndarray) -> np.ndarray:
    return x.astype(U32).view(np.int32).astype(I64)


def _srcs(st: Step) -> tuple[np.ndarray, np.ndarray]:
    f = st.ins.f
    return st.sval(f["ssrc0"]).astype(U64), st.sval(f["ssrc1"]).astype(U64)


def _srcs64(st: Step) -> tuple[np.ndarray, np.ndarray]:
    f = st.ins.f
    return st.sval64(f["ssrc0"]), st.sval64(f["ssrc1"])


def _out(st: Step, value: np.ndarray, scc: np.ndarray | None = None) -> None:
    st.set_s(st.ins.f["sdst"], (np.asarray(value).astype(U64) & U64(M32)).astype(U32))
    if scc is not None:
        st.w.SCC[st.sel] = scc


def _out64(st: Step, value: np.ndarray, scc: np.ndarray | None = None) -> None:
    st.set_s64(st.ins.f["sdst"], value)
    if scc is not None:
        st.w.SCC[st.sel] = scc


# ---------------------------------------------------------------- SOP2, 32-bit
@op("s_add_u32", cls="salu")
def s_add_u32(st: Step) -> None:
    a, b = _srcs(st)
    r = a + b
    _out(st, r, r > M32)


@op("s_addc_u32", cls="salu")
def s_addc_u32(st: Step) -> None:
    a, b = _srcs(st)
    r = a + b + st.w.SCC[st.sel].astype(U64)
    _out(st, r, r > M32)


@op("s_sub_u32", cls="salu")
def s_sub_u32(st: Step) -> None:
    a, b = _srcs(st)
    _out(st, (a - b) & U64(M32), b > a)


@op("s_subb_u32", cls="salu")
def s_subb_u32(st: Step) -> None:
    a, b = _srcs(st)
    c = st.w.SCC[st.sel].astype(U64)
    _out(st, (a - b - c) & U64(M32), b + c > a)


@op("s_add_i32", "s_sub_i32", cls="salu")
def s_add_sub_i32(st: Step) -> None:
    a, b = (_i32(v) for v in _srcs(st))
    r = a + b if st.ins.name == "s_add_i32" else a - b
    _out(st, r.astype(U64), (r > 0x7FFFFFFF) | (r < -0x80000000))


@op("s_mul_i32", cls="salu")
def s_mul_i32(st: Step) -> None:
    a, b = _srcs(st)
    _out(st, (a * b) & U64(M32))


@op("s_mul_hi_u32", cls="salu")
def s_mul_hi_u32(st: Step) -> None:
    a, b = _srcs(st)
    _out(st, (a * b) >> U64(32))


@op("s_mul_hi_i32", cls="salu")
def s_mul_hi_i32(st: Step) -> None:
    a, b = (_i32(v) for v in _srcs(st))
    _out(st, ((a * b) >> 32).astype(U64))


@op("s_and_b32", "s_or_b32", "s_xor_b32", "s_andn2_b32", "s_orn2_b32", cls="salu")
def s_bitwise_b32(st: Step) -> None:
    a, b = _srcs(st)
    r = _BITWISE[st.ins.name[:-4]](a, b) & U64(M32)
    _out(st, r, r != 0)


@op("s_lshl_b32", "s_lshr_b32", "s_ashr_i32", cls="salu")
def s_shift_b32(st: Step) -> None:
    a, b = _srcs(st)
    sh = b & U64(31)
    name = st.ins.name
    if name == "s_lshl_b32":
        r = (a << sh) & U64(M32)
    elif name == "s_lshr_b32":
        r = a >> sh
    else:
        r = (_i32(a) >> sh.astype(I64)).astype(U64) & U64(M32)
    _out(st, r, r != 0)


@op("s_bfe_u32", cls="salu")
def s_bfe_u32(st: Step) -> None:
    a, b = _srcs(st)
    off, width = b & U64(31), (b >> U64(16)) & U64(0x7F)
    r = (a >> off) & ((U64(1) << width) - U64(1))
    _out(st, r, r != 0)


@op("s_cselect_b32", cls="salu")
def s_cselect_b32(st: Step) -> None:
    a, b = _srcs(st)
    _out(st, np.where(st.w.SCC[st.sel], a, b))


@op("s_pack_ll_b32_b16", "s_pack_lh_b32_b16", "s_pack_hh_b32_b16", cls="salu")
def s_pack_b32_b16(st: Step) -> None:
    a, b = _srcs(st)
    kind = st.ins.name[7:9]
    lo = (a >> U64(16)) if kind[0] == "h" else (a & U64(0xFFFF))
    hi = (b >> U64(16)) if kind[1] == "h" else (b & U64(0xFFFF))
    _out(st, lo | (hi << U64(16)))


# ---------------------------------------------------------------- SOP2, 64-bit
_BITWISE = {
    "s_and": lambda a, b: a & b, "s_or": lambda a, b: a | b, "s_xor": lambda a, b: a ^ b,
    "s_andn2": lambda a, b: a & ~b, "s_orn2": lambda a, b: a | ~b,
}


@op("s_and_b64", "s_or_b64", "s_xor_b64", "s_andn2_b64", "s_orn2_b64", cls="salu")
def s_bitwise_b64(st: Step) -> None:
    a, b = _srcs64(st)
    r = _BITWISE[st.ins.name[:-4]](a, b)
    _out64(st, r, r != 0)


@op("s_lshl_b64", "s_lshr_b64", cls="salu")
def s_shift_b64(st: Step) -> None:
    a = st.sval64(st.ins.f["ssrc0"])
    sh = st.sval(st.ins.f["ssrc1"]).astype(U64) & U64(63)
    r = a << sh if st.ins.name == "s_lshl_b64" else a >> sh
    _out64(st, r, r != 0)


@op("s_cselect_b64", cls="salu")
def s_cselect_b64(st: Step) -> None:
    a, b = _srcs64(st)
    _out64(st, np.where(st.w.SCC[st.sel], a, b))


# ---------------------------------------------------------------- SOP1
@op("s_mov_b32", cls="salu")
def s_mov_b32(st: Step) -> None:
    st.set_s(st.ins.f["sdst"], st.sval(st.ins.f["ssrc0"]))


@op("s_mov_b64", cls="salu")
def s_mov_b64(st: Step) -> None:
    st.set_s64(st.ins.f["sdst"], st.sval64(st.ins.f["ssrc0"]))


@op("s_brev_b32", cls="salu")
def s_brev_b32(st: Step) -> None:
    a = st.sval(st.ins.f["ssrc0"]).astype(U32)
    bits = np.unpackbits(a.view(np.uint8).reshape(-1, 4), axis=1, bitorder="little")
    st.set_s(st.ins.f["sdst"], np.packbits(bits[:, ::-1], axis=1, bitorder="little").view("<u4")[:, 0])


@op("s_ff1_i32_b64", cls="salu")
def s_ff1_i32_b64(st: Step) -> None:
    a = st.sval64(st.ins.f["ssrc0"])
    low = a & (~a + U64(1))                       # lowest set bit
    idx = np.where(a == 0, -1, np.log2(np.maximum(low, U64(1)).astype(np.float64)).astype(I64))
    st.set_s(st.ins.f["sdst"], idx.astype(np.int64).astype(U64).astype(U32))


@op("s_lshl1_add_u32", "s_lshl2_add_u32", "s_lshl3_add_u32", "s_lshl4_add_u32", cls="salu")
def s_lshl_add_u32(st: Step) -> None:
    """D = (S0 << N) + S1 (32 bits); SCC = the unsigned overflow of the shift-and-add."""
    a, b = _srcs(st)
    r = (a << U64(int(st.ins.name[6]))) + b
    _out(st, r, r > M32)


@op("s_bcnt1_i32_b32", "s_bcnt1_i32_b64", cls="salu")
def s_bcnt1(st: Step) -> None:
    """The number of set bits of S0; SCC = result != 0."""
    a = st.sval64(st.ins.f["ssrc0"]) if st.ins.name.endswith("b64") else st.sval(st.ins.f["ssrc0"]).astype(U64)
    count = np.unpackbits(np.ascontiguousarray(a.astype(U64)).view(np.uint8).reshape(-1, 8), axis=1).sum(axis=1)
    _out(st, count.astype(U64), count != 0)


@op("s_and_saveexec_b64", "s_or_saveexec_b64", "s_xor_saveexec_b64", "s_andn2_saveexec_b64", cls="salu")
def s_saveexec_b64(st: Step) -> None:
    src = st.sval64(st.ins.f["ssrc0"])
    old = st.exec64
    new = _BITWISE[st.ins.name.split("_saveexec")[0]](src, old)
    st.set_s64(st.ins.f["sdst"], old)
    st.set_s64(EXEC, new)
    st.w.SCC[st.sel] = new != 0


# ---------------------------------------------------------------- SOPK
def _simm16(st: Step) -> int:
    v = st.ins.f["simm16"]
    return v - 0x10000 if v & 0x8000 else v


@op("s_movk_i32", cls="salu")
def s_movk_i32(st: Step) -> None:
    st.set_s(st.ins.f["sdst"], np.full(st.k, _simm16(st) & M32, U32))


@op("s_mulk_i32", cls="salu")
def s_mulk_i32(st: Step) -> None:
    d = st.ins.f["sdst"]
    a = _i32(st.sval(d))
    st.set_s(d, ((a * _simm16(st)) & M32).astype(U64).astype(U32))


@op("s_addk_i32", cls="salu")
def s_addk_i32(st: Step) -> None:
    d = st.ins.f["sdst"]
    r = _i32(st.sval(d)) + _simm16(st)
    st.set_s(d, (r & M32).astype(U64).astype(U32))
    st.w.SCC[st.sel] = (r > 0x7FFFFFFF) | (r < -0x80000000)


@op(*[f"s_cmpk_{c}_{t}" for c in ("eq", "lg", "gt", "ge", "lt", "le") for t in ("i32", "u32")], cls="salu")
def s_cmpk(st: Step) -> None:
    """Compare SDST with SIMM16: sign-extended for i32, zero-extended for u32."""
    cond, typ = st.ins.name.split("_")[2:4]
    a = st.sval(st.ins.f["sdst"])
    b: int | np.unsignedinteger
    if typ == "i32":
        a, b = _i32(a), _simm16(st)
    else:
        a, b = a.astype(U64), U64(st.ins.f["simm16"] & 0xFFFF)
    st.w.SCC[st.sel] = _CMP[cond](a, b)


# ---------------------------------------------------------------- SOPC
_CMP = {"eq": np.equal, "lg": np.not_equal, "gt": np.greater, "ge": np.greater_equal,
        "lt": np.less, "le": np.less_equal}


@op(*[f"s_cmp_{c}_{t}" for c in _CMP for t in ("i32", "u32")], cls="salu")
def s_cmp(st: Step) -> None:
    cond, typ = st.ins.name.split("_")[2:4]
    a, b = _srcs(st)
    if typ == "i32":
        a, b = _i32(a), _i32(b)
    st.w.SCC[st.sel] = _CMP[cond](a, b)

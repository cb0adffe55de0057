"""Vector ALU: VOP1, VOP2, VOP3, VOP3P, VOP3SD, VOPC and SDWA forms, over (waves, 64) uint32 lanes.

Floats are computed with numpy's IEEE float32/float16 (round to nearest even, denormals kept: the
kernels' float mode is 0xF0). Fused multiply-adds are exact (see fma_f32). v_rsq_f32 is correctly
rounded here; hardware is within ~1 ulp of it.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from lnbench.emu import native
from lnbench.emu.decode import AGPR, Instr
from lnbench.emu.errors import EmulatorFault
from lnbench.emu.registry import DPP_CTRL, FLOAT_MODS, SDWA_INT, VALU_FORMS, op
from lnbench.emu.state import VCC, EXEC, WAVE, Step, lanes_to_mask, mask_to_lanes

U32, U64, I64, F32 = np.uint32, np.uint64, np.int64, np.float32
M32 = 0xFFFFFFFF
SDWA_MARK, DPP_MARK = 249, 250
#: what the common operand helpers below honour, per kind of handler
FLOAT_ALL = FLOAT_MODS | SDWA_INT | DPP_CTRL       # fsrc/fout: float modifiers, SDWA selects, DPP controls
INT_ALL = SDWA_INT | DPP_CTRL                      # src/out: SDWA selects and DPP; no float modifiers
LANE = np.arange(WAVE)


def _is_sdwa(st: Step) -> bool:
    return "_SDWA" in st.ins.fmt


def _is_dpp(st: Step) -> bool:
    return st.ins.fmt.endswith("_DPP16")


# ---------------------------------------------------------------- operands
def src_codes(st: Step) -> list[int]:
    """The instruction's source operand codes in order, whatever its encoding."""
    return instr_src_codes(st.ins)


def instr_src_codes(ins: Instr) -> list[int]:
    """src_codes of a decoded instruction."""
    f = ins.f
    marked = f.get("src0") in (SDWA_MARK, DPP_MARK) and "vsrc0" in f
    if "vsrc1" in f:                               # VOP2 / VOPC
        return [f["vsrc0"] if marked else f["src0"], f["vsrc1"]]
    if marked:                                     # VOP1 SDWA / DPP
        return [f["vsrc0"]]
    return [f[k] for k in ("src0", "src1", "src2") if k in f]


def _sdwa_select(st: Step, i: int, raw: np.ndarray) -> np.ndarray:
    f = st.ins.f
    sel, sext = f.get(f"src{i}_sel", 6), f.get(f"src{i}_sext", 0)
    if sel == 6:
        return raw
    shift, bits = (8 * sel, 8) if sel < 4 else (16 * (sel - 4), 16)
    v = (raw >> U32(shift)) & U32((1 << bits) - 1)
    if sext:
        v = np.where(v >> U32(bits - 1), v | U32(M32 ^ ((1 << bits) - 1)), v)
    return v


def src(st: Step, i: int, kind: str = "b32") -> np.ndarray:
    """Source i as uint32 lanes ((k, 64) or (k, 1)), SDWA selection or the DPP lane pattern applied."""
    code = src_codes(st)[i]
    if _is_sdwa(st):
        if st.ins.f.get(f"s{i}", 0):               # SDWA S0/S1: the 8-bit field names an SGPR
            code = code - 256 if code >= 256 else code
        elif code < 256:
            code += 256                            # otherwise a VGPR
        return _sdwa_select(st, i, st.vval(code, kind))
    if _is_dpp(st) and i == 0:
        lanes, valid = dpp_lanes(st)
        raw = np.broadcast_to(st.vval(code, kind), (st.k, WAVE))
        return np.where(valid, raw[:, lanes], U32(0))
    return st.vval(code, kind)


def _dpp_pattern(ctrl: int) -> tuple[np.ndarray, np.ndarray]:
    """DPP_CTRL -> (source lane of each lane, whether that source exists)."""
    row, r = LANE & ~15, LANE & 15
    n = ctrl & 0xF
    every = np.ones(WAVE, bool)
    if ctrl <= 0xFF:                                               # quad_perm
        return (LANE & ~3) + ((ctrl >> (2 * (LANE & 3))) & 3), every
    if 0x101 <= ctrl <= 0x10F:                                     # row_shl:n
        return np.minimum(LANE + n, WAVE - 1), r + n < 16
    if 0x111 <= ctrl <= 0x11F:                                     # row_shr:n
        return np.maximum(LANE - n, 0), r >= n
    if 0x121 <= ctrl <= 0x12F:                                     # row_ror:n
        return row + ((r - n) & 15), every
    table = {
        0x130: (np.minimum(LANE + 1, WAVE - 1), LANE < WAVE - 1),  # wave_shl:1
        0x134: ((LANE + 1) % WAVE, every),                         # wave_rol:1
        0x138: (np.maximum(LANE - 1, 0), LANE > 0),                # wave_shr:1
        0x13C: ((LANE - 1) % WAVE, every),                         # wave_ror:1
        0x140: (row + 15 - r, every),                              # row_mirror
        0x141: ((LANE & ~7) + 7 - (LANE & 7), every),              # row_half_mirror
        0x142: (np.maximum(row - 1, 0), row > 0),                  # row_bcast:15
        0x143: (np.full(WAVE, 31), LANE >= 32),                    # row_bcast:31
    }
    if ctrl not in table:
        raise EmulatorFault(f"DPP control 0x{ctrl:03x} is reserved")
    return table[ctrl]


def dpp_lanes(st: Step) -> tuple[np.ndarray, np.ndarray]:
    """(source lane per lane (64,), (k, 64) valid): a source out of range or in an inactive lane is invalid."""
    lanes, exists = _dpp_pattern(st.ins.f["dpp"])
    return lanes, exists[None, :] & st.exec_mask[:, lanes]


def dpp_write_mask(st: Step) -> np.ndarray:
    """(k, 64) lanes a DPP instruction writes: active, in an enabled row and bank, and with a valid source
    unless BOUND_CTRL is set (then an invalid source reads 0 and the lane is written)."""
    f = st.ins.f
    _, valid = dpp_lanes(st)
    rows_on = ((f["row_mask"] >> (LANE >> 4)) & 1).astype(bool)
    banks_on = ((f["bank_mask"] >> ((LANE >> 2) & 3)) & 1).astype(bool)
    m = st.exec_mask & (rows_on & banks_on)[None, :]
    return m if f.get("bc", 0) else m & valid


def fsrc(st: Step, i: int) -> np.ndarray:
    """Source i as float32 with the VOP3/SDWA abs and neg modifiers applied."""
    bits = src(st, i, "f32").astype(U32, copy=False)
    f = st.ins.f
    if _is_sdwa(st) or _is_dpp(st):
        ab, ng = f.get(f"src{i}_abs", 0), f.get(f"src{i}_neg", 0)
    else:
        ab, ng = (f.get("abs", 0) >> i) & 1, (f.get("neg", 0) >> i) & 1
    if ab:
        bits = bits & U32(0x7FFFFFFF)
    if ng:
        bits = bits ^ U32(0x80000000)
    return bits.view(F32) if bits.dtype == U32 else bits.astype(U32).view(F32)


def dst(st: Step) -> int:
    return st.ins.f["vdst"]


def fout(st: Step, value: np.ndarray) -> None:
    """Write a float32 result with the VOP3 output modifier and clamp."""
    value = np.asarray(value, F32)
    omod = st.ins.f.get("omod", 0)
    if omod:
        value = (value * F32({1: 2.0, 2: 4.0, 3: 0.5}[omod])).astype(F32)
    if st.ins.f.get("clmp", 0):
        value = np.where(np.isnan(value), F32(0), np.clip(value, F32(0), F32(1))).astype(F32)
    out(st, value.view(U32))


def out(st: Step, bits: np.ndarray) -> None:
    """Write a 32-bit result (SDWA dst_sel/dst_unused and the DPP write mask honoured)."""
    bits = np.asarray(bits).astype(U32, copy=False)
    f = st.ins.f
    if _is_sdwa(st) and f.get("dst_sel", 6) != 6:
        sel, unused = f["dst_sel"], f.get("dst_unused", 0)
        shift, width = (8 * sel, 8) if sel < 4 else (16 * (sel - 4), 16)
        field = U32(((1 << width) - 1) << shift)
        placed = (bits << U32(shift)) & field
        if unused == 2:                            # UNUSED_PRESERVE
            old = st.vval(dst(st))
            bits = (old & ~field) | placed
        elif unused == 1:                          # UNUSED_SEXT: the field's sign bit fills the bits above it
            above = U32((M32 << (shift + width)) & M32)
            neg = (placed >> U32(shift + width - 1)) & U32(1)
            bits = np.where(neg.astype(bool), placed | above, placed)
        elif unused == 0:                          # UNUSED_PAD
            bits = placed
        else:
            raise EmulatorFault(f"SDWA dst_unused={unused} is reserved")
    st.set_v(dst(st), bits, dpp_write_mask(st) if _is_dpp(st) else None)


def fma_f32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Exactly rounded a*b+c in float32 (one rounding, as hardware FMA).

    a*b is exact in float64; s = p + c is rounded, and the two-sum error t (s + t == p + c exactly)
    says on which side of s the exact sum lies. Rounding to odd in float64 (an inexact s with an even
    last bit moves one float64 ulp toward t) and then to float32 is exactly the single rounding,
    since 53 >= 2*24 + 2. (Nudging every inexact s instead is wrong when s sits one float64 ulp from
    a float32 halfway point: the nudge lands on the tie and ties-to-even may pick the wrong side.)
    The native helper runs the same steps in C; arrays with a NaN result come back here (NaN payloads).
    """
    fast = native.fma_f32(a, b, c)
    if fast is not None:
        return fast
    return _fma_round_odd(a, b, c).astype(F32)


def _fma_round_odd(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """a*b+c rounded to odd in float64 (see fma_f32): rounding it once more to any narrower precision is
    the single rounding of the exact value, also after scaling by a power of two."""
    p = a.astype(np.float64) * b.astype(np.float64)
    c64 = np.asarray(c, np.float64)
    s = np.asarray(p + c64, np.float64)
    bb = s - p
    t = (p - (s - bb)) + (c64 - bb)
    # the nudge, on the bit pattern: an inexact finite s (|t| > 0; t is NaN when s is not finite, and s == 0 only
    # when exact) with an even last bit moves one ulp toward t: +1 when t and s have one sign, -1 when not (an even
    # finite s is never the largest finite value, so +1 never reaches inf; 0 is never nudged)
    bits = s.view(np.int64)
    nudge = (np.abs(t) > 0) & ((bits & 1) == 0)
    toward_zero = (np.asarray(t).view(np.int64) ^ bits) < 0
    return (bits + np.where(nudge, 1 - 2 * toward_zero, 0)).view(np.float64)


# ---------------------------------------------------------------- float arithmetic
#: an elementwise operation on two (waves, 64) operands
_Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]

FLOAT_BINARY: dict[str, _Binary] = {
    "v_add_f32": lambda a, b: a + b, "v_sub_f32": lambda a, b: a - b, "v_subrev_f32": lambda a, b: b - a,
    "v_mul_f32": lambda a, b: a * b, "v_max_f32": np.fmax, "v_min_f32": np.fmin,
}


@op(*FLOAT_BINARY, cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL)
def v_float_binary(st: Step) -> None:
    fout(st, FLOAT_BINARY[st.ins.name](fsrc(st, 0), fsrc(st, 1)))


@op("v_fma_f32", "v_fmac_f32", cls="valu", forms=("native", "vop3", "dpp"), honours=FLOAT_MODS | DPP_CTRL)
def v_fma_f32(st: Step) -> None:
    c = fsrc(st, 2) if st.ins.name == "v_fma_f32" else st.vval(dst(st)).view(F32)
    fout(st, fma_f32(fsrc(st, 0), fsrc(st, 1), c))


@op("v_rsq_f32", cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL,
    approx="correctly rounded here; the hardware result is within about 1 ulp of it")
def v_rsq_f32(st: Step) -> None:
    x = fsrc(st, 0).astype(np.float64)
    fout(st, (1.0 / np.sqrt(x)).astype(F32))


@op("v_rcp_f32", cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL,
    approx="correctly rounded here; the hardware result is within about 1 ulp of it")
def v_rcp_f32(st: Step) -> None:
    fout(st, (1.0 / fsrc(st, 0).astype(np.float64)).astype(F32))


@op("v_sqrt_f32", cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL,
    approx="correctly rounded here; the hardware result is within about 1 ulp of it")
def v_sqrt_f32(st: Step) -> None:
    fout(st, np.sqrt(fsrc(st, 0).astype(np.float64)).astype(F32))


# ---------------------------------------------------------------- conversions
def f32_to_bf16(x: np.ndarray) -> np.ndarray:
    """Round to nearest even; NaN stays a (quiet) NaN."""
    bits = x.astype(F32).view(U32).astype(U64)
    rounded = (bits + U64(0x7FFF) + ((bits >> U64(16)) & U64(1))) >> U64(16)
    nan = np.isnan(x)
    return np.where(nan, (bits >> U64(16)) | U64(0x40), rounded).astype(U32) & U32(0xFFFF)


def f32_to_f16_bits(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).view(np.uint16).astype(U32)


def f16_bits_to_f32(bits: np.ndarray) -> np.ndarray:
    return (np.asarray(bits).astype(U32) & U32(0xFFFF)).astype(np.uint16).view(np.float16).astype(F32)


@op("v_cvt_f16_f32", cls="valu", forms=VALU_FORMS, honours=(FLOAT_ALL - {"omod", "clmp"}))
def v_cvt_f16_f32(st: Step) -> None:
    out(st, f32_to_f16_bits(fsrc(st, 0)))


@op("v_cvt_f32_f16", cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL - {"src1_neg", "src1_abs"})
def v_cvt_f32_f16(st: Step) -> None:
    h = f16_bits_to_f32(src(st, 0, "f16"))
    f = st.ins.f
    if (f.get("abs", 0) & 1) or f.get("src0_abs", 0):
        h = np.abs(h)
    if (f.get("neg", 0) & 1) or f.get("src0_neg", 0):
        h = -h
    fout(st, h)


@op("v_cvt_pk_bf16_f32", cls="valu", honours={"neg", "abs"})
def v_cvt_pk_bf16_f32(st: Step) -> None:
    out(st, f32_to_bf16(fsrc(st, 0)) | (f32_to_bf16(fsrc(st, 1)) << U32(16)))


@op("v_cvt_pk_f16_f32", cls="valu", honours={"neg", "abs"})
def v_cvt_pk_f16_f32(st: Step) -> None:
    out(st, f32_to_f16_bits(fsrc(st, 0)) | (f32_to_f16_bits(fsrc(st, 1)) << U32(16)))


@op("v_pack_b32_f16", cls="valu", honours={"opsel", "neg"})
def v_pack_b32_f16(st: Step) -> None:
    opsel = st.ins.f.get("opsel", 0)
    halves = []
    for i in (0, 1):
        v = src(st, i, "f16")
        v = (v >> U32(16)) if (opsel >> i) & 1 else v
        v = v & U32(0xFFFF)
        if (st.ins.f.get("neg", 0) >> i) & 1:
            v = v ^ U32(0x8000)
        halves.append(v)
    out(st, halves[0] | (halves[1] << U32(16)))


# ---------------------------------------------------------------- integer and bitwise
INT_BINARY: dict[str, _Binary] = {
    "v_add_u32": lambda a, b: a + b, "v_sub_u32": lambda a, b: a - b, "v_subrev_u32": lambda a, b: b - a,
    "v_and_b32": lambda a, b: a & b, "v_or_b32": lambda a, b: a | b, "v_xor_b32": lambda a, b: a ^ b,
    "v_lshlrev_b32": lambda a, b: b << (a & 31), "v_lshrrev_b32": lambda a, b: b >> (a & 31),
    "v_ashrrev_i32": lambda a, b: (b.astype(U32).view(np.int32).astype(I64) >> (a & 31).astype(I64)).astype(U64),
    "v_mul_lo_u32": lambda a, b: a * b,
    "v_mul_u32_u24": lambda a, b: (a & 0xFFFFFF) * (b & 0xFFFFFF),
    "v_max_u32": np.maximum, "v_min_u32": np.minimum,
}


#: the ops of INT_BINARY whose result is the low 32 bits of the same expression: wrap-around arithmetic, bit operations,
#: shifts by at most 31, max/min. They run on the uint32 operands as they are (the same bits, no 64-bit round trip).
WRAP32_BINARY = frozenset(INT_BINARY) - {"v_ashrrev_i32"}


@op(*INT_BINARY, cls="valu", forms=VALU_FORMS, honours=INT_ALL)
def v_int_binary(st: Step) -> None:
    if st.ins.name in WRAP32_BINARY:
        out(st, INT_BINARY[st.ins.name](src(st, 0).astype(U32, copy=False), src(st, 1).astype(U32, copy=False)))
        return
    a, b = src(st, 0).astype(U64), src(st, 1).astype(U64)
    out(st, (INT_BINARY[st.ins.name](a, b) & U64(M32)).astype(U32))


INT_TERNARY = {
    "v_add3_u32": lambda a, b, c: a + b + c,
    "v_lshl_or_b32": lambda a, b, c: (a << (b & 31)) | c,
    "v_lshl_add_u32": lambda a, b, c: (a << (b & 31)) + c,
    "v_mad_u32_u24": lambda a, b, c: (a & 0xFFFFFF) * (b & 0xFFFFFF) + c,
    "v_and_or_b32": lambda a, b, c: (a & b) | c,
    "v_or3_b32": lambda a, b, c: a | b | c,
    "v_bfe_u32": lambda a, b, c: (a >> (b & 31)) & ((U32(1) << (c & 31)) - U32(1)),
}


@op(*INT_TERNARY, cls="valu")
def v_int_ternary(st: Step) -> None:
    """Every op of INT_TERNARY is the low 32 bits of its expression (wrap-around, bit operations, shifts by at most 31):
    computed on the uint32 operands."""
    a, b, c = (src(st, i).astype(U32, copy=False) for i in range(3))
    out(st, INT_TERNARY[st.ins.name](a, b, c))


@op("v_mov_b32", cls="valu", forms=VALU_FORMS, honours=INT_ALL)
def v_mov_b32(st: Step) -> None:
    out(st, src(st, 0))


@op("v_mov_b64", cls="valu")
def v_mov_b64(st: Step) -> None:
    st.set_v64(dst(st), np.broadcast_to(st.vval64(src_codes(st)[0]), (st.k, 64)))


#: moves to, from and between the accumulation registers (AGPRs, gfx90a+): bit copies, no modifiers. The
#: operand decoder gives AGPR operands their own codes (decode.AGPR), so the register file does the rest.
@op("v_accvgpr_write_b32", "v_accvgpr_read_b32", cls="valu", forms=("vop3p",))
@op("v_accvgpr_mov_b32", cls="valu", forms=("native", "vop3"))
def v_accvgpr_move(st: Step) -> None:
    f = st.ins.f
    st.set_v(f["vdst"], np.broadcast_to(st.vval(f["src0"]), (st.k, 64)))


@op("v_bfrev_b32", cls="valu", forms=VALU_FORMS, honours=INT_ALL)
def v_bfrev_b32(st: Step) -> None:
    a = np.ascontiguousarray(np.broadcast_to(src(st, 0), (st.k, 64)).astype(U32))
    bits = np.unpackbits(a.view(np.uint8).reshape(st.k, 64, 4), axis=2, bitorder="little")
    out(st, np.packbits(bits[..., ::-1], axis=2, bitorder="little").view("<u4")[..., 0])


@op("v_perm_b32", cls="valu")
def v_perm_b32(st: Step) -> None:
    """Byte i of the result = selector byte i of S2 applied to {S0, S1}: 0-7 a byte (0-3 from S1, 4-7 from S0),
    8-11 the sign of S1/S0 halves and words spread to a byte, 12 zero, 13+ 0xFF."""
    s0, s1, s2 = (np.ascontiguousarray(np.broadcast_to(src(st, i), (st.k, 64)), dtype=U32) for i in range(3))
    out(st, native.perm_b32(s0, s1, s2))


@op("v_lshlrev_b64", cls="valu")
def v_lshlrev_b64(st: Step) -> None:
    sh = src(st, 0).astype(U64) & U64(63)
    st.set_v64(dst(st), np.broadcast_to(st.vval64(src_codes(st)[1]) << sh, (st.k, 64)))


@op("v_lshl_add_u64", cls="valu")
def v_lshl_add_u64(st: Step) -> None:
    codes = src_codes(st)
    sh = src(st, 1).astype(U64) & U64(7)
    st.set_v64(dst(st), np.broadcast_to((st.vval64(codes[0]) << sh) + st.vval64(codes[2]), (st.k, 64)))


def _carry_mask_in(st: Step) -> np.ndarray:
    code = st.ins.f["src2"] if "src2" in st.ins.f and st.ins.fmt.startswith("VOP3") else VCC
    return mask_to_lanes(st.sval64(code))


def _carry_out(st: Step, carry: np.ndarray) -> None:
    code = st.ins.f.get("sdst", VCC) if st.ins.fmt.startswith("VOP3") else VCC
    st.set_s64(code, lanes_to_mask(np.broadcast_to(carry, (st.k, 64)) & st.exec_mask))


@op("v_add_co_u32", "v_addc_co_u32", "v_sub_co_u32", "v_subrev_co_u32", cls="valu")
def v_add_carry(st: Step) -> None:
    a, b = src(st, 0).astype(I64), src(st, 1).astype(I64)
    name = st.ins.name
    if name == "v_subrev_co_u32":
        a, b = b, a
    if name.startswith("v_sub"):
        r = a - b
        carry = r < 0
    else:
        r = a + b + (_carry_mask_in(st).astype(I64) if name == "v_addc_co_u32" else 0)
        carry = r > M32
    out(st, (r & M32).astype(U32))
    _carry_out(st, carry)


@op("v_mad_u64_u32", "v_mad_i64_i32", cls="valu")
def v_mad_64_32(st: Step) -> None:
    codes = src_codes(st)
    signed = st.ins.name == "v_mad_i64_i32"
    a, b = (np.broadcast_to(src(st, i), (st.k, 64)) for i in (0, 1))
    c = np.broadcast_to(st.vval64(codes[2]), (st.k, 64))
    if signed:
        prod = a.astype(U32).view(np.int32).astype(object) * b.astype(U32).view(np.int32).astype(object)
        full = prod + c.astype(np.int64).astype(object)
        res = np.vectorize(lambda v: v & 0xFFFFFFFFFFFFFFFF, otypes=[object])(full).astype(U64)
        carry = np.vectorize(lambda v: bool(((v & ((1 << 65) - 1)) >> 64) & 1), otypes=[bool])(full)  # bit 64
    else:
        lo = a.astype(U64) * b.astype(U64)      # < 2^64
        res = lo + c
        carry = res < lo
    st.set_v64(dst(st), res)
    _carry_out(st, carry)


@op("v_cndmask_b32", cls="valu", forms=VALU_FORMS, honours=INT_ALL | {"neg", "abs"})
def v_cndmask_b32(st: Step) -> None:
    code = st.ins.f["src2"] if st.ins.fmt.startswith("VOP3") else VCC
    sel = mask_to_lanes(st.sval64(code))
    if st.ins.fmt.startswith("VOP3") and (st.ins.f.get("abs", 0) or st.ins.f.get("neg", 0)):
        a, b = fsrc(st, 0).view(U32), fsrc(st, 1).view(U32)
    else:
        a, b = src(st, 0), src(st, 1)
    out(st, np.where(sel, b, a))


# ---------------------------------------------------------------- compares
_FCMP: dict[str, _Binary] = {
    "f": lambda a, b: np.zeros(np.broadcast(a, b).shape, bool), "t": lambda a, b: np.ones(np.broadcast(a, b).shape, bool),
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "lg": lambda a, b: (a < b) | (a > b), "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "u": lambda a, b: np.isnan(a) | np.isnan(b), "nge": lambda a, b: ~(a >= b), "nlg": lambda a, b: ~((a < b) | (a > b)),
    "ngt": lambda a, b: ~(a > b), "nle": lambda a, b: ~(a <= b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
}
_ICMP: dict[str, _Binary] = {
    "f": _FCMP["f"], "t": _FCMP["t"], "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater,
    "ne": np.not_equal, "ge": np.greater_equal}
_FCMP_NAMES = [f"v_cmp{x}_{c}_f32" for x in ("", "x") for c in _FCMP]
_ICMP_NAMES = [f"v_cmp{x}_{c}_{t}" for x in ("", "x") for c in _ICMP for t in ("i32", "u32")]
_ICMP64_NAMES = [f"v_cmp{x}_{c}_{t}" for x in ("", "x") for c in _ICMP for t in ("i64", "u64")]


@op(*_FCMP_NAMES, cls="valu", forms=VALU_FORMS, honours=(FLOAT_ALL - {"omod", "clmp"}) | {"sd"})
@op(*_ICMP_NAMES, cls="valu", forms=VALU_FORMS, honours=INT_ALL | {"sd"})
@op(*_ICMP64_NAMES, cls="valu")
def v_cmp(st: Step) -> None:
    """VOPC/VOP3 compares: the lane mask to VCC (VOPC), the SGPR pair SDST (SDWA with SD=1) or VDST (VOP3);
    v_cmpx also to EXEC."""
    parts = st.ins.name.split("_")
    cond, typ = parts[2], parts[3]
    codes = src_codes(st)
    if typ == "f32":
        res = _FCMP[cond](fsrc(st, 0), fsrc(st, 1))
    elif typ.endswith("64"):
        a, b = st.vval64(codes[0]), st.vval64(codes[1])
        if typ == "i64":
            a, b = a.view(I64), b.view(I64)
        res = _ICMP[cond](a, b)
    else:
        a, b = src(st, 0), src(st, 1)
        if typ == "i32":
            a, b = a.astype(U32).view(np.int32), b.astype(U32).view(np.int32)
        res = _ICMP[cond](a, b)
    res = res & st.exec_mask                        # (k, 1) or (k, 64) & (k, 64): (k, 64)
    if _is_dpp(st):                                # active lanes the DPP masks do not write keep their old bit
        written = dpp_write_mask(st)
        keep = st.exec_mask & ~written & mask_to_lanes(st.sval64(EXEC if parts[1] == "cmpx" else VCC))
        res = (res & written) | keep
    bits = lanes_to_mask(res)
    f = st.ins.f
    if st.ins.fmt.startswith("VOP3"):
        target = f["vdst"]
    elif _is_sdwa(st) and f.get("sd", 0):          # SDWA SD=1: the SDST field names the SGPR pair
        target = f["sdst"]
    else:
        target = VCC
    if parts[1] == "cmpx":
        st.set_s64(EXEC, bits)
        if st.ins.fmt.startswith("VOP3") and target != EXEC:
            st.set_s64(target, bits)
    else:
        st.set_s64(target, bits)


# ---------------------------------------------------------------- packed and mixed precision (VOP3P)
def _pk_src(st: Step, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) float32 lanes of a packed-f32 source after op_sel/op_sel_hi and neg/neg_hi."""
    f = st.ins.f
    code = [f["src0"], f["src1"], f["src2"]][i]
    if 256 <= code < AGPR - 1:                     # a VGPR pair: its two registers as they are
        d0, d1 = st.vval(code), st.vval(code + 1)
    elif code >= 256 or code < 128:
        pair = st.vval64(code)
        d0 = (pair & U64(M32)).astype(U32)
        d1 = (pair >> U64(32)).astype(U32)
    else:
        d0 = d1 = st.vval(code, "f32").astype(U32)
    opsel_hi = f.get("opsel_hi", 0) | (f.get("opsel_hi2", 0) << 2)
    lo = d1 if (f.get("opsel", 0) >> i) & 1 else d0
    hi = d1 if (opsel_hi >> i) & 1 else d0
    if (f.get("neg", 0) >> i) & 1:
        lo = lo ^ U32(0x80000000)
    if (f.get("neg_hi", 0) >> i) & 1:
        hi = hi ^ U32(0x80000000)
    return lo.view(F32), hi.view(F32)


PACKED_F32 = {"v_pk_add_f32": lambda a, b, c: a + b, "v_pk_mul_f32": lambda a, b, c: a * b,
       "v_pk_fma_f32": fma_f32}


@op(*PACKED_F32, cls="valu", honours={"opsel", "opsel_hi", "opsel_hi2", "neg", "neg_hi"})
def v_pk_f32(st: Step) -> None:
    n = 3 if st.ins.name == "v_pk_fma_f32" else 2
    parts = [_pk_src(st, i) for i in range(n)] + [(None, None)] * (3 - n)
    fn = PACKED_F32[st.ins.name]
    lo = np.asarray(fn(parts[0][0], parts[1][0], parts[2][0]), F32)
    hi = np.asarray(fn(parts[0][1], parts[1][1], parts[2][1]), F32)
    if st.ins.f.get("clmp", 0):
        raise EmulatorFault(f"{st.ins.name} with clamp is not supported")
    d = st.ins.f["vdst"]
    st.set_v(d, lo.view(U32))
    st.set_v(d + 1, hi.view(U32))


@op("v_pk_mov_b32", cls="valu", honours={"opsel", "opsel_hi", "opsel_hi2"})   # op_sel_hi: unused by the op
def v_pk_mov_b32(st: Step) -> None:
    f = st.ins.f
    picks = []
    for i in (0, 1):
        code = [f["src0"], f["src1"]][i]
        pair = st.vval64(code)
        picks.append(((pair >> U64(32)) if (f.get("opsel", 0) >> i) & 1 else pair & U64(M32)).astype(U32))
    d = f["vdst"]
    lo, hi = picks[0], picks[1]
    st.set_v(d, lo)
    st.set_v(d + 1, hi)


def _mix_src(st: Step, i: int) -> np.ndarray:
    """v_fma_mix source i: f32, or the lo/hi f16 half (op_sel_hi/op_sel), with neg and abs (neg_hi)."""
    f = st.ins.f
    code = [f["src0"], f["src1"], f["src2"]][i]
    opsel_hi = f.get("opsel_hi", 0) | (f.get("opsel_hi2", 0) << 2)
    if (opsel_hi >> i) & 1:
        raw = st.vval(code, "f16").astype(U32)
        half = (raw >> U32(16)) if (f.get("opsel", 0) >> i) & 1 else raw
        val = f16_bits_to_f32(half)
    else:
        val = st.vval(code, "f32").astype(U32).view(F32)
    if (f.get("neg_hi", 0) >> i) & 1:
        val = np.abs(val)
    if (f.get("neg", 0) >> i) & 1:
        val = -val
    return val


@op("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16", cls="valu",
    honours={"opsel", "opsel_hi", "opsel_hi2", "neg", "neg_hi", "clmp"})
def v_fma_mix(st: Step) -> None:
    r = fma_f32(_mix_src(st, 0), _mix_src(st, 1), _mix_src(st, 2))
    if st.ins.f.get("clmp", 0):
        r = np.where(np.isnan(r), F32(0), np.clip(r, F32(0), F32(1))).astype(F32)
    d = st.ins.f["vdst"]
    if st.ins.name == "v_fma_mix_f32":
        st.set_v(d, r.view(U32))
        return
    h = f32_to_f16_bits(r)
    old = st.vval(d)
    new = (old & U32(0xFFFF0000)) | h if st.ins.name == "v_fma_mixlo_f16" else (old & U32(0xFFFF)) | (h << U32(16))
    st.set_v(d, new)


# ---------------------------------------------------------------- IEEE division (LLVM's f32 fdiv sequence)
def _exponent(x: np.ndarray) -> np.ndarray:
    """The biased exponent field of float32 lanes (0 for zeros and denormals, 255 for inf/NaN)."""
    return ((np.ascontiguousarray(x, F32).view(U32) >> U32(23)) & U32(0xFF)).astype(I64)


def _lanes(st: Step, x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.broadcast_to(x, (st.k, WAVE)))


@op("v_div_scale_f32", cls="valu", honours={"neg", "omod", "clmp"})
def v_div_scale_f32(st: Step) -> None:
    """D = S0, or S0 * 2^+-64 where the quotient S2 / S1 would lose range; VCC (SDST) flags a scaled numerator.

    The ISA's cases in order: a zero operand gives NaN; exp(S2) - exp(S1) >= 96 scales the denominator up
    (VCC); a denormal S1 scales up; a denormal quotient scales the numerator up (VCC); a numerator with
    exponent <= 23 scales up. (The 1 / S1 as f64-denormal cases cannot happen for f32 operands.)
    """
    a, b, c = (_lanes(st, fsrc(st, i)) for i in range(3))
    eb, ec = _exponent(b), _exponent(c)
    up = np.ldexp(a, 64).astype(F32)
    with np.errstate(all="ignore"):
        q = (c / b).astype(F32)
    zero = (c == 0) | (b == 0)
    big = ~zero & (ec - eb >= 96)
    den_denorm = ~zero & ~big & (eb == 0)
    q_denorm = ~zero & ~big & ~den_denorm & (q != 0) & (_exponent(q) == 0)
    tiny = ~zero & ~big & ~den_denorm & ~q_denorm & (ec <= 23)
    d = a.copy()
    d = np.where(big & (a == b), up, d)
    d = np.where(den_denorm | tiny, up, d)
    d = np.where(q_denorm & (a == c), up, d)
    d = np.where(zero, np.float32(np.nan), d)
    fout(st, d)
    _carry_out(st, big | q_denorm)


@op("v_div_fmas_f32", cls="valu", honours={"neg", "abs", "omod", "clmp"},
    approx="where VCC is set the fma is scaled by 2^64 toward the unscaled quotient (2^+64 when |S2| >= 1, "
           "else 2^-64), undoing v_div_scale_f32; the ISA pseudocode's fixed 2^32 cannot, and hardware "
           "behaviour at those extreme ranges is not verified here")
def v_div_fmas_f32(st: Step) -> None:
    """fma(S0, S1, S2), rounded once; lanes with VCC set are scaled back by 2^+-64 before that rounding."""
    a, b, c = (_lanes(st, fsrc(st, i)) for i in range(3))
    r = _fma_round_odd(a, b, c)
    vcc = mask_to_lanes(st.sval64(VCC))
    scale = np.where(_exponent(c) >= 127, 2.0 ** 64, 2.0 ** -64)
    fout(st, np.where(vcc, r * scale, r).astype(F32))


QNAN_NEG = np.uint32(0xFFC00000)


@op("v_div_fixup_f32", cls="valu", honours={"neg", "abs", "omod", "clmp"})
def v_div_fixup_f32(st: Step) -> None:
    """The quotient S0 with the special cases of S2 / S1 (S1 the denominator, S2 the numerator) fixed up."""
    a, b, c = (_lanes(st, fsrc(st, i)) for i in range(3))
    bb, cb = b.view(U32), c.view(U32)
    sign = ((bb ^ cb) & U32(0x80000000))
    signed = lambda mag: (U32(mag) | sign).astype(U32)   # noqa: E731
    res = (a.view(U32) & U32(0x7FFFFFFF)) | sign
    res = np.where(_exponent(b) == 255, signed(0x7F800000), res)                   # overflow (unreachable)
    res = np.where(_exponent(c) - _exponent(b) < -150, signed(0), res)             # underflow
    res = np.where(np.isinf(b) | (c == 0), signed(0), res)                        # x/inf, 0/y
    res = np.where((b == 0) | np.isinf(c), signed(0x7F800000), res)               # x/0, inf/y
    res = np.where(np.isinf(b) & np.isinf(c), QNAN_NEG, res)                      # inf/inf
    res = np.where((b == 0) & (c == 0), QNAN_NEG, res)                            # 0/0
    res = np.where(np.isnan(b), bb | U32(0x400000), res)                          # NaN denominator, quieted
    res = np.where(np.isnan(c), cb | U32(0x400000), res)                          # NaN numerator first
    fout(st, res.astype(U32).view(F32))


# ---------------------------------------------------------------- more conversions, bit and shift ops
def _f32_to_int(x: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Truncate toward zero, saturating to [lo, hi]; NaN -> 0 (the ISA's f32_to_i32 / f32_to_u32)."""
    t = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0, posinf=hi, neginf=lo))
    return np.clip(t, lo, hi).astype(I64)


@op("v_cvt_i32_f32", cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL - {"omod", "clmp"})
def v_cvt_i32_f32(st: Step) -> None:
    out(st, (_f32_to_int(fsrc(st, 0), -2 ** 31, 2 ** 31 - 1) & M32).astype(U32))


@op("v_cvt_u32_f32", cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL - {"omod", "clmp"})
def v_cvt_u32_f32(st: Step) -> None:
    out(st, _f32_to_int(fsrc(st, 0), 0, M32).astype(U32))


@op("v_cvt_f32_i32", cls="valu", forms=VALU_FORMS, honours=INT_ALL | {"omod", "clmp"})
def v_cvt_f32_i32(st: Step) -> None:
    fout(st, src(st, 0).astype(U32).view(np.int32).astype(np.float64).astype(F32))


@op("v_cvt_f32_u32", cls="valu", forms=VALU_FORMS, honours=INT_ALL | {"omod", "clmp"})
def v_cvt_f32_u32(st: Step) -> None:
    fout(st, src(st, 0).astype(np.float64).astype(F32))


@op("v_cvt_f32_ubyte0", "v_cvt_f32_ubyte1", "v_cvt_f32_ubyte2", "v_cvt_f32_ubyte3", cls="valu", forms=VALU_FORMS,
    honours=INT_ALL | {"omod", "clmp"})
def v_cvt_f32_ubyte(st: Step) -> None:
    byte = int(st.ins.name[-1])
    fout(st, ((src(st, 0) >> U32(8 * byte)) & U32(0xFF)).astype(F32))


@op("v_exp_f32", cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL,
    approx="2^x correctly rounded here; the hardware result is within about 1 ulp of it")
def v_exp_f32(st: Step) -> None:
    fout(st, np.exp2(fsrc(st, 0).astype(np.float64)).astype(F32))


@op("v_log_f32", cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL,
    approx="log2(x) correctly rounded here; the hardware result is within about 1 ulp of it")
def v_log_f32(st: Step) -> None:
    fout(st, np.log2(fsrc(st, 0).astype(np.float64)).astype(F32))


@op("v_ldexp_f32", cls="valu", forms=VALU_FORMS, honours=(FLOAT_ALL - {"src1_neg", "src1_abs"}))
def v_ldexp_f32(st: Step) -> None:
    e = np.clip(src(st, 1).astype(U32).view(np.int32).astype(I64), -400, 400)
    x = fsrc(st, 0)
    fout(st, np.ldexp(np.broadcast_to(x, np.broadcast(x, e).shape).astype(F32), e).astype(F32))


_ITER2 = {
    "v_alignbit_b32": lambda a, b, c: ((a << U64(32)) | b) >> (c & U64(31)),
    "v_alignbyte_b32": lambda a, b, c: ((a << U64(32)) | b) >> (U64(8) * (c & U64(3))),
    "v_add_lshl_u32": lambda a, b, c: (a + b) << (c & U64(31)),
    "v_xad_u32": lambda a, b, c: (a ^ b) + c,
}


@op(*_ITER2, cls="valu")
def v_int_ternary2(st: Step) -> None:
    """VOP3 three-source integer ops (D = the low 32 bits)."""
    a, b, c = (src(st, i).astype(U64) for i in range(3))
    out(st, (_ITER2[st.ins.name](a, b, c) & U64(M32)).astype(U32))


_F3 = {"v_max3_f32": lambda a, b, c: np.fmax(np.fmax(a, b), c), "v_min3_f32": lambda a, b, c: np.fmin(np.fmin(a, b), c)}


@op(*_F3, cls="valu", honours=FLOAT_MODS)
def v_float_ternary(st: Step) -> None:
    """max3/min3 of floats: a NaN operand is ignored unless all are NaN (IEEE maxNum, as v_max_f32)."""
    fout(st, _F3[st.ins.name](fsrc(st, 0), fsrc(st, 1), fsrc(st, 2)))


_I3 = {"v_max3_u32": (np.maximum, U32), "v_min3_u32": (np.minimum, U32),
       "v_max3_i32": (np.maximum, np.int32), "v_min3_i32": (np.minimum, np.int32)}


@op(*_I3, cls="valu")
def v_int_minmax3(st: Step) -> None:
    fn, typ = _I3[st.ins.name]
    a, b, c = (src(st, i).astype(U32).view(typ) for i in range(3))
    out(st, fn(fn(a, b), c).view(U32))


def _ieee_maximum(a: np.ndarray, b: np.ndarray, is_max: bool) -> np.ndarray:
    """IEEE 754-2019 maximum/minimum: a NaN operand gives NaN, and -0 < +0."""
    r = np.maximum(a, b) if is_max else np.minimum(a, b)
    both_zero = (a == 0) & (b == 0)
    neg = (np.signbit(a) & np.signbit(b)) if is_max else (np.signbit(a) | np.signbit(b))
    r = np.where(both_zero, np.where(neg, F32(-0.0), F32(0.0)), r)
    return np.where(np.isnan(a) | np.isnan(b), F32(np.nan), r).astype(F32)


@op("v_maximum3_f32", "v_minimum3_f32", cls="valu", honours=FLOAT_MODS)
def v_maximum3_f32(st: Step) -> None:
    """gfx950: the IEEE maximum/minimum of three (NaN-propagating, unlike v_max3_f32)."""
    is_max = st.ins.name == "v_maximum3_f32"
    a, b, c = (fsrc(st, i) for i in range(3))
    fout(st, _ieee_maximum(_ieee_maximum(a, b, is_max), c, is_max))


# ---------------------------------------------------------------- half precision
def _h(st: Step, i: int) -> np.ndarray:
    """Source i's low 16 bits as float64 (exact), with the VOP3/SDWA/DPP abs and neg modifiers."""
    val = f16_bits_to_f32(src(st, i, "f16")).astype(np.float64)
    f = st.ins.f
    if _is_sdwa(st) or _is_dpp(st):
        ab, ng = f.get(f"src{i}_abs", 0), f.get(f"src{i}_neg", 0)
    else:
        ab, ng = (f.get("abs", 0) >> i) & 1, (f.get("neg", 0) >> i) & 1
    val = np.abs(val) if ab else val
    return -val if ng else val


def _to_f16_bits(x: np.ndarray) -> np.ndarray:
    """float64 (exact, or rounded to odd) -> f16 bits, rounded once to nearest even."""
    return np.asarray(x, np.float64).astype(np.float16).view(np.uint16).astype(U32)


_HBIN: dict[str, _Binary] = {
    "v_add_f16": lambda a, b: a + b, "v_sub_f16": lambda a, b: a - b, "v_subrev_f16": lambda a, b: b - a,
    "v_mul_f16": lambda a, b: a * b, "v_max_f16": np.fmax, "v_min_f16": np.fmin}


@op(*_HBIN, cls="valu", forms=VALU_FORMS, honours=FLOAT_ALL - {"omod", "clmp"})
def v_half_binary(st: Step) -> None:
    """f16 add/sub/mul/max/min: exact in float64, rounded once; gfx9 zeroes the upper 16 bits of VDST."""
    out(st, _to_f16_bits(_HBIN[st.ins.name](_h(st, 0), _h(st, 1))))


@op("v_fma_f16", cls="valu", honours={"neg", "abs"})
def v_fma_f16(st: Step) -> None:
    out(st, _to_f16_bits(_fma_round_odd(_h(st, 0), _h(st, 1), _h(st, 2))))


def _pk_half(st: Step, i: int) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) float64 halves of a packed-f16 source after op_sel/op_sel_hi and neg/neg_hi."""
    f = st.ins.f
    raw = st.vval([f["src0"], f["src1"], f["src2"]][i], "f16").astype(U32)
    opsel_hi = f.get("opsel_hi", 0) | (f.get("opsel_hi2", 0) << 2)
    lo_bits = (raw >> U32(16)) if (f.get("opsel", 0) >> i) & 1 else raw
    hi_bits = (raw >> U32(16)) if (opsel_hi >> i) & 1 else raw
    lo, hi = (f16_bits_to_f32(x).astype(np.float64) for x in (lo_bits, hi_bits))
    lo = -lo if (f.get("neg", 0) >> i) & 1 else lo
    hi = -hi if (f.get("neg_hi", 0) >> i) & 1 else hi
    return lo, hi


_PKH = {"v_pk_add_f16": (2, lambda a, b, c: a + b), "v_pk_mul_f16": (2, lambda a, b, c: a * b),
        "v_pk_max_f16": (2, lambda a, b, c: np.fmax(a, b)), "v_pk_min_f16": (2, lambda a, b, c: np.fmin(a, b)),
        "v_pk_fma_f16": (3, _fma_round_odd)}


@op(*_PKH, cls="valu", honours={"opsel", "opsel_hi", "opsel_hi2", "neg", "neg_hi"})
def v_pk_half(st: Step) -> None:
    n, fn = _PKH[st.ins.name]
    parts = [_pk_half(st, i) for i in range(n)] + [(None, None)] * (3 - n)
    lo = _to_f16_bits(fn(parts[0][0], parts[1][0], parts[2][0]))
    hi = _to_f16_bits(fn(parts[0][1], parts[1][1], parts[2][1]))
    out(st, lo | (hi << U32(16)))


@op("v_bitop3_b32", cls="valu", honours={"omod", "abs", "neg"})
@op("v_bitop3_b16", cls="valu", honours={"omod", "abs", "neg", "opsel"})
def v_bitop3(st: Step) -> None:
    """gfx950: any bitwise function of three sources; the 8-bit truth table is encoded in {OMOD, ABS, NEG}
    (entry (s0 << 2 | s1 << 1 | s2) gives the result bit). b16: op_sel picks each source's half and the
    destination half; the other half of VDST is kept (the pseudocode writes D.b16 only)."""
    f = st.ins.f
    table = (f.get("omod", 0) << 6) | (f.get("abs", 0) << 3) | f.get("neg", 0)
    half = st.ins.name.endswith("b16")
    opsel = f.get("opsel", 0)
    srcs = []
    for i in range(3):
        x = np.broadcast_to(src(st, i), (st.k, WAVE)).astype(U32)
        srcs.append(((x >> U32(16)) if (opsel >> i) & 1 else x) & U32(0xFFFF) if half else x)
    result = np.zeros((st.k, WAVE), U32)
    for entry in range(8):
        if (table >> entry) & 1:
            pick = [x if (entry >> (2 - j)) & 1 else ~x for j, x in enumerate(srcs)]
            result |= pick[0] & pick[1] & pick[2]
    if half:
        old = st.vval(dst(st))
        result &= U32(0xFFFF)
        result = (old & U32(0xFFFF)) | (result << U32(16)) if (opsel >> 3) & 1 else (old & U32(0xFFFF0000)) | result
    out(st, result)

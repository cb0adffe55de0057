"""Per-opcode tests of the CDNA3/CDNA4 emulator (lnbench.emu), on raw machine code.

Each test assembles a few instructions with tinygrad's CDNA assembler, runs them as one workgroup
with `run_code` and checks registers / memory against values worked out by hand from the ISA's
semantics (special floats, rounding ties, carries, EXEC masking, buffer range checks, LDS ordering).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad.renderer.amd.dsl import EXEC, SDWA, VCC, s, src, v  # noqa: E402
from tinygrad.runtime.autogen.amd.cdna import ins as I  # noqa: E402

from lnbench.emu.errors import EmulatorFault  # noqa: E402
from lnbench.emu.machine import run_code  # noqa: E402
from lnbench.emu.memory import Memory  # noqa: E402

M32, M64 = 0xFFFFFFFF, 0xFFFFFFFFFFFFFFFF
LANE = np.arange(64)
OFF = src[127]                        # saddr "off" (0x7F) in GLOBAL/SCRATCH encodings
SENTINEL = 0x5A5A5A5A                 # preset in destinations: must survive in inactive lanes
EXEC_PAT = 0xF0F0_0FF0_FFFF_0FF1      # a partial EXEC mask (lane 0 active, lanes 1-3 not, ...)
SCC1, SCC0 = I.s_cmp_eq_u32(0, 0), I.s_cmp_lg_u32(0, 0)   # set SCC to 1 / 0


# ---------------------------------------------------------------- helpers
def run(*instrs, **kw):
    """Assemble `instrs` + s_endpgm, run them as one workgroup; the final state (Waves)."""
    code = b"".join(i.to_bytes() for i in instrs) + I.s_endpgm().to_bytes()
    w, _ = run_code(code, **kw)
    return w


def words(*instrs) -> int:
    """Size of `instrs` in dwords (SOPP branch offsets count dwords)."""
    return sum(len(i.to_bytes()) for i in instrs) // 4


def lanes_of(mask: int) -> np.ndarray:
    return np.array([(mask >> i) & 1 for i in range(64)], bool)


def mask_of(lanes: np.ndarray) -> int:
    return sum(1 << int(i) for i in np.flatnonzero(lanes))


def fb(x: float) -> int:
    """float32 bits."""
    return int(np.float32(x).view(np.uint32))


def u32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.uint64).astype(np.uint32)


def s64(code: int, value: int) -> dict[int, int]:
    return {code: value & M32, code + 1: (value >> 32) & M32}


def v64(reg: int, values) -> dict[int, np.ndarray]:
    vals = np.asarray(values, dtype=np.uint64)
    return {reg: (vals & np.uint64(M32)).astype(np.uint32), reg + 1: (vals >> np.uint64(32)).astype(np.uint32)}


def sreg64(w, code: int, wave: int = 0) -> int:
    return int(w.S[wave, code]) | (int(w.S[wave, code + 1]) << 32)


def vreg64(w, reg: int, wave: int = 0) -> np.ndarray:
    return w.V[wave, reg].astype(np.uint64) | (w.V[wave, reg + 1].astype(np.uint64) << np.uint64(32))


def is_nan32(bits: int) -> bool:
    return (bits & 0x7F800000) == 0x7F800000 and (bits & 0x7FFFFF) != 0


def is_nan16(bits: int) -> bool:
    return (bits & 0x7C00) == 0x7C00 and (bits & 0x3FF) != 0


def memory(**buffers: np.ndarray) -> Memory:
    mem = Memory()
    for name, arr in buffers.items():
        mem.add(arr.ctypes.data, arr.nbytes, name, arr.view(np.uint8))
    return mem


def rsrc(arr: np.ndarray, num_records: int, stride: int = 0, at: int = 8) -> dict[int, int]:
    """Buffer descriptor in s[at:at+3]: base lo, base hi[15:0] | stride << 16, num_records, flags."""
    addr = arr.ctypes.data
    return {at: addr & M32, at + 1: ((addr >> 32) & 0xFFFF) | (stride << 16), at + 2: num_records, at + 3: 0x00027000}


# ================================================================ scalar ALU
SOP2_32 = [
    # opcode, S0, S1, SCC in, D, SCC out (SCC out == SCC in where the opcode leaves SCC alone)
    ("s_add_u32", 0xFFFFFFFF, 2, 0, 1, 1),
    ("s_add_u32", 5, 6, 1, 11, 0),
    ("s_addc_u32", 0xFFFFFFFF, 0, 1, 0, 1),
    ("s_addc_u32", 0xFFFFFFFE, 1, 0, 0xFFFFFFFF, 0),
    ("s_addc_u32", 1, 2, 1, 4, 0),
    ("s_subb_u32", 5, 5, 1, 0xFFFFFFFF, 1),
    ("s_subb_u32", 5, 3, 1, 1, 0),
    ("s_subb_u32", 0, 0xFFFFFFFF, 1, 0, 1),          # S1 + SCC = 2^32 > S0: borrow (needs 33 bits)
    ("s_subb_u32", 7, 2, 0, 5, 0),
    ("s_add_i32", 0x7FFFFFFF, 1, 0, 0x80000000, 1),  # SCC = signed overflow
    ("s_add_i32", 0xFFFFFFFF, 1, 1, 0, 0),
    ("s_add_i32", 0x80000000, 0xFFFFFFFF, 0, 0x7FFFFFFF, 1),
    ("s_mul_i32", 0xFFFFFFFF, 7, 1, 0xFFFFFFF9, 1),
    ("s_mul_i32", 0x10000, 0x10001, 0, 0x10000, 0),
    ("s_mul_hi_u32", 0xFFFFFFFF, 0xFFFFFFFF, 0, 0xFFFFFFFE, 0),
    ("s_mul_hi_u32", 0x80000000, 4, 1, 2, 1),
    ("s_mul_hi_i32", 0xFFFFFFFE, 3, 0, 0xFFFFFFFF, 0),  # -6: high word all ones
    ("s_mul_hi_i32", 0x80000000, 0x80000000, 0, 0x40000000, 0),
    ("s_mul_hi_i32", 0xFFFFFFFF, 0xFFFFFFFF, 1, 0, 1),
    ("s_mul_hi_i32", 0x7FFFFFFF, 0x80000000, 0, 0xC0000000, 0),  # -(2^62) + 2^31
    ("s_and_b32", 0xF0F0, 0x0FF0, 0, 0x00F0, 1),
    ("s_and_b32", 0xF0, 0x0F, 1, 0, 0),
    ("s_or_b32", 0x80000000, 1, 0, 0x80000001, 1),
    ("s_or_b32", 0, 0, 1, 0, 0),
    ("s_lshl_b32", 3, 31, 0, 0x80000000, 1),
    ("s_lshl_b32", 1, 33, 0, 2, 1),                   # shift count is S1[4:0]
    ("s_lshl_b32", 0x80000000, 1, 1, 0, 0),
    ("s_lshr_b32", 0x80000000, 31, 0, 1, 1),
    ("s_lshr_b32", 0x80000000, 32, 0, 0x80000000, 1),
    ("s_lshr_b32", 1, 1, 1, 0, 0),
    ("s_ashr_i32", 0x80000000, 4, 0, 0xF8000000, 1),
    ("s_ashr_i32", 0x40000000, 30, 0, 1, 1),
    ("s_ashr_i32", 0x7FFFFFFF, 31, 1, 0, 0),
    ("s_bfe_u32", 0x12345678, (8 << 16) | 4, 0, 0x67, 1),
    ("s_bfe_u32", 0x12345678, (1 << 23) | (4 << 16) | 4, 0, 0x7, 1),   # width is S1[22:16]
    ("s_bfe_u32", 0x80000000, (1 << 16) | 63, 0, 1, 1),                 # offset is S1[4:0]
    ("s_bfe_u32", 0x12345678, 4, 1, 0, 0),                              # width 0
    ("s_cselect_b32", 0xAAAA, 0xBBBB, 1, 0xAAAA, 1),
    ("s_cselect_b32", 0xAAAA, 0xBBBB, 0, 0xBBBB, 0),
    ("s_pack_hh_b32_b16", 0xAAAA1111, 0xBBBB2222, 0, 0xBBBBAAAA, 0),
]


@pytest.mark.parametrize("opcode,a,b,scc_in,d,scc_out", SOP2_32)
def test_sop2_b32(opcode, a, b, scc_in, d, scc_out):
    w = run(SCC1 if scc_in else SCC0, getattr(I, opcode)(s[2], s[0], s[1]), sgpr={0: a, 1: b, 2: 0xDEAD})
    assert hex(w.S[0, 2]) == hex(d)
    assert w.SCC[0] == bool(scc_out)


SOPC = [
    ("s_cmp_ge_i32", 0xFFFFFFFF, 0, 0), ("s_cmp_ge_i32", 0, 0xFFFFFFFF, 1), ("s_cmp_ge_i32", 5, 5, 1),
    ("s_cmp_lt_i32", 0x80000000, 0, 1), ("s_cmp_lt_i32", 0, 0x80000000, 0), ("s_cmp_lt_i32", 3, 3, 0),
    ("s_cmp_lt_u32", 0x80000000, 0, 0), ("s_cmp_lt_u32", 1, 0xFFFFFFFF, 1),
    ("s_cmp_lg_u32", 3, 3, 0), ("s_cmp_lg_u32", 3, 0x80000003, 1),
]


@pytest.mark.parametrize("opcode,a,b,scc", SOPC)
def test_sopc(opcode, a, b, scc):
    w = run(SCC0 if scc else SCC1, getattr(I, opcode)(s[0], s[1]), sgpr={0: a, 1: b})
    assert w.SCC[0] == bool(scc)


SOP2_64 = [
    # opcode, S0, S1, D, SCC out
    ("s_and_b64", 0xF0F0_0000_0000_FF00, 0x0FF0_0000_0000_0F0F, 0x00F0_0000_0000_0F00, 1),
    ("s_and_b64", 0xFFFF_0000_0000_0000, 0x0000_FFFF_FFFF_FFFF, 0, 0),
    ("s_or_b64", 0xF0F0_0000_0000_FF00, 0x0FF0_0000_0000_0F0F, 0xFFF0_0000_0000_FF0F, 1),
    ("s_xor_b64", 0xF0F0_0000_0000_FF00, 0x0FF0_0000_0000_0F0F, 0xFF00_0000_0000_F00F, 1),
    ("s_xor_b64", 0x1234_5678_9ABC_DEF0, 0x1234_5678_9ABC_DEF0, 0, 0),
    ("s_andn2_b64", 0xF0F0_0000_0000_FF00, 0x0FF0_0000_0000_0F0F, 0xF000_0000_0000_F000, 1),
]


@pytest.mark.parametrize("opcode,a,b,d,scc", SOP2_64)
def test_sop2_b64(opcode, a, b, d, scc):
    w = run(SCC0 if scc else SCC1, getattr(I, opcode)(s[4:5], s[0:1], s[2:3]), sgpr={**s64(0, a), **s64(2, b)})
    assert hex(sreg64(w, 4)) == hex(d)
    assert w.SCC[0] == bool(scc)


@pytest.mark.parametrize("value,shift,d", [
    (0xFFFFFFFF, 4, 0xF_FFFF_FFF0),            # carries across the word boundary
    (1, 63, 1 << 63), (1, 64, 1),              # shift count is S1[5:0]
    (0x8000_0000_0000_0000, 1, 0),
])
def test_s_lshl_b64(value, shift, d):
    w = run(SCC1 if d == 0 else SCC0, I.s_lshl_b64(s[4:5], s[0:1], s[2]), sgpr={**s64(0, value), 2: shift})
    assert hex(sreg64(w, 4)) == hex(d)
    assert w.SCC[0] == (d != 0)


@pytest.mark.parametrize("scc", [0, 1])
def test_s_cselect_b64(scc):
    a, b = 0x1111_2222_3333_4444, 0xAAAA_BBBB_CCCC_DDDD
    w = run(SCC1 if scc else SCC0, I.s_cselect_b64(s[4:5], s[0:1], s[2:3]), sgpr={**s64(0, a), **s64(2, b)})
    assert sreg64(w, 4) == (a if scc else b)


def test_s_mov():
    w = run(I.s_mov_b32(s[2], 0xDEADBEEF), I.s_mov_b32(s[3], -16), I.s_mov_b32(s[4], s[0]),
            I.s_mov_b64(s[6:7], s[0:1]), I.s_mov_b64(s[8:9], -1), I.s_mov_b64(s[10:11], 7),
            sgpr={**s64(0, 0x0123_4567_89AB_CDEF), **s64(10, M64)})
    assert [hex(x) for x in w.S[0, 2:5]] == ["0xdeadbeef", "0xfffffff0", "0x89abcdef"]
    assert sreg64(w, 6) == 0x0123_4567_89AB_CDEF
    assert sreg64(w, 8) == M64                  # inline -1 is sign-extended to 64 bits
    assert sreg64(w, 10) == 7                   # and a positive one zero-extended


def test_sopk():
    w = run(I.s_movk_i32(s[2], 0xFFFB), I.s_movk_i32(s[3], 0x7FFF),
            I.s_mulk_i32(s[4], 0xFFFB), I.s_mulk_i32(s[5], 0x7FFF), SCC1, I.s_mulk_i32(s[6], 3),
            sgpr={4: 0xFFFFFFFD, 5: 0x10000, 6: 0x80000001})
    assert [hex(x) for x in w.S[0, 2:7]] == [
        "0xfffffffb",        # simm16 sign-extended
        "0x7fff",
        "0xf",               # -3 * -5
        "0x7fff0000",        # 0x10000 * 0x7fff
        "0x80000003",        # (-2^31 + 1) * 3 wraps
    ]
    assert w.SCC[0]                             # s_mulk leaves SCC alone


@pytest.mark.parametrize("d,simm,result,overflow", [
    (5, 0xFFFD, 2, False),                       # 5 + (-3)
    (0x7FFFFFFF, 1, 0x80000000, True),          # signed overflow sets SCC
    (0x80000000, 0xFFFF, 0x7FFFFFFF, True),     # -2^31 + (-1) wraps
    (0xFFFFFFFF, 1, 0, False),                   # -1 + 1: no signed overflow
])
def test_s_addk_i32(d, simm, result, overflow):
    w = run(SCC0 if overflow else SCC1, I.s_addk_i32(s[2], simm), sgpr={2: d})
    assert int(w.S[0, 2]) == result and bool(w.SCC[0]) == overflow


@pytest.mark.parametrize("name,d,simm,scc", [
    ("s_cmpk_lg_i32", 5, 5, False), ("s_cmpk_lg_i32", 5, 6, True),
    ("s_cmpk_lt_i32", 0xFFFFFFFF, 0, True),      # -1 < 0 signed
    ("s_cmpk_lt_u32", 0xFFFFFFFF, 0, False),     # 0xffffffff < 0 unsigned: no
    ("s_cmpk_eq_i32", 0xFFFFFFFE, 0xFFFE, True),  # simm16 sign-extended for i32
    ("s_cmpk_eq_u32", 0xFFFFFFFE, 0xFFFE, False),  # and zero-extended for u32
    ("s_cmpk_lg_u32", 0xFFFE, 0xFFFE, False),
    ("s_cmpk_ge_u32", 0x10000, 0xFFFF, True),
])
def test_s_cmpk(name, d, simm, scc):
    w = run(SCC0 if scc else SCC1, getattr(I, name)(s[2], simm), sgpr={2: d})
    assert bool(w.SCC[0]) == scc and int(w.S[0, 2]) == d


def test_ds_write2_read2_b64_offsets_in_8_byte_units():
    w = run(I.ds_write2_b64(addr=v[0], data0=v[2:3], data1=v[4:5], offset0=1, offset1=3),
            I.ds_read2_b64(vdst=v[6:9], addr=v[0], offset0=3, offset1=1),
            lds_bytes=64 * 64, exec_mask=1,
            vgpr={0: LANE * 64, 2: 0x11, 3: 0x22, 4: 0x33, 5: 0x44})
    lds = w.lds[0].view(np.uint32)
    assert lds[2:4].tolist() == [0x11, 0x22] and lds[6:8].tolist() == [0x33, 0x44]
    assert [int(w.V[0, r, 0]) for r in range(6, 10)] == [0x33, 0x44, 0x11, 0x22]


@pytest.mark.parametrize("value,d", [(1, 0x80000000), (0x12345678, 0x1E6A2C48), (0xFFFF0000, 0x0000FFFF), (0, 0)])
def test_s_brev_b32(value, d):
    w = run(I.s_brev_b32(s[2], s[0]), sgpr={0: value})
    assert hex(w.S[0, 2]) == hex(d)


@pytest.mark.parametrize("value,d", [(0, 0xFFFFFFFF), (1 << 40, 40), (1 << 63, 63), (0xC, 2),
                                     (0xFFFF_FFFF_0000_0000, 32), (M64, 0)])
def test_s_ff1_i32_b64(value, d):
    w = run(I.s_ff1_i32_b64(s[2], s[0:1]), sgpr=s64(0, value))
    assert hex(w.S[0, 2]) == hex(d)


# ================================================================ control flow
@pytest.mark.parametrize("threshold", [16, 0, 64])
def test_saveexec_execz_branch(threshold):
    """if (lane < threshold) { v1 = 7; s10 = 1 } with the branch skipping the block when EXEC is 0."""
    body = [I.v_mov_b32_e32(v[1], 7), I.s_mov_b32(s[10], 1)]
    w = run(I.v_cmp_gt_u32_e32(s[2], v[0]),              # VCC = threshold > lane
            I.s_and_saveexec_b64(s[4:5], VCC),
            I.s_cbranch_execz(words(*body)),
            *body,
            I.s_or_b64(EXEC, EXEC, s[4:5]),
            I.v_add_u32_e32(v[2], 1, v[1]),
            sgpr={2: threshold}, vgpr={0: LANE, 1: 100})
    inside = LANE < threshold
    assert (w.V[0, 1] == np.where(inside, 7, 100)).all()
    assert (w.V[0, 2] == np.where(inside, 8, 101)).all()        # EXEC restored for all lanes
    assert sreg64(w, 4) == M64                                  # the saved EXEC
    assert sreg64(w, 126) == M64
    assert w.S[0, 10] == (1 if threshold else 0)                # scalar code skipped only by the branch


def _taken(branch, *setup, **kw) -> bool:
    w = run(*setup, branch(1), I.s_mov_b32(s[10], 1), **kw)
    return w.S[0, 10] == 0


@pytest.mark.parametrize("exec_mask,taken", [(M64, True), (1 << 63, True), (0, False)])
def test_s_cbranch_execnz(exec_mask, taken):
    assert _taken(I.s_cbranch_execnz, exec_mask=exec_mask) == taken


@pytest.mark.parametrize("exec_mask,taken", [(M64, False), (1, False), (0, True)])
def test_s_cbranch_execz(exec_mask, taken):
    assert _taken(I.s_cbranch_execz, exec_mask=exec_mask) == taken


@pytest.mark.parametrize("vcc,taken", [(0, False), (1 << 63, True), (1, True)])
def test_s_cbranch_vccnz(vcc, taken):
    assert _taken(I.s_cbranch_vccnz, sgpr=s64(106, vcc)) == taken


@pytest.mark.parametrize("setup,taken", [(SCC1, True), (SCC0, False)])
def test_s_cbranch_scc1(setup, taken):
    assert _taken(I.s_cbranch_scc1, setup) == taken


def test_s_branch_and_backward_loop():
    """sum = 0 + 1 + ... + 9 with a backward s_cbranch_scc1; s_branch jumps over a poisoning s_mov."""
    body = [I.s_add_u32(s[1], s[1], s[0]), I.s_nop(0), I.s_add_i32(s[0], s[0], 1), I.s_waitcnt(0),
            I.s_cmp_lt_i32(s[0], 10)]
    poison = I.s_mov_b32(s[1], 0xBAD)                     # 8 bytes: a literal follows the opcode
    w = run(I.s_mov_b32(s[0], 0), I.s_mov_b32(s[1], 0),
            *body, I.s_cbranch_scc1(-(words(*body) + 1)),
            I.s_branch(words(poison)), poison)
    assert (w.S[0, 0], w.S[0, 1]) == (10, 45)


# ================================================================ vector ALU: floats
NAN, INF = float("nan"), float("inf")
F32_BINARY = [
    # opcode, a, b, expected bits (None: any NaN)
    ("v_add_f32", 1.5, 2.25, fb(3.75)),
    ("v_add_f32", -0.0, -0.0, 0x80000000),
    ("v_add_f32", -0.0, 0.0, 0x00000000),
    ("v_add_f32", 1.0, -1.0, 0x00000000),             # exact zero sum is +0 in round-to-nearest
    ("v_add_f32", INF, -INF, None),
    ("v_add_f32", INF, 1.0, 0x7F800000),
    ("v_add_f32", NAN, 1.0, None),
    ("v_add_f32", 1.0, 2.0 ** -24, 0x3F800000),        # tie -> even (down)
    ("v_add_f32", 1.0 + 2.0 ** -23, 2.0 ** -24, 0x3F800002),   # tie -> even (up)
    ("v_add_f32", 2.0 ** -149, 2.0 ** -149, 0x00000002),       # denormals kept
    ("v_add_f32", 3.4028234663852886e38, 3.4028234663852886e38, 0x7F800000),
    ("v_sub_f32", 2.0 ** -126, 2.0 ** -149, 0x007FFFFF),       # normal - denormal = denormal
    ("v_sub_f32", 0.0, 0.0, 0x00000000),
    ("v_sub_f32", -0.0, 0.0, 0x80000000),
    ("v_sub_f32", -0.0, -0.0, 0x00000000),
    ("v_sub_f32", INF, INF, None),
    ("v_mul_f32", -0.0, 5.0, 0x80000000),
    ("v_mul_f32", -1.0, 0.0, 0x80000000),
    ("v_mul_f32", -0.0, -0.0, 0x00000000),
    ("v_mul_f32", 0.0, INF, None),
    ("v_mul_f32", -2.0, INF, 0xFF800000),
    ("v_mul_f32", 2.0 ** -126, 0.5, 0x00400000),               # result denormal
    ("v_mul_f32", 2.0 ** -149, 0.5, 0x00000000),               # half the smallest denormal: tie -> 0
    ("v_mul_f32", 3 * 2.0 ** -149, 0.5, 0x00000002),           # 1.5 ulp: tie -> even (2)
    ("v_mul_f32", 2.0 ** 127, 2.0, 0x7F800000),
    ("v_mul_f32", 1.0 + 2.0 ** -23, 1.0 + 2.0 ** -23, 0x3F800002),  # 1 + 2^-22 + 2^-46 rounds down
]


@pytest.mark.parametrize("opcode,a,b,expected", F32_BINARY)
def test_f32_binary(opcode, a, b, expected):
    w = run(getattr(I, opcode + "_e32")(v[2], v[0], v[1]),
            vgpr={0: np.float32(a), 1: np.float32(b), 2: SENTINEL}, exec_mask=EXEC_PAT)
    active = lanes_of(EXEC_PAT)
    got = int(w.V[0, 2][0])
    if expected is None:
        assert is_nan32(got)
    else:
        assert hex(got) == hex(expected)
    assert (w.V[0, 2][active] == got).all() and (w.V[0, 2][~active] == SENTINEL).all()


@pytest.mark.parametrize("kw,a,b,expected", [
    (dict(neg=1), 1.5, 2.0, 0.5),
    (dict(neg=2), 1.5, 2.0, -0.5),
    (dict(abs=3), -1.5, -2.0, 3.5),
    (dict(abs=1, neg=1), 1.5, 2.0, 0.5),                 # -|a| + b
    (dict(omod=1), 1.5, 2.0, 7.0),                       # *2
    (dict(omod=2), 1.5, 2.0, 14.0),                      # *4
    (dict(omod=3), 1.5, 2.0, 1.75),                      # /2
    (dict(clmp=1), 1.5, 2.0, 1.0),
    (dict(clmp=1), -3.0, 2.0, 0.0),
    (dict(clmp=1), NAN, 2.0, 0.0),                       # DX10 clamp: NaN -> 0
])
def test_vop3_float_modifiers(kw, a, b, expected):
    w = run(I.v_add_f32_e64(v[2], v[0], v[1], **kw), vgpr={0: np.float32(a), 1: np.float32(b)})
    assert hex(w.V[0, 2][0]) == hex(fb(expected))


@pytest.mark.parametrize("x,expected", [
    (4.0, fb(0.5)), (0.25, fb(2.0)), (2.0 ** -148, fb(2.0 ** 74)),   # a denormal input
    (0.0, 0x7F800000), (-0.0, 0xFF800000), (INF, 0x00000000), (-1.0, None), (NAN, None),
])
def test_v_rsq_f32(x, expected):
    w = run(I.v_rsq_f32_e32(v[1], v[0]), vgpr={0: np.float32(x)})
    got = int(w.V[0, 1][0])
    assert is_nan32(got) if expected is None else hex(got) == hex(expected)


# ---------------------------------------------------------------- fused multiply-add (v_fma_mix_f32)
def mix(opcode: str, *, opsel=0, opsel_hi=0, neg=0, neg_hi=0, clmp=0):
    """v_mad_mix*/v_fma_mix* v3 = v0 * v1 + v2 (opsel_hi has one bit per source: 1 = f16 source)."""
    return getattr(I, opcode)(v[3], v[0], v[1], v[2], opsel=opsel, opsel_hi=opsel_hi & 3, opsel_hi2=opsel_hi >> 2,
                              neg=neg, neg_hi=neg_hi, clmp=clmp)


FMA_F32 = [
    # a, b, c, expected bits: one rounding of the exact a*b + c
    # (1 + 2^-12)^2 - 1 = 2^-11 + 2^-24 exactly; rounding a*b first gives 2^-11
    pytest.param(1 + 2.0 ** -12, 1 + 2.0 ** -12, -1.0, 0x3A000400, id="fused-not-mul-then-add"),
    # a*b = 2^-24 + 257414 * 2^-71: the sum sits just above the tie 1 + 2^-24 by less than half a
    # float64 ulp, so rounding through float64 lands on the tie and picks 1.0; exact is 1 + 2^-23
    pytest.param(11865889 * 2.0 ** -36, 11860678 * 2.0 ** -35, 1.0, 0x3F800001, id="float64-double-rounding-up"),
    # a*b = 2^-24 + 520574 * 2^-71: above the tie by 0.99 float64 ulp (float64 rounds away from the tie,
    # and moving the rounded sum one float64 ulp back toward the exact value lands on the tie)
    pytest.param(11865838 * 2.0 ** -36, 11860729 * 2.0 ** -35, 1.0, 0x3F800001, id="one-ulp-from-tie-up"),
    # a*b = 3 * 2^-24 - 12 * 2^-70: just below the tie between 1 + 2^-23 (odd) and 1 + 2^-22 (even)
    pytest.param(12582915 * 2.0 ** -35, 16777212 * 2.0 ** -35, 1.0, 0x3F800001, id="float64-double-rounding-down"),
    # a*b = 3 * 2^-24 - 132300 * 2^-70: below the tie by 0.5-1 float64 ulp
    pytest.param(12583227 * 2.0 ** -35, 16776796 * 2.0 ** -35, 1.0, 0x3F800001, id="one-ulp-from-tie-down"),
    # 2^128 - 1.5 * 2^127 = 2^126, though a*b alone overflows float32
    pytest.param(2.0 ** 127, 2.0, -1.5 * 2.0 ** 127, 0x7E800000, id="no-intermediate-overflow"),
    pytest.param(2.0 ** -126, 0.5, 2.0 ** -149, 0x00400001, id="denormal-exact"),
    pytest.param(3 * 2.0 ** -149, 0.5, 0.0, 0x00000002, id="denormal-tie-even"),
    pytest.param(-0.0, 1.0, -0.0, 0x80000000, id="-0+-0"),
    pytest.param(0.0, 1.0, -0.0, 0x00000000, id="+0+-0"),
    pytest.param(1.0, -0.0, 0.0, 0x00000000, id="-0+0"),
    pytest.param(INF, 0.0, 1.0, None, id="inf*0"),
    pytest.param(INF, 1.0, -INF, None, id="inf-inf"),
    pytest.param(NAN, 1.0, 1.0, None, id="nan"),
]


@pytest.mark.parametrize("a,b,c,expected", FMA_F32)
def test_v_fma_mix_f32_is_fused(a, b, c, expected):
    w = run(mix("v_mad_mix_f32"), vgpr={0: np.float32(a), 1: np.float32(b), 2: np.float32(c)})
    got = int(w.V[0, 3][0])
    assert is_nan32(got) if expected is None else hex(got) == hex(expected)


@pytest.mark.parametrize("kw,v0,v1,v2,expected", [
    # src0 = f16 1.5 from the high half, src1 = f32 2.0, src2 = f16 0.25 from the low half
    (dict(opsel=0b001, opsel_hi=0b101), 0x3E00_1234, fb(2.0), 0xFFFF_3400, 3.25),
    # same with neg on src1 and abs (neg_hi) on src2 = f16 -0.25
    (dict(opsel=0b001, opsel_hi=0b101, neg=0b010, neg_hi=0b100), 0x3E00_1234, fb(2.0), 0xFFFF_B400, -2.75),
    # src0 = f16 denormal 2^-24 (low half), src1 = f32 2^24, src2 = f32 -0.5
    (dict(opsel_hi=0b001), 0xABCD_0001, fb(2.0 ** 24), fb(-0.5), 0.5),
    # every source f16, from the high halves
    (dict(opsel=0b111, opsel_hi=0b111), 0x4000_0000, 0xC200_0000, 0x3C00_0000, -5.0),
])
def test_v_fma_mix_f32_f16_sources(kw, v0, v1, v2, expected):
    w = run(mix("v_mad_mix_f32", **kw), vgpr={0: v0, 1: v1, 2: v2})
    assert hex(w.V[0, 3][0]) == hex(fb(expected))


@pytest.mark.parametrize("a,b,c,h", [
    (1.5, 2.0, 0.25, 0x4280),                # 3.25
    (2.0 ** -20, 2.0 ** -4, 0.0, 0x0001),    # f16 denormal result (2^-24)
    (2.0 ** -20, 2.0 ** -5, 0.0, 0x0000),    # 2^-25: tie -> even (0)
    (65520.0, 1.0, 0.0, 0x7C00),             # tie between 65504 and 2^16: even -> inf
    (65519.0, 1.0, 0.0, 0x7BFF),
    (-0.0, 1.0, -0.0, 0x8000),
    (INF, 0.0, 0.0, None),
])
def test_v_fma_mixlo_f16(a, b, c, h):
    w = run(mix("v_mad_mixlo_f16"), vgpr={0: np.float32(a), 1: np.float32(b), 2: np.float32(c), 3: 0xABCD_9999})
    got = int(w.V[0, 3][0])
    assert got >> 16 == 0xABCD                                    # the high half is kept
    assert is_nan16(got & 0xFFFF) if h is None else hex(got & 0xFFFF) == hex(h)


# ---------------------------------------------------------------- conversions
F32_TO_F16 = [
    (0x3F800000, 0x3C00), (0x80000000, 0x8000), (0x7F800000, 0x7C00), (0xFF800000, 0xFC00),
    (fb(65504.0), 0x7BFF), (0x477FEFFF, 0x7BFF), (fb(65520.0), 0x7C00), (fb(1e6), 0x7C00), (fb(-1e6), 0xFC00),
    (0x3F801000, 0x3C00),            # 1 + 2^-11: tie -> even (down)
    (0x3F803000, 0x3C02),            # 1 + 3 * 2^-11: tie -> even (up)
    (0x3F801001, 0x3C01),            # just above the tie
    (fb(2.0 ** -14), 0x0400),        # smallest normal
    (fb(1023 * 2.0 ** -24), 0x03FF), # largest denormal
    (fb(2.0 ** -24), 0x0001),        # smallest denormal
    (fb(2.0 ** -25), 0x0000),        # half of it: tie -> even (0)
    (fb(3 * 2.0 ** -25), 0x0002),    # 1.5 ulps: tie -> even (2)
    (0x33000001, 0x0001),            # just above half an ulp
    (fb(-(2.0 ** -26)), 0x8000),     # underflow keeps the sign
    (0x00000001, 0x0000),            # f32 denormal
    (0x7FC00000, None), (0x7F800001, None), (0xFFC00001, None),   # NaNs (a signalling one too) stay NaN
]


@pytest.mark.parametrize("x,h", F32_TO_F16)
def test_v_cvt_f16_f32(x, h):
    w = run(I.v_cvt_f16_f32_e32(v[1], v[0]), vgpr={0: x})
    got = int(w.V[0, 1][0])
    assert is_nan16(got & 0xFFFF) if h is None else hex(got) == hex(h)


F16_TO_F32 = [(0x3C00, fb(1.0)), (0xC000, fb(-2.0)), (0x0001, fb(2.0 ** -24)), (0x03FF, fb(1023 * 2.0 ** -24)),
              (0x8000, 0x80000000), (0x7C00, 0x7F800000), (0xFC00, 0xFF800000), (0x7BFF, fb(65504.0)),
              (0x7E00, None), (0xFD01, None)]


@pytest.mark.parametrize("form", ["e32", "sdwa_word1"])
@pytest.mark.parametrize("h,x", F16_TO_F32)
def test_v_cvt_f32_f16(h, x, form):
    if form == "e32":     # the high half is ignored
        w = run(I.v_cvt_f32_f16_e32(v[1], v[0]), vgpr={0: 0xBEEF0000 | h})
    else:                 # SDWA src0_sel = WORD_1 reads the high half
        w = run(I.v_cvt_f32_f16_e32(v[1], SDWA, vsrc0=v[0], src0_sel=5, dst_sel=6), vgpr={0: (h << 16) | 0xBEEF})
    got = int(w.V[0, 1][0])
    assert is_nan32(got) if x is None else hex(got) == hex(x)


def _bf16_nan(h: int) -> bool:
    return (h & 0x7F80) == 0x7F80 and (h & 0x7F) != 0


@pytest.mark.parametrize("lo,hi,expected", [
    (0x3F808000, 0x3F818000, 0x3F82_3F80),   # ties to even: 0x3F80 stays, 0x3F81 goes up
    (0x3F808001, 0x3F7FFFFF, 0x3F80_3F81),   # above the tie; rounding carries into the exponent
    (0x7F7FFFFF, 0xFF7FFFFF, 0xFF80_7F80),   # overflow to +-inf
    (0x7F800000, 0xFF800000, 0xFF80_7F80),
    (0x80000000, 0x00018000, 0x0002_8000),   # -0; denormal tie -> even
    (0x00008000, 0x00007FFF, 0x0000_0000),
    (0x7FC00000, 0x7F800001, None),          # NaN stays NaN (a naive +0x7FFF would give inf)
])
def test_v_cvt_pk_bf16_f32(lo, hi, expected):
    w = run(I.v_cvt_pk_bf16_f32(v[2], v[0], v[1]), vgpr={0: lo, 1: hi})
    got = int(w.V[0, 2][0])
    if expected is None:
        assert _bf16_nan(got & 0xFFFF) and _bf16_nan(got >> 16)
    else:
        assert hex(got) == hex(expected)


@pytest.mark.parametrize("lo,hi,expected", [
    (fb(1.0), fb(-2.0), 0xC000_3C00),
    (0x3F801000, fb(3 * 2.0 ** -25), 0x0002_3C00),    # f16 ties to even, denormal
    (fb(65520.0), 0x80000000, 0x8000_7C00),
])
def test_v_cvt_pk_f16_f32(lo, hi, expected):
    w = run(I.v_cvt_pk_f16_f32(v[2], v[0], v[1]), vgpr={0: lo, 1: hi})
    assert hex(w.V[0, 2][0]) == hex(expected)


@pytest.mark.parametrize("kw,expected", [
    (dict(), 0x4000_3C00), (dict(opsel=1), 0x4000_1111), (dict(opsel=2), 0x2222_3C00),
    (dict(opsel=3), 0x2222_1111), (dict(neg=1), 0x4000_BC00), (dict(neg=2), 0xC000_3C00),
])
def test_v_pack_b32_f16(kw, expected):
    w = run(I.v_pack_b32_f16(v[2], v[0], v[1], **kw), vgpr={0: 0x1111_3C00, 1: 0x2222_4000})
    assert hex(w.V[0, 2][0]) == hex(expected)


# ---------------------------------------------------------------- packed f32 (VOP3P)
PK_A, PK_B = (1.5, 10.0), (2.0, 100.0)


@pytest.mark.parametrize("opcode,kw,lo,hi", [
    ("v_pk_add_f32", dict(), 3.5, 110.0),
    ("v_pk_add_f32", dict(opsel=1), 12.0, 110.0),             # src0 lo <- its high dword
    ("v_pk_add_f32", dict(opsel=2), 101.5, 110.0),
    ("v_pk_add_f32", dict(opsel=3, opsel_hi=0), 110.0, 3.5),  # swapped halves
    ("v_pk_add_f32", dict(opsel_hi=0), 3.5, 3.5),
    ("v_pk_add_f32", dict(opsel_hi=1), 3.5, 12.0),            # src1 hi <- its low dword
    ("v_pk_add_f32", dict(neg=1), 0.5, 110.0),
    ("v_pk_add_f32", dict(neg=2, neg_hi=2), -0.5, -90.0),
    ("v_pk_add_f32", dict(neg_hi=3), 3.5, -110.0),
    ("v_pk_mul_f32", dict(), 3.0, 1000.0),
    ("v_pk_mul_f32", dict(opsel=1, opsel_hi=2, neg=1), -20.0, 150.0),
])
def test_packed_f32(opcode, kw, lo, hi):
    w = run(getattr(I, opcode)(v[4:5], v[0:1], v[2:3], **kw),
            vgpr={0: np.float32(PK_A[0]), 1: np.float32(PK_A[1]), 2: np.float32(PK_B[0]), 3: np.float32(PK_B[1])})
    assert (w.V[0, 4][0].view(np.float32), w.V[0, 5][0].view(np.float32)) == (lo, hi)


def test_packed_f32_signed_zeros_and_sgpr_source():
    w = run(I.v_pk_mul_f32(v[4:5], v[0:1], s[2:3]), I.v_pk_add_f32(v[6:7], v[0:1], v[0:1], neg=1),
            sgpr={2: fb(-3.0), 3: fb(-3.0)}, vgpr={0: np.float32(0.0), 1: 0x80000000})
    assert [hex(w.V[0, r][0]) for r in (4, 5, 6, 7)] == [
        "0x80000000", "0x0",          # 0 * -3 = -0, -0 * -3 = +0
        "0x0", "0x80000000",          # -(+0) + +0 = +0, -0 + -0 = -0
    ]


@pytest.mark.parametrize("opsel,lo,hi", [(0, 0xA0, 0xB0), (1, 0xA1, 0xB0), (2, 0xA0, 0xB1), (3, 0xA1, 0xB1)])
def test_v_pk_mov_b32(opsel, lo, hi):
    w = run(I.v_pk_mov_b32(v[4:5], v[0:1], v[2:3], opsel=opsel), vgpr={0: 0xA0, 1: 0xA1, 2: 0xB0, 3: 0xB1, 4: 1, 5: 1},
            exec_mask=EXEC_PAT)
    active = lanes_of(EXEC_PAT)
    assert (w.V[0, 4][active] == lo).all() and (w.V[0, 5][active] == hi).all()
    assert (w.V[0, 4][~active] == 1).all() and (w.V[0, 5][~active] == 1).all()


# ================================================================ vector ALU: integers
VALS = u32([0, 1, 2, 31, 32, 33, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0x12345678, 0xDEADBEEF, 0xFFFF,
            0xFFFF0000, 5, 63, 0x80000001])
A = np.tile(VALS, 4)
B = np.concatenate([np.roll(VALS, k) for k in (0, 3, 7, 11)])
C = np.concatenate([np.roll(VALS, k) for k in (5, 1, 13, 9)])
PERM_SEL = u32([int.from_bytes(bytes(row.tolist()), "little")
                for row in np.random.default_rng(7).choice([*range(14), 0xFF, 0x80], size=(64, 4))])


def _i32(x: int) -> int:
    return x - (1 << 32) if x & 0x80000000 else x


def _perm(s0: int, s1: int, sel: int) -> int:
    data = (s0 << 32) | s1                                     # bytes 0-3 from S1, 4-7 from S0
    out = 0
    for i in range(4):
        k = (sel >> (8 * i)) & 0xFF
        if k < 8:
            byte = (data >> (8 * k)) & 0xFF
        elif k < 12:
            byte = 0xFF * ((data >> {8: 15, 9: 31, 10: 47, 11: 63}[k]) & 1)   # sign of S1.lo, S1, S0.lo, S0
        else:
            byte = 0x00 if k == 12 else 0xFF
        out |= byte << (8 * i)
    return out


INT_OPS = [
    # name, instruction (v3 <- v0, v1, v2), reference on python ints
    ("v_add_u32", I.v_add_u32_e32(v[3], v[0], v[1]), lambda a, b, c: (a + b) & M32),
    ("v_add_u32 sgpr", I.v_add_u32_e32(v[3], s[7], v[1]), lambda a, b, c: (0xFFFFFFF0 + b) & M32),
    ("v_and_b32", I.v_and_b32_e32(v[3], v[0], v[1]), lambda a, b, c: a & b),
    ("v_or_b32", I.v_or_b32_e32(v[3], v[0], v[1]), lambda a, b, c: a | b),
    ("v_xor_b32", I.v_xor_b32_e32(v[3], v[0], v[1]), lambda a, b, c: a ^ b),
    ("v_lshlrev_b32", I.v_lshlrev_b32_e32(v[3], v[0], v[1]), lambda a, b, c: (b << (a & 31)) & M32),
    ("v_lshrrev_b32", I.v_lshrrev_b32_e32(v[3], v[0], v[1]), lambda a, b, c: b >> (a & 31)),
    ("v_ashrrev_i32", I.v_ashrrev_i32_e32(v[3], v[0], v[1]), lambda a, b, c: (_i32(b) >> (a & 31)) & M32),
    ("v_mul_lo_u32", I.v_mul_lo_u32(v[3], v[0], v[1]), lambda a, b, c: (a * b) & M32),
    ("v_add3_u32", I.v_add3_u32_e64(v[3], v[0], v[1], v[2]), lambda a, b, c: (a + b + c) & M32),
    ("v_mad_u32_u24", I.v_mad_u32_u24_e64(v[3], v[0], v[1], v[2]),
     lambda a, b, c: ((a & 0xFFFFFF) * (b & 0xFFFFFF) + c) & M32),
    ("v_lshl_or_b32", I.v_lshl_or_b32(v[3], v[0], v[1], v[2]), lambda a, b, c: ((a << (b & 31)) & M32) | c),
    ("v_bfe_u32", I.v_bfe_u32_e64(v[3], v[0], v[1], v[2]), lambda a, b, c: (a >> (b & 31)) & ((1 << (c & 31)) - 1)),
    ("v_perm_b32", I.v_perm_b32_e64(v[3], v[0], v[1], v[4]), lambda a, b, c: _perm(a, b, c)),
    ("v_bfrev_b32", I.v_bfrev_b32_e32(v[3], v[0]), lambda a, b, c: int(f"{a:032b}"[::-1], 2)),
    ("v_mov_b32", I.v_mov_b32_e32(v[3], v[0]), lambda a, b, c: a),
    ("v_mov_b32 literal", I.v_mov_b32_e32(v[3], 0x12345678), lambda a, b, c: 0x12345678),
    ("v_mov_b32 inline", I.v_mov_b32_e32(v[3], -7), lambda a, b, c: 0xFFFFFFF9),
]


@pytest.mark.parametrize("name,ins,ref", INT_OPS, ids=[o[0] for o in INT_OPS])
def test_int_vop(name, ins, ref):
    w = run(ins, sgpr={7: 0xFFFFFFF0}, vgpr={0: A, 1: B, 2: C, 3: SENTINEL, 4: PERM_SEL}, exec_mask=EXEC_PAT)
    active = lanes_of(EXEC_PAT)
    third = PERM_SEL if name == "v_perm_b32" else C
    expected = u32([ref(int(a), int(b), int(c)) for a, b, c in zip(A, B, third)])
    assert [hex(x) for x in w.V[0, 3][active]] == [hex(x) for x in expected[active]]
    assert (w.V[0, 3][~active] == SENTINEL).all()


@pytest.mark.parametrize("form", ["e32", "e64"])
def test_v_cndmask_b32(form):
    sel = 0x0123_4567_89AB_CDEF
    if form == "e32":
        w = run(I.v_cndmask_b32_e32(v[2], v[0], v[1]), sgpr=s64(106, sel), vgpr={0: 111, 1: 222, 2: SENTINEL},
                exec_mask=EXEC_PAT)
    else:
        w = run(I.v_cndmask_b32_e64(v[2], v[0], v[1], s[4:5]), sgpr=s64(4, sel), vgpr={0: 111, 1: 222, 2: SENTINEL},
                exec_mask=EXEC_PAT)
    active = lanes_of(EXEC_PAT)
    expected = np.where(lanes_of(sel), 222, 111)
    assert (w.V[0, 2][active] == expected[active]).all()
    assert (w.V[0, 2][~active] == SENTINEL).all()


def test_v_cndmask_b32_e64_float_modifiers():
    w = run(I.v_cndmask_b32_e64(v[2], v[0], v[1], s[4:5], neg=1, abs=2), sgpr=s64(4, 0xFFFF_FFFF),
            vgpr={0: np.float32(1.5), 1: np.float32(-2.5)})
    assert (w.V[0, 2][32:] == fb(-1.5)).all() and (w.V[0, 2][:32] == fb(2.5)).all()


# ---------------------------------------------------------------- carries and 64-bit
A64 = np.array([0, 1, M64, 0xFFFF_FFFF, 0x8000_0000_0000_0000, 0x1234_5678_9ABC_DEF0, 0xFFFF_FFFF_0000_0001,
                0x7FFF_FFFF_FFFF_FFFF] * 8, np.uint64)
B64 = np.array([M64, 1, 1, 1, 0x8000_0000_0000_0000, 0xEDCB_A987_6543_2110, 0x0000_0000_FFFF_FFFF,
                1] * 4 + [0, 0xFFFF_FFFF] * 16, np.uint64)


@pytest.mark.parametrize("form", ["e32", "e64"])
def test_64bit_add_via_add_co_addc(form):
    """lo = add_co(a.lo, b.lo) -> carry; hi = addc(a.hi, b.hi, carry) -> carry: a 64-bit add with carry out."""
    if form == "e32":
        prog = [I.v_add_co_u32_e32(v[4], v[0], v[2]), I.v_addc_co_u32_e32(v[5], v[1], v[3])]
        carry_reg = 106
    else:
        prog = [I.v_add_co_u32(v[4], s[10:11], v[0], v[2]), I.v_addc_co_u32(v[5], s[12:13], v[1], v[3], s[10:11])]
        carry_reg = 12
    w = run(*prog, sgpr={**s64(106, M64), **s64(12, M64)}, exec_mask=EXEC_PAT,
            vgpr={**v64(0, A64), **v64(2, B64), 4: SENTINEL, 5: SENTINEL})
    active = lanes_of(EXEC_PAT)
    total = [int(a) + int(b) for a, b in zip(A64, B64)]
    expected = np.array([t & M64 for t in total], np.uint64)
    carries = np.array([t >> 64 for t in total], bool)
    assert (vreg64(w, 4)[active] == expected[active]).all()
    assert (w.V[0, 4][~active] == SENTINEL).all() and (w.V[0, 5][~active] == SENTINEL).all()
    assert hex(sreg64(w, carry_reg)) == hex(mask_of(carries & active))      # inactive lanes' bits are 0
    if form == "e64":
        lo_carry = np.array([(int(a) & M32) + (int(b) & M32) > M32 for a, b in zip(A64, B64)])
        assert hex(sreg64(w, 10)) == hex(mask_of(lo_carry & active))


MAD_U64 = [   # a, b, c, D, carry
    (0xFFFFFFFF, 0xFFFFFFFF, M64, 0xFFFF_FFFE_0000_0000, 1),
    (0xFFFFFFFF, 0xFFFFFFFF, (1 << 33) - 1, 0, 1),
    (2, 3, 4, 10, 0),
    (0x80000000, 2, 0, 0x1_0000_0000, 0),
    (0xFFFFFFFF, 0xFFFFFFFF, 0, 0xFFFF_FFFE_0000_0001, 0),
]
MAD_I64 = [   # a, b, c, D as int64 (carry checked only where the ISA's 65-bit rule and plain overflow agree)
    (-1, 5, 0, -5, None),
    (-3, 7, 100, 79, 0),
    (-(1 << 31), -(1 << 31), (1 << 63) - 1, (1 << 62) + (1 << 63) - 1 - (1 << 64), None),
    (0x7FFFFFFF, 0x7FFFFFFF, -(1 << 62), -(1 << 32) + 1, None),
    (3, -4, -1, -13, None),
]


@pytest.mark.parametrize("signed", [False, True])
def test_v_mad_64_32(signed):
    cases = MAD_I64 if signed else MAD_U64
    n = len(cases)
    a = u32([x[0] & M32 for x in cases] + [0] * (64 - n))
    b = u32([x[1] & M32 for x in cases] + [0] * (64 - n))
    c = np.array([x[2] & M64 for x in cases] + [0] * (64 - n), np.uint64)
    op = I.v_mad_i64_i32 if signed else I.v_mad_u64_u32
    w = run(op(v[4:5], s[10:11], v[0], v[1], v[2:3]), sgpr=s64(10, M64), vgpr={0: a, 1: b, **v64(2, c)},
            exec_mask=(1 << n) - 1)
    got = vreg64(w, 4)
    carry = lanes_of(sreg64(w, 10))
    assert not carry[n:].any()                               # inactive lanes: 0
    for i, (_, _, _, d, cy) in enumerate(cases):
        assert hex(int(got[i])) == hex(d & M64), cases[i]
        if cy is not None:
            assert carry[i] == bool(cy), cases[i]


@pytest.mark.parametrize("value,shift,d", [
    (0x8000_0000_0000_0001, 1, 2), (M64, 4, 0xFFFF_FFFF_FFFF_FFF0), (0xFFFF_FFFF, 32, 0xFFFF_FFFF_0000_0000),
    (0x1_8000_0001, 31, 0xC000_0000_8000_0000), (1, 63, 1 << 63), (0x1234, 64, 0x1234), (0x1234, 0, 0x1234),
])
def test_v_lshlrev_b64(value, shift, d):
    w = run(I.v_lshlrev_b64(v[4:5], v[0], v[2:3]), vgpr={0: shift, **v64(2, np.full(64, value, np.uint64))})
    assert hex(int(vreg64(w, 4)[0])) == hex(d)


@pytest.mark.parametrize("a,shift,c,d", [
    (0xFFFF_FFFF, 3, 8, 0x8_0000_0000),
    (M64, 4, (-8) & M64, 0xFFFF_FFFF_FFFF_FFE8),          # negative operands wrap mod 2^64
    (0x4000_0000_0000_0001, 2, 1, 5),
    (1, 9, 0, 2),                                          # shift is S1[2:0]
])
def test_v_lshl_add_u64(a, shift, c, d):
    w = run(I.v_lshl_add_u64(v[4:5], v[0:1], v[6], v[2:3]),
            vgpr={**v64(0, np.full(64, a, np.uint64)), **v64(2, np.full(64, c, np.uint64)), 6: shift})
    assert hex(int(vreg64(w, 4)[0])) == hex(d)


def test_v_mov_b64():
    w = run(I.v_mov_b64_e32(v[2:3], v[0:1]), vgpr={**v64(0, A64), 2: SENTINEL, 3: SENTINEL}, exec_mask=EXEC_PAT)
    active = lanes_of(EXEC_PAT)
    assert (vreg64(w, 2)[active] == A64[active]).all()
    assert (w.V[0, 2][~active] == SENTINEL).all() and (w.V[0, 3][~active] == SENTINEL).all()


# ---------------------------------------------------------------- compares
F_A = np.resize(np.array([NAN, 1.0, INF, -NAN, -0.0, 1.0, 2.0, -INF], np.float32), 64)
F_B = np.resize(np.array([1.0, NAN, -INF, 0.0, 0.0, 1.0, NAN, -INF], np.float32), 64)
F_A.view(np.uint32)[5::8] = 0x7F800001                      # a signalling NaN


CMP32 = [
    ("v_cmp_eq_u32", A, B, A == B),
    ("v_cmp_gt_u32", A, B, A > B),
    ("v_cmp_gt_i32", A, B, A.view(np.int32) > B.view(np.int32)),
    ("v_cmp_u_f32", F_A.view(np.uint32), F_B.view(np.uint32), np.isnan(F_A) | np.isnan(F_B)),
]


@pytest.mark.parametrize("form", ["e32", "e64"])
@pytest.mark.parametrize("opcode,a,b,expected", CMP32, ids=[c[0] for c in CMP32])
def test_vopc_32(opcode, a, b, expected, form):
    """e32 writes VCC, e64 an SGPR pair; bits of inactive lanes are 0 whatever the compare gives."""
    if form == "e32":
        ins, dst = getattr(I, opcode + "_e32")(v[0], v[1]), 106
    else:
        ins, dst = getattr(I, opcode + "_e64")(s[4:5], v[0], v[1]), 4
    w = run(ins, sgpr={**s64(106, M64), **s64(4, M64)}, vgpr={0: a, 1: b}, exec_mask=EXEC_PAT)
    assert hex(sreg64(w, dst)) == hex(mask_of(expected & lanes_of(EXEC_PAT)))
    assert expected.any() and (expected & ~lanes_of(EXEC_PAT)).any()      # the test can tell


def test_v_cmp_eq_u64():
    other = A64.copy()
    other[1::3] ^= np.uint64(1 << 40)                      # differ only in the high dword
    other[2::5] ^= np.uint64(1)
    w = run(I.v_cmp_eq_u64_e32(v[0:1], v[2:3]), sgpr=s64(106, M64), vgpr={**v64(0, A64), **v64(2, other)},
            exec_mask=EXEC_PAT)
    assert hex(sreg64(w, 106)) == hex(mask_of((A64 == other) & lanes_of(EXEC_PAT)))


# ================================================================ cross-lane
def test_v_readfirstlane_b32():
    vals = {0: LANE * 3 + 1000}
    assert run(I.v_readfirstlane_b32_e32(v[4], v[0]), vgpr=vals, exec_mask=M64 & ~0b111).S[0, 4] == 1009  # lane 3
    assert run(I.v_readfirstlane_b32_e32(v[4], v[0]), vgpr=vals, exec_mask=1 << 63).S[0, 4] == 1189
    assert run(I.v_readfirstlane_b32_e32(v[4], v[0]), vgpr=vals, exec_mask=0).S[0, 4] == 1000   # EXEC 0: lane 0


@pytest.mark.parametrize("lane_sel,lane", [(37, 37), (64 + 5, 5), (0, 0)])
def test_v_readlane_b32(lane_sel, lane):
    w = run(I.v_readlane_b32(v[4], v[0], s[5]), I.v_readlane_b32(v[6], v[0], 17),
            sgpr={5: lane_sel}, vgpr={0: LANE * 3 + 1000}, exec_mask=0b10)   # EXEC does not matter
    assert (w.S[0, 4], w.S[0, 6]) == (1000 + 3 * lane, 1051)


def test_v_mbcnt():
    mask = 0x0000_FFFF_AAAA_AAAA
    w = run(I.v_mbcnt_lo_u32_b32(v[1], -1, 0), I.v_mbcnt_hi_u32_b32(v[1], -1, v[1]),
            I.v_mbcnt_lo_u32_b32(v[2], s[4], s[6]), I.v_mbcnt_hi_u32_b32(v[2], s[5], v[2]),
            sgpr={**s64(4, mask), 6: 100})
    assert (w.V[0, 1] == LANE).all()                                   # the lane id idiom
    expected = [100 + bin(mask & ((1 << i) - 1)).count("1") for i in range(64)]
    assert w.V[0, 2].tolist() == expected


SWIZZLE = [
    (0x041F, lambda i: i ^ 1),                           # bit-mask mode: swap neighbours
    (0x7C1F, lambda i: i ^ 31),                          # reverse each 32-lane half
    (0x00A0, lambda i: (i & 32) | 5),                    # broadcast lane 5 of each half
    (0x0078, lambda i: (i & ~7) | 3),                    # broadcast lane 3 of each group of 8
    (0x001F, lambda i: i),                               # identity
    (0x801B, lambda i: (i & ~3) | (3 - (i & 3))),        # quad-permute mode: reverse each quad
    (0x80AA, lambda i: (i & ~3) | 2),                    # quad-permute: broadcast lane 2 of each quad
]


@pytest.mark.parametrize("offset,source", SWIZZLE, ids=[hex(o) for o, _ in SWIZZLE])
def test_ds_swizzle_b32(offset, source):
    w = run(I.ds_swizzle_b32(vdst=v[1], addr=v[0], offset0=offset & 0xFF, offset1=offset >> 8),
            vgpr={0: LANE * 10 + 7, 1: SENTINEL})
    assert w.V[0, 1].tolist() == [source(i) * 10 + 7 for i in range(64)]


def test_ds_swizzle_b32_exec():
    w = run(I.ds_swizzle_b32(vdst=v[1], addr=v[0], offset0=0x1F, offset1=0x04 << 2),  # xor 4 (0x101F)
            vgpr={0: LANE * 10 + 7, 1: SENTINEL}, exec_mask=0xFF)
    assert w.V[0, 1][:8].tolist() == [(i ^ 4) * 10 + 7 for i in range(8)]
    assert (w.V[0, 1][8:] == SENTINEL).all()


@pytest.mark.parametrize("addr,offset,source", [
    (((LANE + 1) % 64) * 4, 0, (LANE + 1) % 64),         # rotate by one lane
    (LANE * 4 + 256 * (LANE % 3), 0, LANE),              # address bits above the lane are ignored
    (LANE * 4 + 3, 0, LANE),                             # byte address / 4, rounded down
    (LANE * 4, 8, (LANE + 2) % 64),                      # the instruction offset adds in
    (np.full(64, 17 * 4), 0, np.full(64, 17)),           # broadcast
])
def test_ds_bpermute_b32(addr, offset, source):
    w = run(I.ds_bpermute_b32(vdst=v[2], addr=v[0], data0=v[1], offset0=offset),
            vgpr={0: addr, 1: LANE * 10 + 7, 2: SENTINEL})
    assert w.V[0, 2].tolist() == (source * 10 + 7).tolist()


def test_ds_bpermute_b32_exec():
    """Inactive source lanes read as 0; inactive destination lanes keep their value."""
    even = mask_of(LANE % 2 == 0)
    w = run(I.ds_bpermute_b32(vdst=v[2], addr=v[0], data0=v[1]), I.ds_bpermute_b32(vdst=v[3], addr=v[4], data0=v[1]),
            vgpr={0: (LANE ^ 1) * 4, 4: ((LANE + 2) % 64) * 4, 1: LANE * 10 + 7, 2: SENTINEL, 3: SENTINEL},
            exec_mask=even)
    ev = LANE % 2 == 0
    assert (w.V[0, 2][ev] == 0).all() and (w.V[0, 2][~ev] == SENTINEL).all()
    assert (w.V[0, 3][ev] == ((LANE[ev] + 2) % 64) * 10 + 7).all() and (w.V[0, 3][~ev] == SENTINEL).all()


@pytest.mark.parametrize("width", [16, 32])
def test_v_permlane_swap(width):
    """Per 2*width lanes: SRC0's lower `width` lanes trade places with VDST's upper `width` lanes."""
    op = I.v_permlane16_swap_b32_e32 if width == 16 else I.v_permlane32_swap_b32_e32
    w = run(op(v[0], v[1]), vgpr={0: LANE + 100, 1: LANE + 200}, arch="gfx950")
    lower = (LANE % (2 * width)) < width
    assert w.V[0, 1].tolist() == np.where(lower, LANE + width + 100, LANE + 200).tolist()
    assert w.V[0, 0].tolist() == np.where(lower, LANE + 100, LANE - width + 200).tolist()


def test_v_permlane32_swap_same_register():
    """VDST == SRC0: the pseudocode's swap exchanges the two halves of the register."""
    w = run(I.v_permlane32_swap_b32_e32(v[0], v[0]), vgpr={0: LANE}, arch="gfx950")
    assert w.V[0, 0].tolist() == ((LANE + 32) % 64).tolist()


# ================================================================ LDS and s_barrier
def test_lds_write_write2_read_b128():
    mask = EXEC_PAT
    active = lanes_of(mask)
    w = run(I.ds_write2_b32(addr=v[0], data0=v[1], data1=v[2], offset0=1, offset1=5),     # dwords 1 and 5
            I.ds_write_b32(addr=v[0], data0=v[3], offset0=8),                            # byte offset 8: dword 2
            I.ds_read_b128(vdst=v[4:7], addr=v[0]),
            I.ds_read_b128(vdst=v[8:11], addr=v[0], offset0=16),
            lds_bytes=64 * 32, exec_mask=mask,
            vgpr={0: LANE * 32, 1: LANE + 0x100, 2: LANE + 0x200, 3: LANE + 0x300,
                  **{r: SENTINEL for r in range(4, 12)}})
    got = np.stack([w.V[0, r] for r in range(4, 12)], axis=1)        # (64, 8)
    expected = np.stack([0 * LANE, LANE + 0x100, LANE + 0x300, 0 * LANE, 0 * LANE, LANE + 0x200, 0 * LANE, 0 * LANE], 1)
    assert (got[active] == expected[active]).all()
    assert (got[~active] == SENTINEL).all()
    lds = w.lds[0].view(np.uint32).reshape(64, 8)
    assert (lds[active] == expected[active]).all() and (lds[~active] == 0).all()   # masked lanes wrote nothing


def test_lds_16bit_offset_and_bounds():
    w = run(I.ds_write_b32(addr=v[0], data0=v[1], offset0=0x04, offset1=0x01),       # byte offset 0x104
            I.ds_read_b128(vdst=v[4:7], addr=v[0], offset0=0x00, offset1=0x01),
            lds_bytes=0x110, vgpr={0: 0, 1: 0xABCD}, exec_mask=1)
    assert w.V[0, 4:8, 0].tolist() == [0, 0xABCD, 0, 0]
    with pytest.raises(EmulatorFault, match="outside the workgroup's 272-byte LDS"):
        run(I.ds_read_b128(vdst=v[4:7], addr=v[0], offset0=0x04, offset1=0x01), lds_bytes=0x110, exec_mask=1)


def _producer_consumer(barrier: bool, waves: int):
    """Wave 0 writes LDS then reaches s_barrier; the others reach their s_barrier first (lower PC), then read."""
    sync = [I.s_barrier()] if barrier else []
    reader = [*sync, I.ds_read_b32(vdst=v[1], addr=v[0]), I.s_endpgm()]
    writer = [I.s_nop(0), I.ds_write_b32(addr=v[0], data0=v[3]), *sync]
    return run(I.s_cmp_eq_u32(s[0], 0), I.s_cbranch_scc1(words(*reader)), *reader, *writer,
               waves=waves, lds_bytes=256, sgpr={0: list(range(waves))},
               vgpr={0: LANE * 4, 1: SENTINEL, 3: LANE + 1000})


@pytest.mark.parametrize("waves", [2, 4])
def test_s_barrier_orders_lds_between_waves(waves):
    w = _producer_consumer(barrier=True, waves=waves)
    for wave in range(1, waves):
        assert (w.V[wave, 1] == LANE + 1000).all()


def test_lds_race_without_barrier_is_a_fault():
    with pytest.raises(EmulatorFault, match="LDS race"):
        _producer_consumer(barrier=False, waves=2)


# ================================================================ memory
@pytest.mark.parametrize("opcode,count", [("s_load_dword", 1), ("s_load_dwordx2", 2), ("s_load_dwordx4", 4),
                                          ("s_load_dwordx8", 8), ("s_load_dwordx16", 16)])
def test_s_load(opcode, count):
    buf = (np.arange(32, dtype=np.uint32) * 0x01010101 + 0x100).astype(np.uint32)
    w = run(getattr(I, opcode)(sdata=s[20:20 + count - 1] if count > 1 else s[20], sbase=s[0:1], offset=12, imm=1),
            sgpr={**s64(0, buf.ctypes.data), 20 + count: 0xEEEE}, memory=memory(kernarg=buf))
    assert w.S[0, 20:20 + count].tolist() == buf[3:3 + count].tolist()
    assert w.S[0, 20 + count] == 0xEEEE


def _buffer_load(opcode, nvals, stride, num_records, exec_mask=M64):
    src_buf = (np.arange(16 * 64, dtype=np.uint32) * 7 + 0x10000).astype(np.uint32)
    dst = v[4:4 + nvals - 1] if nvals > 1 else v[4]
    w = run(getattr(I, opcode)(vdata=dst, vaddr=v[0], srsrc=s[8:11], soffset=0, offen=1),
            sgpr=rsrc(src_buf, num_records), vgpr={0: LANE * stride, **{4 + j: SENTINEL for j in range(nvals)}},
            memory=memory(src=src_buf), exec_mask=exec_mask)
    return w, src_buf


@pytest.mark.parametrize("opcode,n,num_records,cut_lane,cut_n", [
    ("buffer_load_dword", 1, 40, 10, 0),           # lanes 0-9 in range
    ("buffer_load_dwordx3", 3, 12 * 2 + 4, 2, 1),  # lane 2: 1 of 3 dwords in range
    ("buffer_load_dwordx4", 4, 16 * 3 + 8, 3, 2),  # lane 3: 2 of 4 dwords in range
])
def test_buffer_load_num_records_cut(opcode, n, num_records, cut_lane, cut_n):
    """Each dword is range-checked on its own: out-of-range ones read 0; inactive lanes are not written."""
    mask = M64 & ~(1 << 1)
    w, buf = _buffer_load(opcode, n, 4 * n, num_records, exec_mask=mask)
    for lane in range(64):
        got = [int(w.V[0, 4 + j][lane]) for j in range(n)]
        if lane == 1:
            assert got == [SENTINEL] * n
        elif lane < cut_lane:
            assert got == buf[lane * n:lane * n + n].tolist(), lane
        elif lane == cut_lane:
            assert got == buf[lane * n:lane * n + cut_n].tolist() + [0] * (n - cut_n), lane
        else:
            assert got == [0] * n, lane


def test_buffer_load_ushort():
    halves = np.array([0x8001 + 0x1111 * i for i in range(8)] + [0xFFFF] * 56, np.uint16)
    w = run(I.buffer_load_ushort(vdata=v[4], vaddr=v[0], srsrc=s[8:11], soffset=0, offen=1),
            sgpr=rsrc(halves, 10), vgpr={0: LANE * 2, 4: SENTINEL}, memory=memory(src=halves))
    assert w.V[0, 4][:5].tolist() == halves[:5].tolist()         # zero-extended (no sign extension)
    assert (w.V[0, 4][5:] == 0).all()                            # offset + 2 > num_records: 0


def test_buffer_address_composition():
    """address = base + vgpr offset + instruction offset + soffset (all in range here)."""
    buf = (np.arange(256, dtype=np.uint32) + 0x500).astype(np.uint32)
    w = run(I.buffer_load_dword(vdata=v[4], vaddr=v[0], srsrc=s[8:11], soffset=s[12], offset=8, offen=1),
            I.buffer_load_dword(vdata=v[5], vaddr=v[0], srsrc=s[8:11], soffset=0, offset=0, offen=0),
            sgpr={**rsrc(buf, buf.nbytes), 12: 16}, vgpr={0: LANE * 4}, memory=memory(src=buf))
    assert w.V[0, 4].tolist() == buf[LANE + 6].tolist()          # 8 + 16 bytes = 6 dwords
    assert (w.V[0, 5] == buf[0]).all()                           # offen=0: the VGPR is not added


@pytest.mark.parametrize("opcode,n,num_records,cut_lane,cut_n", [
    ("buffer_store_dword", 1, 40, 10, 0),
    ("buffer_store_dwordx2", 2, 8 * 3 + 4, 3, 1),
    ("buffer_store_dwordx4", 4, 16 * 2 + 12, 2, 3),
])
def test_buffer_store_num_records_cut(opcode, n, num_records, cut_lane, cut_n):
    """Out-of-range dwords are dropped (the host buffer is larger, so a missed check would show)."""
    dst = np.full(4 * 64, 0xEEEEEEEE, np.uint32)
    data = v[4:4 + n - 1] if n > 1 else v[4]
    mask = M64 & ~(1 << 1)
    run(getattr(I, opcode)(vdata=data, vaddr=v[0], srsrc=s[8:11], soffset=0, offen=1),
        sgpr=rsrc(dst, num_records), vgpr={0: LANE * 4 * n, **{4 + j: LANE * 16 + j for j in range(n)}},
        memory=memory(dst=dst), exec_mask=mask)
    expected = np.full(4 * 64, 0xEEEEEEEE, np.uint32)
    for lane in range(cut_lane + 1):
        if lane != 1:                                              # lane 1 is inactive
            k = n if lane < cut_lane else cut_n
            expected[lane * n:lane * n + k] = [lane * 16 + j for j in range(k)]
    assert [hex(x) for x in dst] == [hex(x) for x in expected]


def test_buffer_store_short():
    dst = np.full(64, 0xEEEE, np.uint16)
    run(I.buffer_store_short(vdata=v[1], vaddr=v[0], srsrc=s[8:11], soffset=0, offen=1),
        sgpr=rsrc(dst, 10), vgpr={0: LANE * 2, 1: 0xABCD0000 | LANE}, memory=memory(dst=dst), exec_mask=M64 & ~1)
    assert dst.tolist() == [0xEEEE, 1, 2, 3, 4] + [0xEEEE] * 59    # low half stored; lane 0 inactive; 5+ cut


@pytest.mark.parametrize("opcode", ["buffer_load_dword", "buffer_store_dword"])
def test_buffer_access_outside_registered_buffers_faults(opcode):
    """In range of the descriptor but past the only registered buffer: a fault naming that buffer."""
    buf = np.zeros(16, np.uint32)
    with pytest.raises(EmulatorFault, match=rf"{opcode}.*lane 16.*nearest buffer 'rowbuf'.*4 byte\(s\) past its end"):
        run(getattr(I, opcode)(vdata=v[1], vaddr=v[0], srsrc=s[8:11], soffset=0, offen=1),
            sgpr=rsrc(buf, 4096), vgpr={0: LANE * 4, 1: LANE + 1}, memory=memory(rowbuf=buf))


@pytest.mark.parametrize("saddr", ["off", "sgpr"])
def test_global_atomic_add_f32(saddr):
    cells = np.array([0.5, 0.0, -1.0, 2.0 ** -149], np.float32)
    base = cells.ctypes.data
    mask = M64 & ~(1 << 2) & ~(1 << 7)                     # lanes 2 and 7 inactive
    if saddr == "off":
        addrs = np.full(64, base, np.uint64) + np.uint64(4) * (LANE % 4).astype(np.uint64)
        ins, regs, sg = I.global_atomic_add_f32(addr=v[0], data=v[2], saddr=OFF), v64(0, addrs), {}
    else:
        ins, regs, sg = I.global_atomic_add_f32(addr=v[0], data=v[2], saddr=s[4:5]), {0: (LANE % 4) * 4}, s64(4, base)
    run(ins, sgpr=sg, vgpr={**regs, 2: np.float32(1.0)}, memory=memory(cells=cells), exec_mask=mask)
    assert cells.tolist() == [0.5 + 16, 16.0, -1.0 + 15, 15.0 + 2.0 ** -149]


@pytest.mark.parametrize("opcode, expected", [
    ("global_load_ushort", [0x8001, 0x0002, 0xFFFF]), ("global_load_sshort", [0xFFFF8001, 0x0002, 0xFFFFFFFF]),
    ("global_load_ubyte", [0x01, 0x80, 0x02]), ("global_load_sbyte", [0x01, 0xFFFFFF80, 0x02]),
])
def test_global_load_sub_dword_extends_to_the_dword(opcode, expected):
    """ushort/ubyte zero-extend, sshort/sbyte sign-extend (f16/bf16 kernels load through pointers this way);
    inactive lanes keep their register."""
    halves = np.array([0x8001, 0x0002, 0xFFFF, 0], np.uint16)
    step = 2 if "short" in opcode else 1
    w = run(getattr(I, opcode)(vdst=v[4], addr=v[0], saddr=s[2:3]), sgpr=s64(2, halves.ctypes.data),
            vgpr={0: (LANE % 3) * step, 4: SENTINEL}, memory=memory(halves=halves), exec_mask=M64 & ~(1 << 5))
    assert w.V[0, 4][:3].tolist() == expected and int(w.V[0, 4][5]) == SENTINEL


@pytest.mark.parametrize("opcode, size, shift", [("global_store_short", 2, 0), ("global_store_short_d16_hi", 2, 16),
                                                 ("global_store_byte", 1, 0), ("global_store_byte_d16_hi", 1, 16)])
def test_global_store_sub_dword_stores_its_part_of_the_dword(opcode, size, shift):
    dst = np.full(64 * 2, 0xEE, np.uint8)
    run(getattr(I, opcode)(addr=v[0], data=v[1], saddr=s[2:3]), sgpr=s64(2, dst.ctypes.data),
        vgpr={0: LANE * size, 1: (0xABCD0000 | (LANE << 8) | LANE).astype(np.uint32)}, memory=memory(dst=dst),
        exec_mask=M64 & ~1)
    word = (0xABCD0000 | (LANE << 8) | LANE) >> shift
    expected = np.full(64 * 2, 0xEE, np.uint8)
    for lane in range(1, 64):                                     # lane 0 inactive: its bytes untouched
        expected[lane * size:(lane + 1) * size] = [(int(word[lane]) >> (8 * b)) & 0xFF for b in range(size)]
    assert dst.tolist() == expected.tolist()


def test_global_atomic_outside_buffers_faults():
    cells = np.zeros(4, np.float32)
    with pytest.raises(EmulatorFault, match=r"global_atomic_add_f32.*nearest buffer 'cells'"):
        run(I.global_atomic_add_f32(addr=v[0], data=v[2], saddr=s[4:5]), sgpr=s64(4, cells.ctypes.data),
            vgpr={0: LANE * 4, 2: np.float32(1.0)}, memory=memory(cells=cells))


def test_scratch_is_per_lane_and_exec_masked():
    odd = mask_of(LANE % 2 == 1)
    w = run(I.scratch_store_dword(addr=v[0], data=v[1], saddr=OFF, sve=1, offset=4),
            I.s_mov_b64(EXEC, s[4:5]),
            I.scratch_store_dword(addr=v[0], data=v[5], saddr=OFF, sve=1, offset=4),
            I.s_mov_b64(EXEC, -1),
            I.scratch_load_dword(vdst=v[2], addr=v[0], saddr=OFF, sve=1, offset=4),
            I.scratch_load_dword(vdst=v[3], addr=v[0], saddr=OFF, sve=1, offset=0),
            I.scratch_load_dword(vdst=v[6], addr=v[7], saddr=OFF, sve=1, offset=0),
            scratch_bytes=16, sgpr=s64(4, odd), vgpr={0: 0, 1: LANE * 3 + 7, 5: 99, 7: 4})
    assert w.V[0, 2].tolist() == np.where(LANE % 2 == 1, 99, LANE * 3 + 7).tolist()
    assert (w.V[0, 3] == 0).all()
    assert (w.V[0, 6] == w.V[0, 2]).all()                  # same private address through the VGPR


# ================================================================ faults
def test_opcode_without_handler_is_a_fault_naming_it():
    with pytest.raises(EmulatorFault, match="v_sin_f32.*no handler"):
        run(I.v_sin_f32_e32(v[1], v[0]))

"""Whole-batch fast paths for the commonest vector ALU, cross-lane and buffer instructions.

Most steps of a LayerNorm kernel are a plain VALU instruction executed by every wave of the batch with every lane
active. For those the general handler's work (operand decoding, the SDWA/DPP/modifier tests, the EXEC mask, the
masked write) is the same every time; what is left is the arithmetic on whole register rows. `plan` builds, once
per decoded instruction, a closure that does exactly that on the register file (`Waves.R`, register-major: row r is
register r of every wave, contiguous) and the SGPRs.

The scheduler uses a plan only when the step holds every wave of the batch and every lane of each is active
(`Waves.all_lanes_active`); any other step runs the general handler. A plan computes with the same numpy
expressions (ops_vector's tables, the same fused multiply-add) on operands of the same dtypes, so its results are
the handler's bit for bit; `tests/test_emu_fastpath.py` runs every planned opcode both ways on random bits.
Instructions with a modifier set, an SDWA or DPP form, an AGPR operand or an operand the plan does not know (SCC,
64-bit constants) get no plan.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Callable

import numpy as np

from lnbench.emu import native
from lnbench.emu import ops_vector as vec
from lnbench.emu.decode import AGPR, Instr
from lnbench.emu.errors import EmulatorFault
from lnbench.emu.fastpath_buffer import plan_buffer
from lnbench.emu.fastpath_lds import PAIRED, plan_lds
from lnbench.emu.fastpath_types import Operand, Plan
from lnbench.emu.ops_memory import _DS_READS, _DS_WRITES, BUF_LOADS, BUF_STORES
from lnbench.emu.registry import NEUTRAL
from lnbench.emu.semantics import form_of
from lnbench.emu.ops_crosslane import swizzle_source_lanes
from lnbench.emu.state import Waves, inline_const32

if TYPE_CHECKING:
    from lnbench.emu.profile import LaunchProfile

U32, F32 = np.uint32, np.float32


def _neutral(ins: Instr, allowed: frozenset[str] = frozenset()) -> bool:
    """Every modifier field of `ins` (but `allowed`) holds its neutral value."""
    for name, value in ins.f.items():
        if name in NEUTRAL and name not in allowed and value != NEUTRAL[name]:
            return False
    return True


def _reader(ins: Instr, code: int, kind: str = "b32") -> tuple[Operand, int] | None:
    """A reader of a 32-bit source's bits as uint32 lanes ((n, 64) for a VGPR, (n, 1) for an SGPR, (1, 1) for a
    constant) and the register row it reads (-1: none), as Step.vval gives them; None where the plan does not
    apply (AGPRs, SCC, unknown codes)."""
    if 256 <= code < AGPR:
        r = code - 256
        return (lambda R, S: R[r]), r
    if code < 128:
        return (lambda R, S: S[:, code, None]), -1
    try:
        value = inline_const32(code, kind, ins.literal)
    except EmulatorFault:
        return None
    const = np.full((1, 1), value, U32)
    const.flags.writeable = False
    return (lambda R, S: const), -1


def _signed(read: Operand, absolute: bool, negate: bool) -> Operand:
    """fsrc's abs and neg modifiers on the bits (abs first), then the float32 view."""
    if absolute and negate:
        return lambda R, S: ((read(R, S) & U32(0x7FFFFFFF)) ^ U32(0x80000000)).view(F32)
    if absolute:
        return lambda R, S: (read(R, S) & U32(0x7FFFFFFF)).view(F32)
    if negate:
        return lambda R, S: (read(R, S) ^ U32(0x80000000)).view(F32)
    return lambda R, S: read(R, S).view(F32)


def _sources(ins: Instr, count: int, dtype: type) -> tuple[list[Operand], int] | None:
    codes = vec.instr_src_codes(ins)
    if len(codes) < count:
        return None
    readers, top = [], -1
    for i, code in enumerate(codes[:count]):
        got = _reader(ins, code, "f32" if dtype is F32 else "b32")
        if got is None:
            return None
        read, row = got
        if dtype is F32:
            read = _signed(read, bool((ins.f.get("abs", 0) >> i) & 1), bool((ins.f.get("neg", 0) >> i) & 1))
        readers.append(read)
        top = max(top, row)
    return readers, top


def _dest(ins: Instr) -> int | None:
    d = ins.f.get("vdst")
    return d - 256 if d is not None and 256 <= d < AGPR else None


def _write(R: np.ndarray, d: int, value: np.ndarray) -> None:
    np.copyto(R[d], value, casting="unsafe")


#: the binary ops that are one numpy ufunc on the operands as they are (swapped: the `rev` forms), run straight into
#: the destination row: the same ufunc loop as INT_BINARY's / FLOAT_BINARY's expression, without the temporary
UFUNCS: dict[str, tuple[np.ufunc, bool]] = {
    "v_add_u32": (np.add, False), "v_sub_u32": (np.subtract, False), "v_subrev_u32": (np.subtract, True),
    "v_and_b32": (np.bitwise_and, False), "v_or_b32": (np.bitwise_or, False), "v_xor_b32": (np.bitwise_xor, False),
    "v_mul_lo_u32": (np.multiply, False), "v_max_u32": (np.maximum, False), "v_min_u32": (np.minimum, False),
    "v_add_f32": (np.add, False), "v_sub_f32": (np.subtract, False), "v_subrev_f32": (np.subtract, True),
    "v_mul_f32": (np.multiply, False), "v_max_f32": (np.fmax, False), "v_min_f32": (np.fmin, False),
}


def _plan_ufunc(ins: Instr, dtype: type) -> Plan | None:
    """UFUNCS[ins.name] on the two sources, its output the destination row (its float32 view for float ops)."""
    got, d = _sources(ins, 2, dtype), _dest(ins)
    if got is None or d is None:
        return None
    (a, b), top = got
    ufunc, swapped = UFUNCS[ins.name]
    if swapped:
        a, b = b, a
    view = dtype is F32

    def run(w: Waves, _profile: LaunchProfile) -> None:
        R, S = w.R, w.S
        ufunc(a(R, S), b(R, S), out=R[d].view(F32) if view else R[d])
    return run, max(top, d)


def _plan_elementwise(ins: Instr, fn: Callable[..., np.ndarray], count: int, dtype: type) -> Plan | None:
    got, d = _sources(ins, count, dtype), _dest(ins)
    if got is None or d is None:
        return None
    ops, top = got
    if count == 1:
        (a,) = ops
        return (lambda w, _profile: _write(w.R, d, fn(a(w.R, w.S)))), max(top, d)
    if count == 2:
        a, b = ops
        return (lambda w, _profile: _write(w.R, d, fn(a(w.R, w.S), b(w.R, w.S)))), max(top, d)
    a, b, c = ops
    return (lambda w, _profile: _write(w.R, d, fn(a(w.R, w.S), b(w.R, w.S), c(w.R, w.S)))), max(top, d)


def _float(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """fout's conversion of a float result (no omod, no clamp) to the bits written."""
    return lambda *xs: np.asarray(fn(*xs), F32).view(U32)


def _plan_packed(ins: Instr) -> Plan | None:
    """v_pk_{add,mul,fma}_f32 (ops_vector.v_pk_f32): each source a VGPR pair, SGPR pair or constant, op_sel/op_sel_hi
    picking its dword for each half, neg/neg_hi flipping the sign."""
    f = ins.f
    if not _neutral(ins, frozenset({"opsel", "neg", "neg_hi"})) or f.get("clmp", 0):
        return None
    n = 3 if ins.name == "v_pk_fma_f32" else 2
    opsel, opsel_hi = f.get("opsel", 0), f.get("opsel_hi", 0) | (f.get("opsel_hi2", 0) << 2)
    los: list[Operand] = []
    his: list[Operand] = []
    top = -1
    for i in range(n):
        code = f[("src0", "src1", "src2")[i]]
        if 256 <= code < AGPR - 1 or code < 127:        # a VGPR pair, an SGPR pair: its two dwords
            first, second = _reader(ins, code), _reader(ins, code + 1)
        elif 128 <= code < 256:                         # a constant: both halves the same 32 bits
            first = second = _reader(ins, code, "f32")
        else:
            return None
        if first is None or second is None:
            return None
        top = max(top, first[1], second[1])
        words = (first[0], second[0])
        los.append(_signed(words[(opsel >> i) & 1], False, bool((f.get("neg", 0) >> i) & 1)))
        his.append(_signed(words[(opsel_hi >> i) & 1], False, bool((f.get("neg_hi", 0) >> i) & 1)))
    d = _dest(ins)
    if d is None:
        return None
    fn = vec.PACKED_F32[ins.name]
    pad = [None] * (3 - n)
    table = _fma_table(ins, [(("src0", "src1", "src2")[i]) for i in range(n)], opsel, opsel_hi, d, 2)
    address = 0 if table is None else table.ctypes.data

    def run(w: Waves, _profile: LaunchProfile, _table: np.ndarray | None = table) -> None:   # (_table: kept alive)
        if address and native.fma_rows(w.R_address, w.row_len, address, 2, w.row_scratch_address):
            return
        R, S = w.R, w.S
        lo = np.asarray(fn(*[read(R, S) for read in los], *pad), F32)
        hi = np.asarray(fn(*[read(R, S) for read in his], *pad), F32)
        np.copyto(R[d], lo.view(U32), casting="unsafe")
        np.copyto(R[d + 1], hi.view(U32), casting="unsafe")
    return run, max(top, d + 1)


def _fma_table(ins: Instr, fields: list[str], opsel: int, opsel_hi: int, d: int, halves: int) -> np.ndarray | None:
    """The native helper's row table of a fused multiply-add whose three sources are VGPRs (pairs for v_pk_fma_f32)
    without modifiers: (halves, 4) int64 rows a, b, c, destination; None otherwise (the numpy path)."""
    if ins.name not in ("v_fma_f32", "v_pk_fma_f32") or ins.f.get("neg", 0) or ins.f.get("neg_hi", 0) \
            or ins.f.get("abs", 0):
        return None
    codes = [ins.f[name] for name in fields]
    if len(codes) != 3 or not all(256 <= code < AGPR - (halves - 1) for code in codes):
        return None
    rows = [[code - 256 + ((sel >> i) & 1) for i, code in enumerate(codes)] for sel in (opsel, opsel_hi)[:halves]]
    return np.array([r + [d + h] for h, r in enumerate(rows)], np.int64)


def _fma(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return vec.fma_f32(a, b, c)


PermSource = Callable[[Waves], tuple[np.ndarray, int]]


def _perm_row(r: int) -> PermSource:
    """A VGPR source of v_perm_b32: one value per lane (lane shift 0)."""
    return lambda w: (w.R[r], 0)


def _perm_sgpr(c: int) -> PermSource:
    """An SGPR source: one value per wave of 64 lanes (lane shift 6)."""
    return lambda w: (np.ascontiguousarray(w.S[:, c]), 6)


def _perm_constant(value: np.ndarray) -> PermSource:
    """A constant source: one value for every lane (lane shift 63)."""
    return lambda _w: (value, 63)


def _plan_perm(ins: Instr) -> Plan | None:
    """v_perm_b32 in the native helper, straight into the destination row: each source a VGPR row (one value per
    lane), an SGPR (one per wave) or a constant (one in all), as the handler broadcasts them."""
    codes, d = vec.instr_src_codes(ins), _dest(ins)
    if len(codes) != 3 or d is None:
        return None
    parts: list[PermSource] = []
    top = d
    for code in codes:
        if 256 <= code < AGPR:
            parts.append(_perm_row(code - 256))
            top = max(top, code - 256)
        elif code < 128:
            parts.append(_perm_sgpr(code))
        else:
            try:
                value = np.full(1, inline_const32(code, "b32", ins.literal), U32)
            except EmulatorFault:
                return None
            parts.append(_perm_constant(value))

    def run(w: Waves, _profile: LaunchProfile) -> None:
        native.perm_b32_lanes([part(w) for part in parts], w.R[d])
    return run, top


def _plan_fma(ins: Instr) -> Plan | None:
    """v_fma_f32: the native helper on the rows when every source is a plain VGPR, else fma_f32 on the operands."""
    general = _plan_elementwise(ins, _float(_fma), 3, F32)
    d = _dest(ins)
    table = _fma_table(ins, ["src0", "src1", "src2"], 0, 0, d, 1) if d is not None else None
    if general is None or table is None:
        return general
    slow, top = general
    address = table.ctypes.data

    def run(w: Waves, _profile: LaunchProfile, _table: np.ndarray = table) -> None:   # (_table: kept alive)
        if not native.fma_rows(w.R_address, w.row_len, address, 1, w.row_scratch_address):
            slow(w, _profile)
    return run, top


def _plan_swizzle(ins: Instr) -> Plan | None:
    """ds_swizzle_b32 (ops_crosslane): every lane active, each reads its pattern's source lane of the ADDR register (in
    the native helper)."""
    a, d = ins.f.get("addr", -1), _dest(ins)
    if not 256 <= a < AGPR or d is None or not _neutral(ins):
        return None
    source = np.ascontiguousarray(swizzle_source_lanes(ins.f["offset0"] | (ins.f["offset1"] << 8)), np.int64)
    r = a - 256
    return (lambda w, _profile: native.swizzle_rows(w, r, d, source)), max(r, d)


def _plan_bpermute(ins: Instr) -> Plan | None:
    """ds_bpermute_b32 (ops_crosslane): every lane active, each reads DATA0 of lane (ADDR + offset) / 4 mod 64 (in the
    native helper)."""
    a, data, d = ins.f.get("addr", -1), ins.f.get("data0", -1), _dest(ins)
    if not (256 <= a < AGPR and 256 <= data < AGPR) or d is None or not _neutral(ins):
        return None
    offset = ins.f["offset0"] | (ins.f["offset1"] << 8)
    ra, rd = a - 256, data - 256

    return (lambda w, _profile: native.bpermute_rows(w, ra, rd, d, offset)), max(ra, rd, d)


#: the float ops planned, and the modifier fields their plans apply (fsrc's abs and neg)
FLOATS = frozenset(vec.FLOAT_BINARY) | {"v_fma_f32"}
FLOAT_SIGNS = frozenset({"neg", "abs"})


def known_operands(ins: Instr, fast: Plan | None) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """The operands the handler of a buffer or LDS instruction planned as `fast` (plan(ins)) notes on its first
    execution (RecordingStep: (code, dwords) read, written), known from the encoding, or None (the first execution
    records them). Those handlers read and write their data registers straight from the register file; the buffer
    ones read soffset as an operand. With the record known, a first execution may take the plan: on a batch of
    thousands of waves the handler costs milliseconds. tests/test_emu_fastpath.py checks it against the recording of
    every planned case."""
    if fast is None:
        return None
    if ins.name.startswith("buffer_"):
        return [(ins.f["soffset"], 1)], []
    if ins.name.startswith(("ds_read", "ds_write")):
        return [], []
    return None


#: the opcodes plan() dispatches on by name rather than through a table
SINGLES = frozenset({"v_fma_f32", "v_mov_b32", "v_perm_b32", "ds_swizzle_b32", "ds_bpermute_b32"})


def planned_opcodes() -> frozenset[str]:
    """Every opcode plan() may give a plan, from the tables it dispatches on (tests/test_emu_fastpath_semantics.py
    checks each against its handler)."""
    return (frozenset(UFUNCS) | vec.WRAP32_BINARY | frozenset(vec.INT_TERNARY) | frozenset(vec.PACKED_F32) | SINGLES
            | frozenset(BUF_LOADS) | frozenset(BUF_STORES) | frozenset(_DS_READS) | frozenset(_DS_WRITES)
            | frozenset(PAIRED))


def plan(ins: Instr) -> Plan | None:
    """The whole-batch fast path of `ins`, or None (module docstring)."""
    name, form = ins.name, form_of(ins.fmt)
    if name.startswith("buffer_"):
        return plan_buffer(ins, _reader)
    if name == "ds_swizzle_b32":
        return _plan_swizzle(ins)
    if name == "ds_bpermute_b32":
        return _plan_bpermute(ins)
    if name.startswith(("ds_read", "ds_write")):
        return plan_lds(ins)
    if form not in ("native", "vop3", "vop3p"):
        return None
    if name in vec.PACKED_F32:
        return _plan_packed(ins) if form == "vop3p" else None
    if form == "vop3p" or not _neutral(ins, FLOAT_SIGNS if name in FLOATS else frozenset()):
        return None
    if name in UFUNCS:                     # every FLOAT_BINARY op and most of WRAP32_BINARY
        return _plan_ufunc(ins, F32 if name in vec.FLOAT_BINARY else U32)
    if name in vec.WRAP32_BINARY:
        return _plan_elementwise(ins, vec.INT_BINARY[name], 2, U32)
    if name in vec.INT_TERNARY:
        return _plan_elementwise(ins, vec.INT_TERNARY[name], 3, U32)
    if name == "v_fma_f32":
        return _plan_fma(ins)
    if name == "v_mov_b32":
        return _plan_elementwise(ins, lambda a: a, 1, U32)
    if name == "v_perm_b32":
        return _plan_perm(ins)
    return None

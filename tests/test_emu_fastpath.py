"""The emulator's whole-batch fast paths (lnbench.emu.fastpath) against the general handlers, bit for bit.

Each case decodes one instruction, fills two identical batches with random register bits mixed with special floats
(signed zeros, denormals, infinities, NaNs with payloads, values that cancel), runs the handler on one and the plan
on the other, and compares every register and SGPR.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad.renderer.amd.dsl import s, v  # noqa: E402
from tinygrad.runtime.autogen.amd.cdna import ins as I  # noqa: E402

from lnbench.emu.decode import Instr, decode_at  # noqa: E402
from lnbench.emu.fastpath import plan  # noqa: E402
from lnbench.emu.profile import LaunchProfile  # noqa: E402
from lnbench.emu.memory import Memory  # noqa: E402
from lnbench.emu.semantics import bind  # noqa: E402
from lnbench.emu.state import EXEC, Step, Waves  # noqa: E402

WAVES, VGPRS = 3, 12
SPECIAL = np.array([0x00000000, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F800000, 0xFF800000,
                    0x7FC00000, 0x7FC00123, 0xFFBFFFFF, 0x7F800001, 0x3F800000, 0xBF800000, 0x3F800001,
                    0x4B800000, 0xCB800001, 0x33800000, 0x7F7FFFFF, 0x0000001F, 0x00000020], np.uint32)


def _bits(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Random uint32 with about a third taken from SPECIAL and a tenth small (shift amounts, selector bytes)."""
    out = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    pick = rng.random(shape)
    out[pick < 0.33] = rng.choice(SPECIAL, int((pick < 0.33).sum()))
    small = (pick >= 0.33) & (pick < 0.43)
    out[small] = rng.integers(0, 40, int(small.sum()))
    return out


def _batch(seed: int) -> Waves:
    rng = np.random.default_rng(seed)
    w = Waves(WAVES, VGPRS, 1, 0, 0, "gfx942")
    w.R[:] = _bits(rng, w.R.shape)
    w.S[:, :104] = _bits(rng, (WAVES, 104))
    w.S[:, EXEC] = w.S[:, EXEC + 1] = 0xFFFFFFFF
    return w


def _decoded(instr) -> Instr:
    ins = decode_at(instr.to_bytes(), 0)
    ins.run = bind(ins)
    return ins


CASES = {
    # integer, VOP2 and VOP3 forms, VGPR / SGPR / literal / inline operands
    "v_add_u32": I.v_add_u32_e32(v[3], v[0], v[1]),
    "v_add_u32 sgpr": I.v_add_u32_e32(v[3], s[7], v[1]),
    "v_add_u32 e64 sgpr": I.v_add_u32_e64(v[3], v[0], s[9]),
    "v_sub_u32 literal": I.v_sub_u32_e32(v[3], 0x12345678, v[1]),
    "v_subrev_u32": I.v_subrev_u32_e32(v[3], v[0], v[1]),
    "v_and_b32 inline": I.v_and_b32_e32(v[3], 63, v[1]),
    "v_or_b32": I.v_or_b32_e32(v[3], v[0], v[1]),
    "v_xor_b32": I.v_xor_b32_e32(v[3], v[0], v[1]),
    "v_lshlrev_b32": I.v_lshlrev_b32_e32(v[3], v[0], v[1]),
    "v_lshrrev_b32 inline": I.v_lshrrev_b32_e32(v[3], 16, v[1]),
    "v_mul_lo_u32": I.v_mul_lo_u32(v[3], v[0], v[1]),
    "v_mul_u32_u24": I.v_mul_u32_u24_e32(v[3], v[0], v[1]),
    "v_max_u32": I.v_max_u32_e32(v[3], v[0], v[1]),
    "v_min_u32 in place": I.v_min_u32_e32(v[1], v[0], v[1]),
    "v_add3_u32": I.v_add3_u32_e64(v[3], v[0], v[1], v[2]),
    "v_add3_u32 sgpr": I.v_add3_u32_e64(v[3], s[4], v[1], 5),
    "v_lshl_or_b32": I.v_lshl_or_b32(v[3], v[0], v[1], v[2]),
    "v_lshl_add_u32": I.v_lshl_add_u32_e64(v[3], v[0], 2, v[2]),
    "v_mad_u32_u24": I.v_mad_u32_u24_e64(v[3], v[0], v[1], v[2]),
    "v_and_or_b32": I.v_and_or_b32(v[3], v[0], v[1], v[2]),
    "v_or3_b32": I.v_or3_b32(v[3], v[0], v[1], v[2]),
    "v_bfe_u32": I.v_bfe_u32_e64(v[3], v[0], v[1], v[2]),
    "v_bfe_u32 inline": I.v_bfe_u32_e64(v[3], v[0], 16, 8),
    "v_perm_b32": I.v_perm_b32_e64(v[3], v[0], v[1], v[4]),
    "v_perm_b32 sgpr": I.v_perm_b32_e64(v[3], v[0], v[1], s[4]),
    "v_perm_b32 inline in place": I.v_perm_b32_e64(v[1], s[2], v[1], 12),
    "v_mov_b32": I.v_mov_b32_e32(v[3], v[0]),
    "v_mov_b32 sgpr": I.v_mov_b32_e32(v[3], s[5]),
    "v_mov_b32 literal": I.v_mov_b32_e32(v[3], 0x12345678),
    "v_mov_b32 inline float": I.v_mov_b32_e32(v[3], 0.5),
    # float, with the VOP3 sign modifiers
    "v_add_f32": I.v_add_f32_e32(v[2], v[0], v[1]),
    "v_add_f32 inline float": I.v_add_f32_e32(v[2], -4.0, v[1]),
    "v_sub_f32": I.v_sub_f32_e32(v[2], v[0], v[1]),
    "v_subrev_f32 sgpr": I.v_subrev_f32_e32(v[2], s[3], v[1]),
    "v_mul_f32": I.v_mul_f32_e32(v[2], v[0], v[1]),
    "v_mul_f32 neg": I.v_mul_f32_e64(v[2], v[0], v[1], neg=2),
    "v_add_f32 abs neg": I.v_add_f32_e64(v[2], v[0], v[1], abs=3, neg=1),
    "v_max_f32": I.v_max_f32_e32(v[2], v[0], v[1]),
    "v_min_f32": I.v_min_f32_e32(v[2], v[0], v[1]),
    "v_add_f32 in place": I.v_add_f32_e32(v[1], v[0], v[1]),
    "v_subrev_f32 in place": I.v_subrev_f32_e32(v[0], v[0], v[1]),
    "v_max_f32 e64 neg sgpr": I.v_max_f32_e64(v[2], s[3], v[1], neg=1),
    "v_xor_b32 literal in place": I.v_xor_b32_e32(v[1], 0x80000000, v[1]),
    "v_mul_lo_u32 in place": I.v_mul_lo_u32(v[0], v[0], v[0]),
    "v_fma_f32": I.v_fma_f32_e64(v[3], v[0], v[1], v[2]),
    "v_fma_f32 in place": I.v_fma_f32_e64(v[0], v[0], v[1], v[0]),
    "v_fma_f32 neg abs": I.v_fma_f32_e64(v[3], v[0], v[1], v[2], neg=5, abs=2),
    "v_fma_f32 sgpr inline": I.v_fma_f32_e64(v[3], s[2], v[1], 0.5),
    # packed f32: op_sel, op_sel_hi, neg, neg_hi, SGPR pairs, constants, a destination that is a source
    "v_pk_add_f32": I.v_pk_add_f32(v[4:5], v[0:1], v[2:3]),
    "v_pk_add_f32 neg": I.v_pk_add_f32(v[4:5], v[0:1], v[2:3], neg=2, neg_hi=2),
    "v_pk_add_f32 opsel": I.v_pk_add_f32(v[4:5], v[0:1], v[2:3], opsel=3, opsel_hi=0),
    "v_pk_mul_f32 sgpr": I.v_pk_mul_f32(v[4:5], v[4:5], s[6:7]),
    "v_pk_mul_f32 inline": I.v_pk_mul_f32(v[4:5], v[0:1], 0.5),
    "v_pk_mul_f32 opsel_hi": I.v_pk_mul_f32(v[4:5], v[0:1], v[2:3], opsel=1, opsel_hi=2, neg=1),
    "v_pk_fma_f32": I.v_pk_fma_f32(v[6:7], v[0:1], v[2:3], v[4:5]),
    "v_pk_fma_f32 in place": I.v_pk_fma_f32(v[0:1], v[2:3], v[0:1], v[0:1]),
    "v_pk_fma_f32 opsel": I.v_pk_fma_f32(v[6:7], v[0:1], v[2:3], v[4:5], opsel=5, opsel_hi=2),
    "v_pk_fma_f32 neg": I.v_pk_fma_f32(v[6:7], v[0:1], v[2:3], v[4:5], neg=4, neg_hi=1),
    "v_pk_fma_f32 sgpr": I.v_pk_fma_f32(v[6:7], v[0:1], s[8:9], v[4:5]),
    # cross-lane
    "ds_swizzle_b32 bit masks": I.ds_swizzle_b32(vdst=v[1], addr=v[0], offset0=0x1F, offset1=0x04 << 2),
    "ds_swizzle_b32 quad": I.ds_swizzle_b32(vdst=v[1], addr=v[0], offset0=0x1B, offset1=0x80),
    "ds_swizzle_b32 in place": I.ds_swizzle_b32(vdst=v[0], addr=v[0], offset0=0x41, offset1=0x00),
    "ds_bpermute_b32": I.ds_bpermute_b32(vdst=v[2], addr=v[0], data0=v[1], offset0=4, offset1=0),
    "ds_bpermute_b32 in place": I.ds_bpermute_b32(vdst=v[1], addr=v[0], data0=v[1], offset0=0, offset1=1),
}


def plan_and_handler(ins: Instr, seed: int) -> tuple[Waves, Waves, np.ndarray]:
    """One VALU or cross-lane step on two identical random batches, by the handler and by the plan: (the handler's
    batch, the plan's, the registers before)."""
    fast = plan(ins)
    assert fast is not None, f"{ins.name} gets no plan"
    run, top = fast
    assert top < VGPRS
    by_handler, by_plan = _batch(seed), _batch(seed)
    before = by_plan.R.copy()
    with np.errstate(all="ignore"):                        # (as the scheduler runs them)
        ins.run(Step(by_handler, slice(None), ins, WAVES, LaunchProfile(memory=Memory())))
        run(by_plan, LaunchProfile(memory=Memory()))
    return by_handler, by_plan, before


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_plan_matches_handler(name, seed):
    by_handler, by_plan, before = plan_and_handler(_decoded(CASES[name]), seed)
    assert not np.array_equal(before, by_plan.R) or name == "v_mov_b32", "the case changed nothing"
    np.testing.assert_array_equal(by_plan.R, by_handler.R)
    np.testing.assert_array_equal(by_plan.S, by_handler.S)


def test_nan_results_take_the_numpy_fma():
    """A NaN from the native rows sends v_pk_fma_f32 back to numpy, whose operand order decides the payload."""
    ins = _decoded(I.v_pk_fma_f32(v[6:7], v[0:1], v[2:3], v[4:5]))
    by_handler, by_plan = _batch(3), _batch(3)
    for w in (by_handler, by_plan):
        w.R[0, 0, 5] = 0x7FC00ABC                         # a quiet NaN with a payload in lane 5 of wave 0
        w.R[1, 0, 5] = 0x3F800000
    with np.errstate(all="ignore"):
        ins.run(Step(by_handler, slice(None), ins, WAVES, LaunchProfile(memory=Memory())))
        plan(ins)[0](by_plan, LaunchProfile(memory=Memory()))   # type: ignore[index]
    assert by_plan.R[6, 0, 5] == by_handler.R[6, 0, 5]
    np.testing.assert_array_equal(by_plan.R, by_handler.R)


@pytest.mark.parametrize("instr", [
    I.v_add_f32_e64(v[2], v[0], v[1], clmp=1),            # clamp
    I.v_add_f32_e64(v[2], v[0], v[1], omod=1),            # output modifier
    I.v_cvt_f32_f16_e32(v[1], v[0]),                      # an opcode without a plan
    I.v_ashrrev_i32_e32(v[3], v[0], v[1]),                # not a wrap-around 32-bit result
], ids=["clamp", "omod", "cvt", "ashr"])
def test_no_plan_where_the_handler_does_more(instr):
    assert plan(_decoded(instr)) is None


def test_all_lanes_active_follows_exec_writes():
    w = _batch(4)
    assert w.all_lanes_active()
    st = Step(w, slice(None), _decoded(I.s_mov_b64(s[0:1], 0)), WAVES, LaunchProfile(memory=Memory()))
    st.set_s64(EXEC, np.full(WAVES, 0xFFFFFFFF, np.uint64))
    assert not w.all_lanes_active()
    st.set_s(EXEC + 1, np.full(WAVES, 0xFFFFFFFF, np.uint32))
    assert w.all_lanes_active()


# ---------------------------------------------------------------- buffer loads and stores
BUF_BYTES = 4096


def _buffer_batch(seed: int, *, stride: int = 0, records: int = BUF_BYTES) -> tuple[Waves, Memory, np.ndarray]:
    """A batch whose waves address one registered buffer through s[0:3] (raw unless `stride`), v0 a random in-range
    byte offset per lane (aligned to 16 but for a few lanes aligned to 2), soffset s8."""
    rng = np.random.default_rng(seed)
    w = _batch(seed)
    buf = rng.integers(0, 256, BUF_BYTES, dtype=np.uint8)
    memory = Memory()
    memory.add(buf.ctypes.data, buf.nbytes, "buf", buf)
    memory.start_checks((WAVES, 1, 1), race=True, initcheck=True)
    memory.start_footprint()
    base = buf.ctypes.data
    w.S[:, 0], w.S[:, 1] = base & 0xFFFFFFFF, (base >> 32) | (stride << 16)
    w.S[:, 2], w.S[:, 3] = records, 0x00027000
    w.S[:, 8] = 64
    w.global_group[:] = np.arange(WAVES)
    per_wave = BUF_BYTES // WAVES           # each wave (its own workgroup) in its own quarter: no cross-group race
    offsets = (rng.integers(4, (per_wave - 64 - 16) // 16, (WAVES, 64)) * 16).astype(np.uint32)
    offsets[:, ::7] += 2
    w.R[0] = offsets + (np.arange(WAVES)[:, None] * per_wave).astype(np.uint32) - 64
    return w, memory, buf


BUFFER_CASES = {
    "buffer_load_dwordx4": I.buffer_load_dwordx4(vdata=v[4:7], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=16),
    "buffer_load_dword": I.buffer_load_dword(vdata=v[4], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1),
    "buffer_load_dword uniform": I.buffer_load_dword(vdata=v[4], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offset=8),
    "buffer_load_dwordx2 constant soffset": I.buffer_load_dwordx2(vdata=v[4:5], vaddr=v[0], srsrc=s[0:3], soffset=0,
                                                                  offen=1, offset=64),
    "buffer_load_ushort": I.buffer_load_ushort(vdata=v[4], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1),
    "buffer_load_sshort": I.buffer_load_sshort(vdata=v[4], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=2),
    "buffer_load_sbyte": I.buffer_load_sbyte(vdata=v[4], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=3),
    "buffer_store_dwordx4": I.buffer_store_dwordx4(vdata=v[4:7], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1),
    "buffer_store_dwordx3": I.buffer_store_dwordx3(vdata=v[4:6], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1),
    "buffer_store_dwordx2": I.buffer_store_dwordx2(vdata=v[4:5], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1),
    "buffer_store_short": I.buffer_store_short(vdata=v[4], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=6),
    "buffer_store_byte": I.buffer_store_byte(vdata=v[4], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=1),
}


def _run_both(ins: Instr, seed: int, **kw) -> tuple[tuple[Waves, Memory, np.ndarray], tuple[Waves, Memory, np.ndarray],
                                                     object]:
    by_handler, by_plan = _buffer_batch(seed, **kw), _buffer_batch(seed, **kw)
    ins.run(Step(by_handler[0], slice(None), ins, WAVES, LaunchProfile(memory=by_handler[1])))
    fast = plan(ins)
    assert fast is not None
    handled = fast[0](by_plan[0], LaunchProfile(memory=by_plan[1]))
    return by_handler, by_plan, handled


@pytest.mark.parametrize("records", [BUF_BYTES, BUF_BYTES // 2 + 6], ids=["in range", "partly out of range"])
@pytest.mark.parametrize("seed", [5, 6])
@pytest.mark.parametrize("name", list(BUFFER_CASES))
def test_buffer_plan_matches_handler(name, seed, records):
    ins = _decoded(BUFFER_CASES[name])
    (wa, ma, ba), (wb, mb, bb), handled = _run_both(ins, seed, records=records)
    assert handled is not False
    np.testing.assert_array_equal(wb.R, wa.R)
    np.testing.assert_array_equal(bb, ba)
    assert (mb.bytes_loaded, mb.bytes_stored) == (ma.bytes_loaded, ma.bytes_stored) and ma.bytes_loaded + ma.bytes_stored
    assert mb.take_footprint() == ma.take_footprint()


@pytest.mark.parametrize("name", ["buffer_load_dwordx4", "buffer_load_ushort", "buffer_store_short"])
def test_buffer_plan_runs_strided_buffers_in_range_like_the_handler(name):
    """A descriptor with a stride and no index register: in range while index 0 is below num_records, whatever the
    offset (the handler's test)."""
    ins = _decoded(BUFFER_CASES[name])
    (wa, ma, ba), (wb, mb, bb), handled = _run_both(ins, 7, stride=16, records=4)
    assert handled is not False
    np.testing.assert_array_equal(wb.R, wa.R)
    np.testing.assert_array_equal(bb, ba)
    assert (mb.bytes_loaded, mb.bytes_stored) == (ma.bytes_loaded, ma.bytes_stored) and ma.bytes_loaded + ma.bytes_stored
    assert mb.take_footprint() == ma.take_footprint()


def test_buffer_plan_reads_zeros_from_strided_buffers_out_of_range_like_the_handler():
    ins = _decoded(BUFFER_CASES["buffer_load_dwordx4"])
    (wa, ma, _), (wb, mb, _), handled = _run_both(ins, 7, stride=16, records=0)
    assert handled is not False
    np.testing.assert_array_equal(wb.R, wa.R)
    assert not wb.R[4:8].any() and mb.bytes_loaded == ma.bytes_loaded == 0
    assert mb.take_footprint() == ma.take_footprint() == {}


def test_buffer_plan_reports_the_same_race():
    """A store into bytes another workgroup's lane loaded: the same finding either way."""
    ins = _decoded(I.buffer_store_dword(vdata=v[4], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1))
    messages = []
    for runner in ("handler", "plan"):
        w, memory, _ = _buffer_batch(8)
        memory.load(np.array([memory.regions[0].base + 1100], np.uint64), 4, groups=np.array([0]))
        w.R[0, 1, 5] = 1100 - 64                                  # wave 1 (workgroup 1), lane 5 stores there
        with pytest.raises(Exception) as caught:
            if runner == "handler":
                ins.run(Step(w, slice(None), ins, WAVES, LaunchProfile(memory=memory)))
            else:
                plan(ins)[0](w, LaunchProfile(memory=memory))    # type: ignore[index]
        messages.append(str(caught.value))
    assert messages[0] == messages[1] and "global race" in messages[0]


def _state(w: Waves, memory: Memory, buf: np.ndarray) -> dict[str, object]:
    """Everything a buffer step may change: registers, bytes, the written map, the race shadow, the footprint."""
    region = memory.regions[0]
    shadow = memory._shadows.get(id(region))
    arrays = {} if shadow is None else {k: a.copy() for k, a in shadow._arrays.items()}
    return {"R": w.R.copy(), "buf": buf.copy(), "written": region.written.copy(),
            "shadow": (shadow.granule, shadow.modified, shadow.read, arrays) if shadow else None,
            "moved": (memory.bytes_loaded, memory.bytes_stored)}


def _same(a: dict[str, object], b: dict[str, object]) -> None:
    for key in ("R", "buf", "written"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert a["moved"] == b["moved"]
    sa, sb = a["shadow"], b["shadow"]
    assert (sa is None) == (sb is None)
    if sa is not None and sb is not None:
        assert sa[:3] == sb[:3] and sa[3].keys() == sb[3].keys()
        for k in sa[3]:
            np.testing.assert_array_equal(sa[3][k], sb[3][k], err_msg=k)


SEQUENCE = [                                  # stores first (initcheck), then loads of what they wrote, then sub-dwords
    I.buffer_store_dwordx4(vdata=v[4:7], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1),
    I.buffer_load_dwordx4(vdata=v[8:11], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1),
    I.buffer_store_dword(vdata=v[5], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=4),
    I.buffer_load_dword(vdata=v[2], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=8),
    I.buffer_load_sshort(vdata=v[3], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=2),
    I.buffer_store_short(vdata=v[6], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=6),
    I.buffer_load_ubyte(vdata=v[1], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1, offset=7),
]


@pytest.mark.parametrize("seed", [3, 4])
def test_buffer_plans_in_sequence_match_handlers(seed):
    """A run of stores and loads with every checker on (initcheck on a buffer that starts unwritten, the race shadow
    per dword then spread to bytes, the footprint): after every step the plan's state equals the handler's."""
    runs = []
    for runner in ("handler", "plan"):
        w, memory, buf = _buffer_batch(seed)
        memory.regions[0].written = np.zeros(BUF_BYTES, bool)
        w.R[0] &= ~np.uint32(15)                         # whole aligned dwords first: the shadow stays per dword
        if runner == "plan":                             # every step in the native helper, none left to the numpy path
            memory.load = memory.store = _numpy_path     # type: ignore[method-assign]
        runs.append((w, memory, buf))
    for step, code in enumerate(SEQUENCE):
        ins = _decoded(code)
        (wa, ma, ba), (wb, mb, bb) = runs
        ins.run(Step(wa, slice(None), ins, WAVES, LaunchProfile(memory=ma)))
        assert plan(ins)[0](wb, LaunchProfile(memory=mb)) is not False      # type: ignore[index]
        _same(_state(wa, ma, ba), _state(wb, mb, bb))
        if step == 1:
            assert mb._shadows[id(mb.regions[0])].granule == 4
    assert mb._shadows[id(mb.regions[0])].granule == 1
    assert runs[0][1].take_footprint() == runs[1][1].take_footprint()


def _numpy_path(*args, **kwargs):
    raise AssertionError("the plan left an in-range step in one buffer to the numpy path")


def _finding(prepare, code) -> list[str]:
    """The fault message of `code` after prepare(waves, memory), by the handler and by the plan."""
    ins = _decoded(code)
    messages = []
    for runner in ("handler", "plan"):
        w, memory, buf = _buffer_batch(9)
        prepare(w, memory)
        before = _state(w, memory, buf) if memory.regions[0].written is not None else None
        with pytest.raises(Exception) as caught:
            if runner == "handler":
                ins.run(Step(w, slice(None), ins, WAVES, LaunchProfile(memory=memory)))
            else:
                plan(ins)[0](w, LaunchProfile(memory=memory))    # type: ignore[index]
        messages.append(re.sub(r"0x[0-9a-f]+", "0x?", str(caught.value)))      # (each runner has its own buffer)
        if before is not None and "uninitialized" in messages[-1]:     # a load that faults changed nothing a
            after = _state(w, memory, buf)                                 # later step could see (the launch ends)
            _same({**before, "shadow": None}, {**after, "shadow": None})
    assert messages[0] == messages[1]
    return messages


def test_buffer_plan_reports_the_same_uninitialized_read():
    def prepare(w, memory):
        memory.regions[0].written = np.ones(BUF_BYTES, bool)
        memory.regions[0].written[2000:2003] = False
        w.R[0, 1, 9] = 2000 - 64 - 8                              # lane 9 of wave 1 reads bytes 2000.. (offset 8)
    message = _finding(prepare, I.buffer_load_dwordx2(vdata=v[4:5], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1,
                                                       offset=8))
    assert "uninitialized read" in message[0] and "byte offset 2000" in message[0]


def test_buffer_plan_reports_the_same_load_after_another_groups_store():
    def prepare(w, memory):
        memory.store(np.array([memory.regions[0].base + 1104], np.uint64), np.zeros((1, 4), np.uint8),
                     groups=np.array([0]))
        w.R[0, 2, 63] = 1104 - 64                                 # wave 2 (workgroup 2) loads what workgroup 0 stored
    message = _finding(prepare, I.buffer_load_dword(vdata=v[4], vaddr=v[0], srsrc=s[0:3], soffset=s[8], offen=1))
    assert "global race" in message[0] and "byte offset 1104" in message[0]


@pytest.mark.parametrize("width", ["dword", "short"])
def test_buffer_plan_reports_the_same_clash_of_two_stores(width):
    def prepare(w, memory):
        w.R[0, 0, 3] = w.R[0, 2, 40] = 3000 - 64                  # workgroups 0 and 2 store the same bytes
    code = (I.buffer_store_dword if width == "dword" else I.buffer_store_short)(vdata=v[4], vaddr=v[0], srsrc=s[0:3],
                                                                                 soffset=s[8], offen=1)
    message = _finding(prepare, code)
    assert "both buffer store byte offset 3000" in message[0]


# ---------------------------------------------------------------- LDS reads and writes
LDS_BYTES = 4096
LDS_CASES = {
    "ds_write_b32": I.ds_write_b32(addr=v[0], data0=v[4], offset0=8),
    "ds_write_b64": I.ds_write_b64(addr=v[0], data0=v[4:5], offset0=16),
    "ds_write_b128": I.ds_write_b128(addr=v[0], data0=v[4:7]),
    "ds_write2_b32": I.ds_write2_b32(addr=v[0], data0=v[4], data1=v[6], offset0=1, offset1=3),
    "ds_write2_b64": I.ds_write2_b64(addr=v[0], data0=v[4:5], data1=v[6:7], offset0=0, offset1=2),
    "ds_write2st64_b32": I.ds_write2st64_b32(addr=v[0], data0=v[4], data1=v[5], offset0=0, offset1=1),
    "ds_read_b32": I.ds_read_b32(vdst=v[8], addr=v[0], offset0=8),
    "ds_read_b64": I.ds_read_b64(vdst=v[8:9], addr=v[0], offset0=16),
    "ds_read_b128": I.ds_read_b128(vdst=v[8:11], addr=v[0]),
    "ds_read2_b32": I.ds_read2_b32(vdst=v[8:9], addr=v[0], offset0=1, offset1=3),
    "ds_read2_b64": I.ds_read2_b64(vdst=v[8:11], addr=v[0], offset0=0, offset1=2),
    "ds_read2st64_b32": I.ds_read2st64_b32(vdst=v[0:1], addr=v[0], offset0=0, offset1=1),   # (into its ADDR)
}


def _lds_batch(seed: int) -> Waves:
    """Three waves, two workgroups (waves 0 and 1 share one); each wave's lanes address its own 1 KiB of its group's LDS
    (lanes of one wave may share dwords), initcheck on, the LDS random and half of it written."""
    rng = np.random.default_rng(seed)
    w = _batch(seed)
    w2 = Waves(WAVES, VGPRS, 2, LDS_BYTES, 0, "gfx942")
    w2.R[:], w2.S[:] = w.R, w.S
    w2.group[:] = [0, 0, 1]
    w2.global_group[:] = [4, 4, 5]
    w2.lds[:] = rng.integers(0, 256, w2.lds.shape, dtype=np.uint8)
    w2.lds_written = rng.random(w2.lds.shape) < 0.5
    own = np.array([0, 1024, 0])[:, None]
    w2.R[0] = own + rng.integers(0, 1024 - 512 - 32, (WAVES, 64)) // 8 * 8
    return w2


def _lds_state(w: Waves, profile: LaunchProfile) -> dict[str, object]:
    return {"R": w.R.copy(), "lds": w.lds.copy(), "wkey": w.lds_wkey.copy(), "rkey": w.lds_rkey.copy(),
            "written": None if w.lds_written is None else w.lds_written.copy(),
            "profile": (profile.lds_bytes, profile.lds_bank_cycles, profile.lds_conflict_cycles,
                        getattr(profile, "lds_benign_writes", 0))}


def _lds_same(a: dict[str, object], b: dict[str, object]) -> None:
    for key in ("R", "lds", "wkey", "rkey", "written"):
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    assert a["profile"] == b["profile"]


def _lds_both(codes, prepare=lambda w: None) -> tuple[list, list]:
    """Run `codes` in order by the handlers and by the plans on one prepared batch each: (states, fault messages)."""
    states, messages = [], []
    for runner in ("handler", "plan"):
        w, profile = _lds_batch(11), LaunchProfile(memory=Memory())
        prepare(w)
        message = ""
        try:
            for code in codes:
                ins = _decoded(code)
                if runner == "handler":
                    ins.run(Step(w, slice(None), ins, WAVES, profile))
                else:
                    fast = plan(ins)
                    assert fast is not None and fast[1] < VGPRS
                    assert fast[0](w, profile) is not False, "the plan left a step in range to the handler"
        except Exception as exc:  # noqa: BLE001 - the finding is what is compared
            message = str(exc)
        states.append(_lds_state(w, profile))
        messages.append(message)
    return states, messages


@pytest.mark.parametrize("name", list(LDS_CASES))
def test_lds_plan_matches_handler(name):
    """A write then every read of the batch's LDS: registers, LDS, race keys, written map, bytes, bank clocks."""
    write = LDS_CASES[name.replace("read", "write")]            # a read reads what the write of its shape wrote
    codes = [write, LDS_CASES[name]] if name.startswith("ds_read") else [write]
    states, messages = _lds_both(codes)
    assert messages == ["", ""]
    _lds_same(*states)
    assert states[1]["profile"][0] > 0 and states[1]["profile"][1] > 0


def test_lds_plan_reports_the_same_race():
    """Wave 1 reads dwords wave 0 (same workgroup) wrote with no barrier between."""
    def prepare(w):
        w.R[1] = w.R[0]
        w.R[1, 1] = w.R[0, 0]                                   # wave 1 reads through v1 where wave 0 wrote
    states, messages = _lds_both([LDS_CASES["ds_write_b32"], I.ds_read_b32(vdst=v[8], addr=v[1], offset0=8)], prepare)
    assert messages[0] == messages[1] and "LDS race" in messages[0] and "reads LDS dword" in messages[0]


@pytest.mark.parametrize("same", [True, False], ids=["benign", "clash"])
def test_lds_plan_counts_the_same_concurrent_writes(same):
    """Waves 0 and 1 write one dword in one step: the same value is benign (counted), different values a race."""
    def prepare(w):
        w.R[0, 0] = w.R[0, 1] = np.arange(64) * 8                # one dword a lane, the same in both waves
        if same:
            w.R[4, 1] = w.R[4, 0]
    states, messages = _lds_both([LDS_CASES["ds_write_b32"]], prepare)
    assert messages[0] == messages[1]
    if same:
        assert messages[0] == "" and states[1]["profile"][3] > 0
        _lds_same(*states)
    else:
        assert "write different values" in messages[0]


def test_lds_plan_reports_the_same_uninitialized_read():
    def prepare(w):
        w.lds_written[1, 200:204] = False
        w.R[0, 2, 17] = 200
    states, messages = _lds_both([LDS_CASES["ds_read_b64"]], prepare)
    assert messages[0] == messages[1] and "uninitialized read: LDS byte" in messages[0]


def test_lds_plan_leaves_accesses_outside_the_allocation_to_the_handler():
    ins = _decoded(LDS_CASES["ds_read_b128"])
    w = _lds_batch(12)
    w.R[0, 2, 5] = LDS_BYTES - 8
    before = _lds_state(w, LaunchProfile(memory=Memory()))
    profile = LaunchProfile(memory=Memory())
    assert plan(ins)[0](w, profile) is False                    # type: ignore[index]
    _lds_same(before, _lds_state(w, profile))
    with pytest.raises(Exception, match="outside the workgroup's 4096-byte LDS allocation"):
        ins.run(Step(w, slice(None), ins, WAVES, profile))


@pytest.mark.parametrize("name", list(BUFFER_CASES) + list(LDS_CASES))
def test_known_operands_are_what_the_handler_records(name):
    """A planned memory instruction's first execution may skip the recording step: its record must be the one the
    recording step makes."""
    from lnbench.emu.fastpath import known_operands, plan
    from lnbench.emu.state import RecordingStep

    ins = _decoded({**BUFFER_CASES, **LDS_CASES}[name])
    if name in BUFFER_CASES:
        w, memory, _ = _buffer_batch(5)
    else:
        w, memory = _lds_batch(11), Memory()
        w.lds_written = None                                  # (a read of bytes nobody wrote is no fault here)
    step = RecordingStep(w, slice(None), ins, WAVES, LaunchProfile(memory=memory))
    ins.run(step)
    assert known_operands(ins, plan(ins)) == (step.reads, step.writes)


def test_unplanned_instructions_record_their_operands():
    from lnbench.emu.fastpath import known_operands, plan

    unplanned = _decoded(I.buffer_load_dword(vdata=v[4], vaddr=v[0:1], srsrc=s[0:3], soffset=s[8], idxen=1, offen=1))
    assert plan(unplanned) is None and known_operands(unplanned, plan(unplanned)) is None
    fma = _decoded(CASES["v_fma_f32"])
    assert plan(fma) is not None and known_operands(fma, plan(fma)) is None      # planned, but its record is noted


@pytest.mark.parametrize("name", ["ds_read_b32", "ds_read_b64", "ds_read_b128", "ds_read2_b32", "ds_write2_b64"])
def test_lds_plan_counts_the_same_bank_clocks_for_consecutive_lanes(name):
    """Lanes on consecutive addresses (one dword a bank in each pass: the bank model's quick case) and on a stride that
    puts lanes of a pass in one bank: the same clocks either way."""
    width = {"b32": 4, "b64": 8, "b128": 16}[name.rsplit("_", 1)[1]]
    for stride in (width, 128):
        def prepare(w, stride=stride):
            w.R[0] = np.array([0, 1024, 0])[:, None] + (np.arange(64) * stride) % 1024
        write = LDS_CASES[name.replace("read", "write")]
        states, messages = _lds_both([write, LDS_CASES[name]] if name.startswith("ds_read") else [write], prepare)
        assert messages == ["", ""]
        _lds_same(*states)


@pytest.mark.parametrize("stride", [0, 16], ids=["raw", "strided"])
@pytest.mark.parametrize("name", ["buffer_load_dwordx4", "buffer_load_dword", "buffer_load_ushort",
                                  "buffer_load_sbyte", "buffer_load_dwordx2 constant soffset"])
def test_buffer_plan_loads_lanes_wholly_in_or_out_of_range_like_the_handler(name, stride):
    """Lanes with every component in range or none (a tail masked by num_records, as FlyDSL's kernels do): the native
    component loop against the handler's, with initcheck, the race shadow and the footprint on."""
    ins = _decoded(BUFFER_CASES[name])
    runs = []
    for runner in ("handler", "plan"):
        w, memory, buf = _buffer_batch(13, stride=stride, records=BUF_BYTES // 2)
        memory.regions[0].written = np.ones(BUF_BYTES, bool)     # initcheck on, nothing to find
        if not stride:                                            # (only where the lanes out of range point)
            memory.regions[0].written[BUF_BYTES // 2 + 1::7] = False
        w.R[0] &= ~np.uint32(15)
        if stride:
            w.S[1, 2] = 0                                          # wave 1: index 0 not below num_records
        if runner == "plan":
            memory.load = _numpy_path                              # type: ignore[method-assign]
        runs.append((w, memory, buf))
    (wa, ma, ba), (wb, mb, bb) = runs
    message = ["", ""]
    try:
        ins.run(Step(wa, slice(None), ins, WAVES, LaunchProfile(memory=ma)))
    except Exception as exc:  # noqa: BLE001 - compared below
        message[0] = re.sub(r"0x[0-9a-f]+", "0x?", str(exc))
    try:
        assert plan(ins)[0](wb, LaunchProfile(memory=mb)) is not False      # type: ignore[index]
    except AssertionError:
        raise
    except Exception as exc:  # noqa: BLE001
        message[1] = re.sub(r"0x[0-9a-f]+", "0x?", str(exc))
    assert message == ["", ""]
    _same(_state(wa, ma, ba), _state(wb, mb, bb))
    assert ma.take_footprint() == mb.take_footprint()
    assert (wb.R[4, 1] == 0).all() if stride else (wb.R[4, 2] == 0).any()     # lanes out of range read 0
    assert ma.bytes_loaded > 0

"""The emulator's whole-batch fast paths (lnbench.emu.fastpath) against the general handlers, bit for bit.

Each case decodes one instruction, fills two identical batches with random register bits mixed with special floats
(signed zeros, denormals, infinities, NaNs with payloads, values that cancel), runs the handler on one and the plan
on the other, and compares every register and SGPR.
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad.renderer.amd.dsl import s, v  # noqa: E402
from tinygrad.runtime.autogen.amd.cdna import ins as I  # noqa: E402

from lnbench.emu.decode import Instr, decode_at  # noqa: E402
from lnbench.emu.fastpath import plan  # noqa: E402
from lnbench.emu.machine import LaunchProfile  # noqa: E402
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


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("name", list(CASES))
def test_plan_matches_handler(name, seed):
    ins = _decoded(CASES[name])
    fast = plan(ins)
    assert fast is not None, f"{name} gets no plan"
    run, top = fast
    assert top < VGPRS
    by_handler, by_plan = _batch(seed), _batch(seed)
    before = by_plan.R.copy()
    with np.errstate(all="ignore"):                        # (as the scheduler runs them)
        ins.run(Step(by_handler, slice(None), ins, WAVES, LaunchProfile(memory=Memory())))
        run(by_plan, LaunchProfile(memory=Memory()))
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


def test_buffer_plan_leaves_strided_buffers_to_the_handler():
    ins = _decoded(BUFFER_CASES["buffer_load_dwordx4"])
    (wa, ma, _), (wb, mb, _), handled = _run_both(ins, 7, stride=16)
    assert handled is False
    assert mb.bytes_loaded == 0 and not np.array_equal(wb.R, wa.R)       # the plan changed nothing


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

"""Issue 56 item 7: every opcode the whole-batch fast paths plan (lnbench.emu.fastpath.planned_opcodes(), read off the
planner's own tables) against its Python handler (ops_*.py, bound by semantics.bind), bit for bit, in addition to the
fixture kernels of the differential test.

For each opcode the cases are generated, not listed: its VOP2 and VOP3 forms on VGPR, SGPR, literal and inline
operands; for the float ops every abs/neg combination the plan accepts, for the packed ones op_sel, op_sel_hi, neg and
neg_hi; for the memory ops every width. Operands are random bits mixed with NaNs (with payloads), infinities, signed
zeros, denormals and large and small integers (test_emu_fastpath._bits, fixed seeds). Each case also runs the handler
under random EXEC masks (a wave all off, one all on, the rest random): where a lane is active it must hold the plan's
value, elsewhere what it held before. v_perm_b32, whose handler and plan both call native.c, is also checked against a
numpy statement of the ISA's byte select; v_fma_f32 against the numpy round-to-odd fma.

The planner may not plan an opcode this file generates no case for: test_every_planned_opcode_is_checked fails then.
"""
from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad.renderer.amd.dsl import s, v  # noqa: E402
from tinygrad.runtime.autogen.amd.cdna import ins as I  # noqa: E402

from lnbench.emu import fastpath  # noqa: E402
from lnbench.emu import ops_vector as vec  # noqa: E402
from lnbench.emu.fastpath import plan, planned_opcodes  # noqa: E402
from lnbench.emu.fastpath_lds import PAIRED  # noqa: E402
from lnbench.emu.memory import Memory  # noqa: E402
from lnbench.emu.ops_memory import _DS_READS, _DS_WRITES, BUF_LOADS, BUF_STORES, lds_shape  # noqa: E402
from lnbench.emu.profile import LaunchProfile  # noqa: E402
from lnbench.emu.registry import OP_CLASS  # noqa: E402
from lnbench.emu.state import EXEC, Step, Waves  # noqa: E402
from test_emu_fastpath import (BUF_BYTES, WAVES, _batch, _buffer_batch, _decoded, _lds_both,  # noqa: E402
                               _lds_same, plan_and_handler)

SEEDS = (21, 22)
LITERAL, INLINE_INT, INLINE_FLOAT = 0x8000_0001, 7, -2.0


def _vop(name: str):
    """(the VOP2 builder or None, the VOP3 builder) of a VALU opcode, as tinygrad's assembler names them."""
    return getattr(I, f"{name}_e32", None), getattr(I, f"{name}_e64", None) or getattr(I, name)


def _binary(name: str) -> list[tuple[str, object]]:
    e32, e64 = _vop(name)
    cases = [("e64 v v", e64(v[3], v[0], v[1])), ("e64 v s", e64(v[3], v[0], s[9])),
             ("e64 inline v", e64(v[3], INLINE_INT, v[1])), ("e64 in place", e64(v[1], v[0], v[1]))]
    if e32 is not None:
        cases += [("e32 v v", e32(v[3], v[0], v[1])), ("e32 s v", e32(v[3], s[7], v[1])),
                  ("e32 literal v", e32(v[3], LITERAL, v[1])), ("e32 inline float", e32(v[3], INLINE_FLOAT, v[1]))]
    if name in fastpath.FLOATS:                                 # fsrc's abs and neg: every combination
        cases += [(f"abs={a} neg={n}", e64(v[2], v[0], v[1], abs=a, neg=n)) for a in range(4) for n in range(4)]
    return cases


def _ternary(name: str) -> list[tuple[str, object]]:
    _, e64 = _vop(name)
    cases = [("v v v", e64(v[3], v[0], v[1], v[2])), ("s v inline", e64(v[3], s[4], v[1], INLINE_INT)),
             ("v inline v", e64(v[3], v[0], 2, v[2])), ("in place", e64(v[0], v[1], v[2], v[0]))]
    if name in fastpath.FLOATS:
        cases += [("s v inline float", e64(v[3], s[2], v[1], 0.5))]
        cases += [(f"abs={a} neg={n}", e64(v[3], v[0], v[1], v[2], abs=a, neg=n)) for a in range(8) for n in range(8)]
    return cases


def _packed(name: str) -> list[tuple[str, object]]:
    build = getattr(I, name)
    n = 3 if name == "v_pk_fma_f32" else 2
    sources = [v[0:1], v[2:3], v[4:5]][:n]
    cases = [("v", build(v[6:7], *sources)), ("sgpr pair", build(v[6:7], sources[0], s[8:9], *sources[2:])),
             ("inline", build(v[6:7], sources[0], 0.5, *sources[2:])),
             ("in place", build(v[0:1], v[2:3], v[0:1], *([v[0:1]] if n == 3 else [])))]
    rng = np.random.default_rng(len(name))
    for _ in range(24):                                       # op_sel, op_sel_hi, neg, neg_hi: random, fixed seed
        opsel, opsel_hi, neg, neg_hi = (int(x) for x in rng.integers(0, 1 << n, 4))
        hi = {"opsel_hi": opsel_hi & 3, **({"opsel_hi2": opsel_hi >> 2} if n == 3 else {})}   # (src2's: a field apart)
        cases.append((f"opsel={opsel} opsel_hi={opsel_hi} neg={neg} neg_hi={neg_hi}",
                      build(v[6:7], *sources, opsel=opsel, neg=neg, neg_hi=neg_hi, **hi)))
    return cases


def _single(name: str) -> list[tuple[str, object]]:
    if name == "v_mov_b32":
        e32, e64 = _vop(name)
        return [("v", e32(v[3], v[0])), ("s", e32(v[3], s[5])), ("literal", e32(v[3], LITERAL)),
                ("inline float", e32(v[3], INLINE_FLOAT)), ("e64", e64(v[3], v[1]))]
    if name == "v_perm_b32":
        return [("v v v", I.v_perm_b32_e64(v[3], v[0], v[1], v[4])), ("s", I.v_perm_b32_e64(v[3], v[0], v[1], s[4])),
                ("inline in place", I.v_perm_b32_e64(v[1], s[2], v[1], 12))]
    if name == "v_fma_f32":
        return _ternary(name)
    if name == "ds_swizzle_b32":
        return [(f"offset={o:#06x}", I.ds_swizzle_b32(vdst=v[1], addr=v[0], offset0=o & 0xFF, offset1=o >> 8))
                for o in (0x001F | (0x04 << 10), 0x801B, 0x8000, 0x80E4, 0x0041, 0x03E0, 0x041F)]
    if name == "ds_bpermute_b32":
        return [(f"offset={o}", I.ds_bpermute_b32(vdst=v[2], addr=v[0], data0=v[1], offset0=o & 0xFF, offset1=o >> 8))
                for o in (0, 4, 252, 256, 1023)] + \
            [("in place", I.ds_bpermute_b32(vdst=v[1], addr=v[0], data0=v[1], offset0=8, offset1=0))]
    raise KeyError(name)


def _alu_cases() -> dict[str, list[tuple[str, object]]]:
    out: dict[str, list[tuple[str, object]]] = {}
    for name in planned_opcodes():
        if name in fastpath.UFUNCS or name in vec.WRAP32_BINARY:
            out[name] = _binary(name)
        elif name in vec.INT_TERNARY:
            out[name] = _ternary(name)
        elif name in vec.PACKED_F32:
            out[name] = _packed(name)
        elif name in fastpath.SINGLES:
            out[name] = _single(name)
    return out


ALU = _alu_cases()
CROSS_LANE = ("ds_swizzle_b32", "ds_bpermute_b32")
MEMORY = frozenset(BUF_LOADS) | frozenset(BUF_STORES) | frozenset(_DS_READS) | frozenset(_DS_WRITES) | frozenset(PAIRED)


def test_every_planned_opcode_is_checked():
    """Each opcode the planner's tables hold has cases here (ALU, cross-lane) or a memory check below."""
    missing = sorted(planned_opcodes() - set(ALU) - MEMORY)
    assert not missing, f"fast-path opcodes with no semantic check: {missing}"
    assert all(ALU[name] for name in ALU)


def test_the_planner_names_no_opcode_outside_planned_opcodes():
    """An opcode the fast-path modules name in their code (a new `if name == ...` branch) must be in
    planned_opcodes(), so that the test above sees it."""
    named = set()
    for module in ("fastpath.py", "fastpath_lds.py", "fastpath_buffer.py"):
        tree = ast.parse((Path(fastpath.__file__).parent / module).read_text(encoding="utf-8"))
        named |= {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and n.value in OP_CLASS}
    assert "v_perm_b32" in named and "ds_bpermute_b32" in named          # (the scan sees the planner's names)
    assert named - planned_opcodes() == set()


def _random_exec(w: Waves, seed: int) -> np.ndarray:
    """Random EXEC per wave (wave 0 all off, wave 1 all on, the rest random): the (waves, 64) active lanes."""
    rng = np.random.default_rng(seed)
    lanes = rng.random((w.n, 64)) < 0.6
    lanes[0], lanes[1] = False, True
    bits = (lanes.astype(np.uint64) << np.arange(64, dtype=np.uint64)).sum(axis=1, dtype=np.uint64)
    w.S[:, EXEC], w.S[:, EXEC + 1] = (bits & 0xFFFFFFFF).astype(np.uint32), (bits >> np.uint64(32)).astype(np.uint32)
    return lanes


def _step(ins, w: Waves) -> None:
    ins.run(Step(w, slice(None), ins, w.n, LaunchProfile(memory=Memory())))


ALU_IDS = [(name, label) for name in sorted(ALU) for label, _ in ALU[name]]


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name, label", ALU_IDS, ids=[f"{n} {lbl}" for n, lbl in ALU_IDS])
def test_alu_plan_matches_handler_under_every_mask(name, label, seed):
    ins = _decoded(dict(ALU[name])[label])
    by_handler, by_plan, before = plan_and_handler(ins, seed)
    np.testing.assert_array_equal(by_plan.R, by_handler.R)
    np.testing.assert_array_equal(by_plan.S, by_handler.S)
    written = np.flatnonzero((before != by_plan.R).any(axis=(1, 2)))
    assert written.size or name == "v_mov_b32", "the case changed nothing"
    if name in CROSS_LANE:                  # lanes read other lanes: an inactive one is no per-lane question
        return
    masked = _batch(seed)
    lanes = _random_exec(masked, seed + 100)
    with np.errstate(all="ignore"):
        _step(ins, masked)
    want = np.where(lanes[None], by_plan.R, before)
    np.testing.assert_array_equal(masked.R, want)


def _perm_reference(s0: np.ndarray, s1: np.ndarray, sel: np.ndarray) -> np.ndarray:
    """v_perm_b32 as the CDNA3 ISA states it: byte k of D = byte select (S2 >> 8k) & 0xFF of {S0, S1} (S1 the low
    dword): 0-7 that byte, 8-11 bit 15, 31, 47, 63 of {S0, S1} spread to a byte, 12 0x00, 13 and up 0xFF."""
    both = (s0.astype(np.uint64) << np.uint64(32)) | s1.astype(np.uint64)
    out = np.zeros(s0.shape, np.uint32)
    for k in range(4):
        b = (sel >> np.uint32(8 * k)) & np.uint32(0xFF)
        byte = (both >> (np.minimum(b, 7).astype(np.uint64) * np.uint64(8))) & np.uint64(0xFF)
        sign_bit = np.array([15, 31, 47, 63], np.uint64)[np.clip(b.astype(np.int64) - 8, 0, 3)]
        sign = np.where((both >> sign_bit) & np.uint64(1), 0xFF, 0).astype(np.uint64)
        chosen = np.where(b < 8, byte, np.where(b < 12, sign, np.where(b == 12, 0, 0xFF)))
        out |= chosen.astype(np.uint32) << np.uint32(8 * k)
    return out


@pytest.mark.parametrize("seed", SEEDS)
def test_v_perm_b32_plan_is_the_isa_byte_select(seed):
    w = _batch(seed)
    rng = np.random.default_rng(seed)
    w.R[4] = rng.integers(0, 16, (WAVES, 64, 4)).astype(np.uint8).view("<u4")[..., 0]    # every selector value
    a, b, sel = w.R[0].copy(), w.R[1].copy(), w.R[4].copy()
    plan(_decoded(dict(ALU["v_perm_b32"])["v v v"]))[0](w, LaunchProfile(memory=Memory()))  # type: ignore[index]
    np.testing.assert_array_equal(w.R[3], _perm_reference(a, b, sel))


@pytest.mark.parametrize("seed", SEEDS)
def test_v_fma_f32_plan_is_the_round_to_odd_fma(seed):
    """Where the result is a number, the plan's fma is a*b+c rounded once (ops_vector's numpy formulation)."""
    w = _batch(seed)
    a, b, c = (w.R[r].copy().view(np.float32) for r in range(3))
    with np.errstate(all="ignore"):
        plan(_decoded(dict(ALU["v_fma_f32"])["v v v"]))[0](w, LaunchProfile(memory=Memory()))  # type: ignore[index]
        want = vec._fma_round_odd(a, b, c).astype(np.float32)
    got = w.R[3].view(np.float32)
    number = ~np.isnan(want)
    assert number.sum() > 100
    np.testing.assert_array_equal(got[number].view(np.uint32), want[number].view(np.uint32))
    assert np.isnan(got[~number]).all()


# ---------------------------------------------------------------- memory: every width the plans take
def _buffer_code(name: str, **extra):
    count = (BUF_LOADS.get(name) or BUF_STORES[name])[0]
    data = v[4] if count == 1 else v[4:4 + count - 1]
    return getattr(I, name)(vdata=data, vaddr=v[0], srsrc=s[0:3], soffset=s[8], **extra)


BUFFER_FORMS = [(name, "offen") for name in sorted(set(BUF_LOADS) | set(BUF_STORES))] + \
    [(name, "uniform") for name in sorted(BUF_LOADS)]          # (a uniform store: every workgroup's bytes, a race)


@pytest.mark.parametrize("name, form", BUFFER_FORMS)
def test_buffer_plan_matches_handler_for_every_width(name, form):
    extra = {"offen": 1, "offset": 4} if form == "offen" else {"offset": 8}
    ins = _decoded(_buffer_code(name, **extra))
    runs = []
    for runner in ("handler", "plan"):
        w, memory, buf = _buffer_batch(31, records=BUF_BYTES // 2 + 6)       # some lanes out of range
        profile = LaunchProfile(memory=memory)
        if runner == "handler":
            ins.run(Step(w, slice(None), ins, WAVES, profile))
        else:
            fast = plan(ins)
            assert fast is not None and fast[0](w, profile) is not False
        runs.append((w, memory, buf))
    (wa, ma, ba), (wb, mb, bb) = runs
    np.testing.assert_array_equal(wb.R, wa.R)
    np.testing.assert_array_equal(bb, ba)
    assert (mb.bytes_loaded, mb.bytes_stored) == (ma.bytes_loaded, ma.bytes_stored) != (0, 0)
    assert mb.take_footprint() == ma.take_footprint()


def _lds_code(name: str):
    second = 1 if "st64" in name else 3                       # (a wave's lanes stay in its own 1 KiB)
    offsets, count = lds_shape(name, {"offset0": 1, "offset1": second})
    build = getattr(I, name)
    span = (lambda r: v[r] if count == 1 else v[r:r + count - 1])
    if name.startswith("ds_write"):
        data = {"data0": span(4)} if len(offsets) == 1 else {"data0": span(4), "data1": span(8)}
        return build(addr=v[0], offset0=1, offset1=second, **data) if len(offsets) == 2 else \
            build(addr=v[0], offset0=8, **data)
    rows = count * len(offsets)
    dst = v[4] if rows == 1 else v[4:4 + rows - 1]
    return build(vdst=dst, addr=v[0], offset0=1, offset1=second) if len(offsets) == 2 else \
        build(vdst=dst, addr=v[0], offset0=8)


@pytest.mark.parametrize("name", sorted(set(_DS_READS) | set(_DS_WRITES) | set(PAIRED)))
def test_lds_plan_matches_handler_for_every_width(name):
    """A write of the shape, then (for a read) the read: registers, LDS, race keys, written map, bytes, bank clocks."""
    write = _lds_code(name.replace("read", "write"))
    states, messages = _lds_both([write, _lds_code(name)] if name.startswith("ds_read") else [write])
    assert messages == ["", ""]
    _lds_same(*states)
    assert states[1]["profile"][0] > 0

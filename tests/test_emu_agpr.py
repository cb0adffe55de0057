"""The accumulation registers (AGPRs) of gfx90a+ in the emulator (lnbench.emu), on raw machine code.

On gfx942/gfx950 the AGPRs are the upper part of one unified vector register file: the kernel descriptor's
accum_offset (COMPUTE_PGM_RSRC3 bits 5:0, in units of 4 registers, minus one) is the row where a0 sits. Each
test assembles a few instructions with tinygrad's CDNA assembler and checks registers and memory: the moves
copy bits exactly (NaN payloads, -0, denormals) in the active lanes only, a memory instruction with acc=1
loads into / stores from AGPRs and leaves the same-numbered VGPRs alone, a[N] is where the descriptor puts
it, the wait-count checker names AGPRs and covers acc loads, and what is not implemented is a fault.
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad.renderer.amd.dsl import s, src as operand, v  # noqa: E402
from tinygrad.runtime.autogen.amd.cdna import ins as I  # noqa: E402

from lnbench.emu import machine  # noqa: E402
from lnbench.emu.codeobject import CodeObject, Kernel, _descriptor  # noqa: E402
from lnbench.emu.errors import EmulatorFault  # noqa: E402
from lnbench.emu.hazards import WaitcntFault  # noqa: E402
from lnbench.emu.machine import run_code  # noqa: E402
from lnbench.emu.memory import Memory  # noqa: E402
from lnbench.emu.semantics import table  # noqa: E402

M32 = 0xFFFFFFFF
LANE = np.arange(64)
SENTINEL = 0x5A5A5A5A
EXEC_PAT = 0xF0F0_0FF0_FFFF_0FF1
OFF = operand[127]                     # saddr "off" in SCRATCH encodings
ARCHES = ("gfx942", "gfx950")
#: bit patterns a float path would change: quiet/signalling NaN payloads, -0, denormals, inf, max
SPECIAL = np.array([0x7FC00001, 0x7F800001, 0xFFBFFFFF, 0x80000000, 0x00000001, 0x807FFFFF, 0x7F800000,
                    0xFF800000, 0x7F7FFFFF, 0x3F800000], np.uint32)


def bits(seed: int) -> np.ndarray:
    """64 lanes of fresh random bits with the special patterns in the first lanes."""
    out = np.random.default_rng(seed).integers(0, 1 << 32, 64, dtype=np.uint64).astype(np.uint32)
    out[:SPECIAL.size] = SPECIAL
    return out


def lanes_of(mask: int) -> np.ndarray:
    return np.array([(mask >> i) & 1 for i in range(64)], bool)


def run(*instrs, **kw):
    code = b"".join(i.to_bytes() for i in instrs) + I.s_endpgm().to_bytes()
    w, _ = run_code(code, **kw)
    return w


def agpr(w, n: int, wave: int = 0) -> np.ndarray:
    return w.V[wave, w.acc_base + n]


def memory(**buffers: np.ndarray) -> Memory:
    mem = Memory()
    for name, arr in buffers.items():
        mem.add(arr.ctypes.data, arr.nbytes, name, arr.view(np.uint8))
    return mem


def rsrc(arr: np.ndarray, at: int = 8) -> dict[int, int]:
    addr = arr.ctypes.data
    return {at: addr & M32, at + 1: (addr >> 32) & 0xFFFF, at + 2: arr.nbytes, at + 3: 0x00027000}


# ---------------------------------------------------------------- the three moves
@pytest.mark.parametrize("arch", ARCHES)
def test_accvgpr_write_mov_read_copy_bits_exactly_in_active_lanes(arch):
    x, y = bits(1), bits(2)
    w = run(I.v_accvgpr_write(v[3], v[1]),                # a3 = v1
            I.v_accvgpr_mov_b32_e32(v[5], v[3]),          # a5 = a3
            I.v_accvgpr_read(v[2], v[5]),                 # v2 = a5
            I.v_accvgpr_write(v[6], v[4]),                # a6 = v4 (bits of y)
            vgprs=8, agprs=8, vgpr={1: x, 2: SENTINEL, 4: y, 3: SENTINEL, 5: SENTINEL, 6: SENTINEL},
            agpr={3: SENTINEL, 5: SENTINEL, 6: SENTINEL}, exec_mask=EXEC_PAT, arch=arch)
    on = lanes_of(EXEC_PAT)
    for got in (agpr(w, 3), agpr(w, 5), w.V[0, 2]):
        assert (got[on] == x[on]).all()
        assert (got[~on] == SENTINEL).all()              # inactive lanes keep their value
    assert (agpr(w, 6)[on] == y[on]).all()
    # a3/a5/a6 are not v3/v5/v6: the VGPRs with the same numbers are untouched
    assert (w.V[0, 3] == SENTINEL).all() and (w.V[0, 5] == SENTINEL).all() and (w.V[0, 6] == SENTINEL).all()


def test_accvgpr_write_takes_sgprs_and_inline_constants():
    w = run(I.v_accvgpr_write(v[0], s[4]), I.v_accvgpr_write(v[1], 1.0), I.v_accvgpr_write(v[2], -3),
            I.v_accvgpr_mov_b32_e64(v[3], v[0]),
            vgprs=4, agprs=4, sgpr={4: 0x80000000})
    assert (agpr(w, 0) == 0x80000000).all() and (agpr(w, 3) == 0x80000000).all()
    assert (agpr(w, 1) == 0x3F800000).all()
    assert (agpr(w, 2) == (-3 & M32)).all()


def test_agpr_beyond_the_allocation_is_a_fault_naming_it():
    with pytest.raises(EmulatorFault, match=r"a4 is beyond the 4 AGPRs .*accum_offset 8"):
        run(I.v_accvgpr_write(v[4], v[0]), vgprs=8, agprs=4)
    with pytest.raises(EmulatorFault, match=r"a0 is beyond the 0 AGPRs"):
        run(I.v_accvgpr_read(v[1], v[0]), vgprs=8)         # a kernel that allocates none


def test_accvgpr_modifier_fields_are_faults_naming_them():
    with pytest.raises(EmulatorFault, match="modifier field neg=1"):
        run(I.v_accvgpr_write(v[0], v[1], neg=1), vgprs=4, agprs=4)
    with pytest.raises(EmulatorFault, match="modifier field clmp=1"):
        run(I.v_accvgpr_read(v[0], v[1], clmp=1), vgprs=4, agprs=4)


def test_fidelity_table_lists_the_moves_and_the_acc_bit():
    rows = {r["opcode"]: r for r in table()}
    assert rows["v_accvgpr_write_b32"]["forms"] == "vop3p" and rows["v_accvgpr_read_b32"]["forms"] == "vop3p"
    assert rows["v_accvgpr_mov_b32"]["forms"] == "native,vop3"
    for name in ("buffer_load_dwordx4", "buffer_store_dword", "global_load_dwordx2", "global_store_dwordx4",
                 "scratch_load_dword", "scratch_store_dword", "ds_read_b64", "ds_write2_b32"):
        assert "acc" in rows[name]["honours"].split(","), name
    assert "acc" not in rows["ds_bpermute_b32"]["honours"]


# ---------------------------------------------------------------- acc=1 memory instructions
@pytest.mark.parametrize("arch", ARCHES)
def test_buffer_load_and_store_with_acc_use_agprs(arch):
    src = bits(3)
    src = np.concatenate([src, bits(4), bits(5), bits(6)])         # 256 dwords
    dst = np.full(256, SENTINEL, np.uint32)
    w = run(I.buffer_load_dwordx4(vdata=v[2:5], vaddr=v[0], srsrc=s[8:11], soffset=0, offen=1, acc=1),
            I.buffer_store_dwordx4(vdata=v[2:5], vaddr=v[0], srsrc=s[12:15], soffset=0, offen=1, acc=1),
            vgprs=8, agprs=8, vgpr={0: LANE * 16, **{r: SENTINEL for r in range(2, 6)}},
            sgpr={**rsrc(src, 8), **rsrc(dst, 12)}, memory=memory(src=src, dst=dst), arch=arch)
    for j in range(4):
        assert (agpr(w, 2 + j) == src[LANE * 4 + j]).all()
        assert (w.V[0, 2 + j] == SENTINEL).all()                   # the VGPRs v2..v5 are not written
    assert (dst == src).all()


def test_global_load_and_store_with_acc_use_agprs():
    src, dst = bits(7), np.full(64, SENTINEL, np.uint32)
    w = run(I.global_load_dword(vdst=v[1], addr=v[0], saddr=s[2:3], acc=1),
            I.global_store_dword(addr=v[0], data=v[1], saddr=s[4:5], acc=1),
            vgprs=4, agprs=4, vgpr={0: LANE * 4, 1: SENTINEL},
            sgpr={2: src.ctypes.data & M32, 3: src.ctypes.data >> 32, 4: dst.ctypes.data & M32,
                  5: dst.ctypes.data >> 32}, memory=memory(src=src, dst=dst), exec_mask=EXEC_PAT)
    on = lanes_of(EXEC_PAT)
    assert (agpr(w, 1)[on] == src[on]).all() and (agpr(w, 1)[~on] == 0).all()
    assert (w.V[0, 1] == SENTINEL).all()
    assert (dst[on] == src[on]).all() and (dst[~on] == SENTINEL).all()


def test_ds_write_and_read_with_acc_use_agprs():
    x = bits(8)
    w = run(I.ds_write_b32(addr=v[0], data0=v[1], acc=1),          # LDS <- a1
            I.ds_read_b32(vdst=v[2], addr=v[0], acc=1),            # a2 <- LDS
            I.ds_read_b32(vdst=v[3], addr=v[0]),                   # v3 <- LDS (acc=0: a VGPR)
            vgprs=4, agprs=4, lds_bytes=256, vgpr={0: LANE * 4, 1: SENTINEL}, agpr={1: x})
    assert (agpr(w, 2) == x).all() and (w.V[0, 3] == x).all()
    assert (w.V[0, 2] == 0).all()                                  # v2 untouched (it started at 0)


def test_scratch_store_and_load_with_acc_use_agprs():
    x = bits(9)
    w = run(I.scratch_store_dword(addr=v[0], data=v[1], saddr=OFF, offset=8, acc=1),
            I.scratch_load_dword(vdst=v[2], addr=v[0], saddr=OFF, offset=8, acc=1),
            vgprs=4, agprs=4, scratch_bytes=16, agpr={1: x})
    assert (agpr(w, 2) == x).all()



def test_acc_bit_on_an_instruction_without_agpr_support_is_a_fault_naming_it():
    with pytest.raises(EmulatorFault, match="ds_bpermute_b32 .*modifier field acc=1"):
        run(I.ds_bpermute_b32(vdst=v[2], addr=v[0], data0=v[1], acc=1), vgprs=4, agprs=4, lds_bytes=256,
            vgpr={0: LANE * 4})


# ---------------------------------------------------------------- the wait-count checker
def test_an_acc_load_used_before_its_wait_is_a_hazard_naming_the_agpr():
    src = bits(10)
    load = I.global_load_dword(vdst=v[1], addr=v[0], saddr=s[2:3], acc=1)
    kw = dict(vgprs=4, agprs=4, vgpr={0: LANE * 4}, sgpr={2: src.ctypes.data & M32, 3: src.ctypes.data >> 32},
              checks=("memory", "lds", "waitcnt"))
    with pytest.raises(WaitcntFault, match=r"v_accvgpr_read_b32 at PC 0x8 reads a1 while global_load_dword at PC "
                                           r"0x0 may still be writing it \(vmcnt; wave 0\); s_waitcnt vmcnt\(0\)"):
        run(load, I.v_accvgpr_read(v[2], v[1]), memory=memory(src=src), **kw)
    # the same-numbered VGPR is another register: reading v1 is no hazard
    run(load, I.v_mov_b32_e32(v[2], v[1]), I.s_waitcnt(0x0F70), memory=memory(src=src), **kw)
    w = run(load, I.s_waitcnt(0x0F70), I.v_accvgpr_read(v[2], v[1]), memory=memory(src=src), **kw)
    assert (w.V[0, 2] == src).all()


def test_overwriting_an_agpr_a_load_will_write_is_a_hazard():
    src = bits(11)
    with pytest.raises(WaitcntFault, match=r"overwrites a1"):
        run(I.global_load_dword(vdst=v[1], addr=v[0], saddr=s[2:3], acc=1), I.v_accvgpr_write(v[1], v[0]),
            vgprs=4, agprs=4, vgpr={0: LANE * 4}, sgpr={2: src.ctypes.data & M32, 3: src.ctypes.data >> 32},
            memory=memory(src=src), checks=("memory", "lds", "waitcnt"))


# ---------------------------------------------------------------- the descriptor's accum_offset
def _descriptor_bytes(rsrc3: int) -> bytes:
    raw = bytearray(64)
    struct.pack_into("<III", raw, 44, rsrc3, 0xF0 << 12, 2 << 1)     # RSRC3, RSRC1 (float mode), RSRC2 (2 user SGPRs)
    struct.pack_into("<H", raw, 56, 1 << 3)                          # kernarg segment pointer in s[0:1]
    return bytes(raw)


@pytest.mark.parametrize("rsrc3,offset", [(0, 4), (1, 8), (3, 16), (0x3F, 256), (0x40 | 5, 24)])
def test_accum_offset_is_decoded_from_rsrc3(rsrc3, offset):
    """ACCUM_OFFSET: bits 5:0, granule 4, stored minus one (higher RSRC3 bits are other fields)."""
    assert _descriptor(_descriptor_bytes(rsrc3)).accum_offset == offset


@pytest.mark.parametrize("rsrc3,offset", [(1, 8), (3, 16)])
def test_a0_sits_at_the_descriptors_accum_offset(monkeypatch, rsrc3, offset):
    """Through the launch path: v[offset] and a0 are one register, and a load with acc=1 lands there."""
    src, out = bits(12), np.full(64, SENTINEL, np.uint32)
    kernarg = np.array([src.ctypes.data, out.ctypes.data], np.uint64)
    prog = [I.s_load_dwordx4(sdata=s[4:7], sbase=s[0:1], offset=0, imm=1),
            I.v_lshlrev_b32_e32(v[1], 2, v[0]),
            I.s_waitcnt(0xC07F),
            I.global_load_dword(vdst=v[0], addr=v[1], saddr=s[4:5], acc=1),     # a0 <- src
            I.s_waitcnt(0x0F70),
            I.v_add_u32_e32(v[offset], 1, v[offset]),                          # the same register as a0
            I.global_store_dword(addr=v[1], data=v[0], saddr=s[6:7], acc=1),   # out <- a0
            I.s_endpgm()]
    code = b"".join(i.to_bytes() for i in prog)
    meta = {".vgpr_count": offset + 4, ".agpr_count": 4, ".wavefront_size": 64, ".name": "k"}
    kernel = Kernel("k", code, _descriptor(_descriptor_bytes(rsrc3)), meta)
    fake = b"agpr-test-code-object-%d" % rsrc3
    monkeypatch.setattr(machine, "_parse", lambda data: CodeObject("gfx942", {"k": kernel}))
    mem = Memory()
    for name, arr in (("kernarg", kernarg), ("src", src)):
        mem.add(arr.ctypes.data, arr.nbytes, name, arr.view(np.uint8))
    mem.add(out.ctypes.data, out.nbytes, "out", out.view(np.uint8))
    machine.run_kernel(fake, "k", (1, 1, 1), (64, 1, 1), 0, kernarg.ctypes.data, mem)
    assert (out == src + np.uint32(1)).all()

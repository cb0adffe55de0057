"""The wait-count hazard checker (lnbench.emu.hazards) on raw machine code, rule by rule.

Each case assembles a few instructions with tinygrad's CDNA assembler and runs them as one wave with the
waitcnt checker on: a use of a register that a load not yet covered by an s_waitcnt writes must fault,
naming both PCs, the register, the counter and the wait that would have covered it; the same code with
that wait (and no stricter one) must run clean. The counter model follows the CDNA3 ISA: vmcnt and the
LDS part of lgkmcnt complete in issue order, SMEM may complete in any order (only lgkmcnt(0) covers it).
"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad")
from tinygrad.renderer.amd.dsl import s, v  # noqa: E402
from tinygrad.runtime.autogen.amd.cdna import ins as I  # noqa: E402

from lnbench.emu.hazards import WaitcntFault, waitcnt_fields  # noqa: E402
from lnbench.emu.machine import run_code  # noqa: E402
from lnbench.emu.memory import Memory  # noqa: E402

WAIT_ALL = 0xC07F                     # vmcnt(63) expcnt(7) lgkmcnt(0)


def lgkmcnt(n: int) -> int:
    return 0xC07F & ~0xF00 | (n << 8)


def vmcnt(n: int) -> int:
    return (0x0F70 | (n & 0xF) | ((n >> 4) << 14))


def run(*instrs, memory=None, sgpr=None, waves=1, lds_bytes=256):
    code = b"".join(i.to_bytes() for i in instrs) + I.s_endpgm().to_bytes()
    return run_code(code, waves=waves, lds_bytes=lds_bytes, memory=memory, sgpr=sgpr,
                    vgpr={0: np.arange(64) * 4}, checks=("memory", "lds", "waitcnt"))


def pcs(*instrs) -> list[int]:
    out, pc = [], 0
    for i in instrs:
        out.append(pc)
        pc += len(i.to_bytes())
    return out


def test_waitcnt_fields_decode_the_gfx9_layout():
    assert waitcnt_fields(WAIT_ALL) == (63, 7, 0)
    assert waitcnt_fields(vmcnt(2)) == (2, 7, 15)
    assert waitcnt_fields(vmcnt(40)) == (40, 7, 15)
    assert waitcnt_fields(lgkmcnt(3)) == (63, 7, 3)


def test_lds_read_used_before_its_wait_faults_with_both_pcs():
    prog = [I.ds_write_b32(addr=v[0], data0=v[0]), I.s_waitcnt(WAIT_ALL),
            I.ds_read_b32(vdst=v[4], addr=v[0]), I.v_add_u32_e32(v[5], v[4], v[0])]
    at = pcs(*prog)
    with pytest.raises(WaitcntFault) as info:
        run(*prog)
    msg = str(info.value)
    assert (f"wait-count hazard: v_add_u32 at PC 0x{at[3]:x} reads v4 while ds_read_b32 at PC 0x{at[2]:x} may "
            f"still be writing it (lgkmcnt; wave 0); s_waitcnt lgkmcnt(0) before PC 0x{at[3]:x} would cover it") in msg
    run(*prog[:3], I.s_waitcnt(lgkmcnt(0)), prog[3])                       # with the wait: clean


def test_lds_completes_in_order_so_a_partial_wait_covers_the_older_read():
    body = [I.ds_write_b32(addr=v[0], data0=v[0]), I.s_waitcnt(WAIT_ALL),
            I.ds_read_b32(vdst=v[4], addr=v[0]), I.ds_read_b32(vdst=v[5], addr=v[0]), I.s_waitcnt(lgkmcnt(1))]
    run(*body, I.v_mov_b32_e32(v[6], v[4]))                                # the older read is complete
    with pytest.raises(WaitcntFault, match=r"reads v5 .* s_waitcnt lgkmcnt\(0\)"):
        run(*body, I.v_mov_b32_e32(v[6], v[5]))                            # the newer one may not be


def test_overwriting_a_pending_load_destination_is_a_hazard():
    prog = [I.ds_write_b32(addr=v[0], data0=v[0]), I.s_waitcnt(WAIT_ALL),
            I.ds_read_b32(vdst=v[4], addr=v[0]), I.v_mov_b32_e32(v[4], 0)]
    with pytest.raises(WaitcntFault, match=r"v_mov_b32 at PC 0x\w+ overwrites v4 while ds_read_b32"):
        run(*prog)


def _kernarg() -> tuple[Memory, np.ndarray]:
    buf = np.arange(16, dtype=np.uint32) + 100
    mem = Memory()
    mem.add(buf.ctypes.data, buf.nbytes, "kernarg", buf.view(np.uint8))
    return mem, buf


def test_smem_completes_out_of_order_only_lgkmcnt_0_covers_it():
    mem, buf = _kernarg()
    sg = {0: buf.ctypes.data & 0xFFFFFFFF, 1: buf.ctypes.data >> 32}
    loads = [I.s_load_dword(sdata=s[4], sbase=s[0:1], offset=0, imm=1),
             I.s_load_dword(sdata=s[5], sbase=s[0:1], offset=4, imm=1)]
    with pytest.raises(WaitcntFault, match=r"reads s4 while s_load_dword at PC 0x0 .*\(lgkmcnt; wave 0\); "
                                           r"s_waitcnt lgkmcnt\(0\)"):
        run(*loads, I.s_waitcnt(lgkmcnt(1)), I.s_mov_b32(s[6], s[4]), memory=mem, sgpr=sg)
    w, _ = run(*loads, I.s_waitcnt(lgkmcnt(0)), I.s_add_u32(s[6], s[4], s[5]), memory=mem, sgpr=sg)
    assert int(w.S[0, 6]) == 201


def test_lds_behind_smem_is_covered_by_the_lds_order_alone():
    mem, buf = _kernarg()
    sg = {0: buf.ctypes.data & 0xFFFFFFFF, 1: buf.ctypes.data >> 32}
    body = [I.ds_write_b32(addr=v[0], data0=v[0]), I.s_waitcnt(WAIT_ALL),
            I.ds_read_b32(vdst=v[4], addr=v[0]), I.ds_read_b32(vdst=v[5], addr=v[0]),
            I.s_load_dword(sdata=s[4], sbase=s[0:1], offset=0, imm=1), I.s_waitcnt(lgkmcnt(1))]
    run(*body, I.v_mov_b32_e32(v[6], v[4]), memory=mem, sgpr=sg)          # at most one outstanding: not v4's
    with pytest.raises(WaitcntFault, match=r"reads v5"):
        run(*body, I.v_mov_b32_e32(v[6], v[5]), memory=mem, sgpr=sg)       # v5's read or the s_load may remain


def test_barrier_with_an_lds_store_outstanding_faults():
    prog = [I.ds_write_b32(addr=v[0], data0=v[0]), I.s_barrier()]
    at = pcs(*prog)
    with pytest.raises(WaitcntFault) as info:
        run(*prog)
    assert (f"wait-count hazard: s_barrier at PC 0x{at[1]:x} with ds_write_b32 at PC 0x{at[0]:x} not complete "
            f"(lgkmcnt; wave 0)") in str(info.value)
    run(prog[0], I.s_waitcnt(lgkmcnt(0)), prog[1])


def test_checker_off_lets_the_same_code_run():
    prog = [I.ds_write_b32(addr=v[0], data0=v[0]), I.s_waitcnt(WAIT_ALL),
            I.ds_read_b32(vdst=v[4], addr=v[0]), I.v_add_u32_e32(v[5], v[4], v[0])]
    code = b"".join(i.to_bytes() for i in prog) + I.s_endpgm().to_bytes()
    w, profile = run_code(code, lds_bytes=256, vgpr={0: np.arange(64) * 4}, checks=("memory", "lds"))
    assert profile.checks == ("memory", "lds")
    assert (w.V[0, 5] == np.arange(64) * 8).all()


def test_every_wave_bookkeeping_in_c_matches_the_numpy_path():
    """A step of every wave runs the checker's bookkeeping in the native helper, any other step in numpy: the same
    random run of issues, waits and register uses, driven once with slice(None) and once with the waves' indices,
    leaves the same state after every step and faults at the same step with the same message."""
    from lnbench.emu.decode import Instr
    from lnbench.emu.hazards import LDS, SMEM, VM, Access, WaitcntChecker, _bits

    rng = np.random.default_rng(0)
    waves, vgprs = 5, 24
    every, listed = WaitcntChecker(waves, vgprs, "k"), WaitcntChecker(waves, vgprs, "k")
    names = {VM: "buffer_load_dword", LDS: "ds_read_b32", SMEM: "s_load_dword"}
    messages: list[str] = []
    for step in range(400):
        pc = 4 * step
        roll = rng.random()
        if roll < 0.35:                                   # a load of some kind into 1-3 registers
            kind = int(rng.integers(0, 3))
            loads = np.unique(rng.integers(128, 128 + vgprs, int(rng.integers(1, 4)))).astype(np.int64)
            acc = Access(np.zeros(0, np.int64), np.zeros(0, np.int64), kind, loads, bool(rng.random() < 0.2),
                         load_bits=_bits([int(r) for r in loads]), always=True)
            ins = Instr(pc, 8, names[kind], "MUBUF", {}, {})
        elif roll < 0.6:                                  # a wait
            simm = int(rng.choice([0xC07F, vmcnt(int(rng.integers(0, 4))), lgkmcnt(int(rng.integers(0, 3)))]))
            acc = Access(np.zeros(0, np.int64), np.zeros(0, np.int64), always=True)
            ins = Instr(pc, 4, "s_waitcnt", "SOPP", {"simm16": simm}, {})
        else:                                             # an ALU op reading and writing registers
            reads = np.unique(rng.integers(128, 128 + vgprs, 2)).astype(np.int64)
            writes = np.unique(rng.integers(128, 128 + vgprs, 1)).astype(np.int64)
            acc = Access(reads, writes, read_bits=_bits([int(r) for r in reads]),
                         write_bits=_bits([int(r) for r in writes]))
            ins = Instr(pc, 4, "v_add_u32", "VOP2", {}, {})
        got = []
        for checker, sel in ((every, slice(None)), (listed, np.arange(waves))):
            try:
                checker.check(ins, acc, sel)
                got.append("")
            except WaitcntFault as exc:
                got.append(str(exc))
        assert got[0] == got[1], step
        if got[0]:
            messages.append(got[0])
            every.done[:] = every.issued                 # as if waited: go on from a clean state
            listed.done[:] = listed.issued
            every.live = listed.live = False
            every.maybe[:] = listed.maybe[:] = False
            every.maybe_bits = listed.maybe_bits = 0
        for name in ("issued", "done", "score", "kind", "pc", "maybe", "newest", "lds_store", "lds_store_pc"):
            np.testing.assert_array_equal(getattr(every, name), getattr(listed, name), err_msg=f"{name} at {step}")
        assert (every.live, every.maybe_bits) == (listed.live, listed.maybe_bits), step
    assert len(messages) > 5                              # the run did find hazards (and went on past them)

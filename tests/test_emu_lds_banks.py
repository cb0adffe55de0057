"""LDS bank conflicts counted by the emulator's ds_read/ds_write handlers (lnbench/emu/lds_banks.py): known
conflict-free, broadcast and conflicting address patterns give the clocks the 32-bank model says."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tinygrad")

from tinygrad.renderer.amd.dsl import v  # noqa: E402
from tinygrad.runtime.autogen.amd.cdna import ins as I  # noqa: E402

from lnbench.emu.lds_banks import bank_cycles  # noqa: E402
from lnbench.emu.machine import run_code  # noqa: E402

LANE = np.arange(64)


def profile_of(*instrs, waves=1, **kw):
    code = b"".join(i.to_bytes() for i in instrs) + I.s_endpgm().to_bytes()
    _, profile = run_code(code, waves=waves, lds_bytes=64 * 1024, **kw)
    return profile


@pytest.mark.parametrize("stride_bytes, clocks, conflicts", [
    (4, 2, 0),           # consecutive dwords: 32 banks per 32-lane pass, two passes per wave64
    (0, 2, 0),           # every lane reads one dword: a broadcast
    (8, 4, 2),           # stride 2 dwords: 16 banks, two dwords each: 2-way
    (128, 64, 62),       # stride 32 dwords: one bank, 32 distinct dwords per pass: 32-way
    (132, 2, 0),         # stride 33 dwords: every lane its own bank
])
def test_ds_read_b32_bank_clocks_follow_the_address_stride(stride_bytes, clocks, conflicts):
    p = profile_of(I.ds_read_b32(vdst=v[1], addr=v[0]), vgpr={0: LANE * stride_bytes})
    assert (p.lds_bank_cycles, p.lds_conflict_cycles) == (clocks, conflicts)


def test_ds_write_counts_conflicts_like_reads_and_per_wave():
    p = profile_of(I.ds_write_b32(addr=v[0], data0=v[1]), vgpr={0: LANE * 128, 1: LANE}, waves=1)
    assert (p.lds_bank_cycles, p.lds_conflict_cycles) == (64, 62)
    clean = profile_of(I.ds_write_b32(addr=v[0], data0=v[1]), vgpr={0: LANE * 4, 1: LANE}, waves=1)
    assert (clean.lds_bank_cycles, clean.lds_conflict_cycles) == (2, 0)


def test_wide_accesses_use_fewer_lanes_per_pass():
    """ds_read_b128 moves 16 bytes a lane: 8 lanes fill a 128-byte pass, 8 passes for a wave64."""
    p = profile_of(I.ds_read_b128(vdst=v[4:7], addr=v[0]), vgpr={0: LANE * 16})
    assert (p.lds_bank_cycles, p.lds_conflict_cycles) == (8, 0)
    p = profile_of(I.ds_read_b64(vdst=v[4:5], addr=v[0]), vgpr={0: LANE * 256})     # all in banks 0 and 1
    assert (p.lds_bank_cycles, p.lds_conflict_cycles) == (4 * 16, 4 * 15)


def test_inactive_lanes_cost_nothing_and_waves_with_different_patterns_add_up():
    p = profile_of(I.ds_read_b32(vdst=v[1], addr=v[0]), vgpr={0: LANE * 128}, exec_mask=0xFFFFFFFF)
    assert (p.lds_bank_cycles, p.lds_conflict_cycles) == (32, 31)        # one pass of 32 lanes, 32-way
    mixed = np.stack([LANE * 4, LANE * 128])                              # wave 0 clean, wave 1 32-way
    p = profile_of(I.ds_read_b32(vdst=v[1], addr=v[0]), vgpr={0: mixed}, waves=2)
    assert (p.lds_bank_cycles, p.lds_conflict_cycles) == (2 + 64, 62)


def test_bank_cycles_of_identical_waves_scale_with_the_wave_count():
    rows, lanes = np.repeat(np.arange(3), 64), np.tile(LANE, 3)
    addrs = (np.tile(LANE, 3) * 128)[:, None]
    assert bank_cycles(rows, lanes, addrs, 1, 3) == (3 * 64, 3 * 2)

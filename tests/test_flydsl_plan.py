"""Launch-geometry choices (pure Python, no compile)."""
import math

import pytest

from lnbench.constants import ELEM_BYTES
from lnbench.flydsl import geometry


@pytest.mark.parametrize("dtype,vec", [("bf16", 8), ("f16", 8), ("f32", 4)])
def test_vector_width_is_16_bytes_when_n_allows(dtype, vec):
    for n in (64, 1000, 2048, 4096, 5120, 8192, 12288, 16384):
        p = geometry.row_plan(n, dtype)
        assert p.vec == vec and p.vectorized, (n, p)
        assert p.vec * ELEM_BYTES[dtype] == 16


@pytest.mark.parametrize("n,vec", [(1, 1), (7, 1), (257, 1), (6, 2), (12, 4), (1002, 2)])
def test_ragged_n_uses_largest_aligned_width(n, vec):
    p = geometry.row_plan(n, "bf16")
    assert p.vec == vec
    assert p.vectorized is False
    assert p.chunks * p.vec == n


def test_tiles_cover_the_row_and_mask_flag():
    for n in (1, 7, 64, 257, 1000, 2048, 4096, 5120, 8192, 12288, 12289, 16384, 24577, 32768, 32776, 65536,
              100003, 262144, 10 ** 6):
        for dt in ("bf16", "f16", "f32"):
            for kind in ("fwd", "bwd"):
                p = geometry.row_plan(n, dt, kind)
                assert p.tiles * p.lanes >= p.chunks > (p.tiles - 1) * p.lanes
                assert p.masked == (p.chunks % p.lanes != 0)
                assert p.block <= geometry.MAX_BLOCK
                # a power of two of lanes below a wave, else whole waves: no fewer would hold the tiles
                assert p.lanes & (p.lanes - 1) == 0 if p.lanes < 64 else p.lanes % 64 == 0, (n, dt, kind)
                if p.lanes > 64 and not p.streaming:
                    assert (p.lanes - 64) * p.tiles < p.chunks, (n, dt, kind)
                assert p.full_tiles == p.chunks // p.lanes
                if p.streaming:                          # registers hold the head only
                    assert p.head * p.vec <= geometry.STREAM_HEAD_ELEMS and p.head <= p.full_tiles
                else:
                    assert p.head == p.tiles and p.elems_per_thread <= geometry.elem_budget(kind, p.vec)


def test_small_rows_share_blocks():
    p = geometry.row_plan(128, "bf16")
    assert p.lanes < 64 and p.rows_per_block > 1
    assert p.block == p.lanes * p.rows_per_block <= geometry.SMALL_ROW_BLOCK
    assert p.lanes * p.vec * p.tiles >= 128
    one = geometry.row_plan(1, "f32")
    assert one.lanes == 1 and one.rows_per_block == geometry.SMALL_ROW_BLOCK
    assert p.grid(1000) == -(-1000 // p.rows_per_block)


def test_wide_rows_use_one_block_per_row():
    p = geometry.row_plan(8192, "bf16")
    assert p.rows_per_block == 1 and p.lanes >= 64 and p.waves_per_row == p.lanes // 64


def test_misaligned_pointer_forces_narrow_access():
    assert geometry.row_plan(4096, "bf16", align_elems=1).vec == 1
    assert geometry.row_plan(4096, "bf16", align_elems=4).vec == 4
    assert geometry.row_plan(4096, "f32", align_elems=2).vec == 2


#: geometry of the register paths, pinned (issue 19 item 4 changed it on purpose: the forward fills its element
#: budget, 64 on 16-byte 16-bit rows, and rows of a wave or more take whole waves, as few as hold the tiles)
#: (issue 31 item 9: a one-wave backward row shares its block with 3 more, so the persistent grid fills every SIMD)
#: (n, dtype, kind) -> (vec, lanes, rows_per_block, tiles, mode)
REGISTER_PLANS = {
    (1, "f32", "fwd"): (1, 1, 256, 1, "registers"),
    (257, "bf16", "bwd"): (1, 64, 4, 5, "registers"),
    (512, "bf16", "bwd"): (8, 64, 4, 1, "registers"),
    (512, "bf16", "fwd"): (8, 8, 32, 8, "registers"),
    (1000, "f16", "fwd"): (8, 16, 16, 8, "registers"),
    (64, "bf16", "fwd"): (8, 1, 256, 8, "registers"),
    (4096, "bf16", "fwd"): (8, 64, 1, 8, "registers"),
    (4096, "bf16", "bwd"): (8, 512, 1, 1, "registers"),
    (5120, "bf16", "fwd"): (8, 128, 1, 5, "registers"),
    (8192, "bf16", "fwd"): (8, 128, 1, 8, "registers"),
    (8192, "f32", "bwd"): (4, 1024, 1, 2, "registers"),
    (12287, "f32", "bwd"): (1, 1024, 1, 12, "registers"),
    (12288, "bf16", "bwd"): (8, 768, 1, 2, "registers"),
    (12289, "f32", "fwd"): (1, 448, 1, 28, "registers"),
    (16384, "f16", "bwd"): (8, 1024, 1, 2, "registers"),
    (24576, "f32", "bwd"): (4, 1024, 1, 6, "workspace"),
    (32768, "f32", "fwd"): (4, 1024, 1, 8, "registers"),
    (32768, "bf16", "bwd"): (8, 1024, 1, 4, "workspace"),
    (32767, "bf16", "fwd"): (1, 1024, 1, 32, "registers"),
    (65536, "bf16", "fwd"): (8, 1024, 1, 8, "registers"),
}


@pytest.mark.parametrize("key", sorted(REGISTER_PLANS))
def test_register_path_geometry_is_unchanged(key):
    p = geometry.row_plan(*key)
    assert (p.vec, p.lanes, p.rows_per_block, p.tiles, p.mode) == REGISTER_PLANS[key]
    assert not p.streaming and p.head == p.tiles


def test_rows_past_the_register_budget_stream():
    p = geometry.row_plan(geometry.max_n("bf16") * 2, "bf16")
    assert p.streaming and p.mode == "stream"
    assert not geometry.fits_in_registers(10 ** 6, "bf16")
    assert geometry.fits_in_registers(32768, "bf16", "bwd") and geometry.fits_in_registers(32768, "f32", "fwd")
    assert geometry.fits_in_registers(65536, "bf16", "fwd") and geometry.max_n("bf16") == 65536
    assert not geometry.fits_in_registers(32776, "f32", "fwd")        # one chunk per lane past 32 elements
    assert not geometry.fits_in_registers(65544, "bf16", "fwd")       # one chunk per lane past 64 elements


@pytest.mark.parametrize("n,dtype", [(131072, "bf16"), (65536, "f32"), (100003, "f16"), (262144, "f32"),
                                     (65544, "bf16"), (10 ** 7 + 1, "bf16")])
def test_streaming_geometry(n, dtype):
    f, b = geometry.row_plan(n, dtype, "fwd"), geometry.row_plan(n, dtype, "bwd")
    for p in (f, b):
        assert p.streaming and p.lanes == geometry.MAX_BLOCK and p.rows_per_block == 1
        assert p.vec == geometry.row_plan(n, dtype).vec                # 16-byte accesses wherever N allows
    # forward: 32 elements per thread of register head (the pivot), all of them full tiles
    assert f.head * f.vec == geometry.STREAM_HEAD_ELEMS and f.head <= f.full_tiles
    assert f.step == geometry.STREAM_FWD_STEP[f.vec] and f.batch == 1
    # backward: nothing kept, rows in batches sharing the workspace read-modify-write
    assert b.head == 0 and b.batch == geometry.STREAM_BWD_BATCH and b.step == 1
    assert not b.acc_in_registers


def test_rows_beyond_a_buffer_descriptor_are_refused():
    top = geometry.MAX_ROW_BYTES // 4
    assert geometry.row_plan(top, "bf16", "bwd").streaming
    with pytest.raises(ValueError, match="buffer descriptor"):
        geometry.row_plan(top + 1, "bf16")


def test_scalar_backward_rows_leave_registers_before_they_spill():
    """Measured: register mode spilled at 13 scalar tiles (N = 12289), workspace mode at 29-32 (f16)."""
    mode = lambda n, dt="f32": geometry.row_plan(n, dt, "bwd").mode  # noqa: E731
    assert mode(12287) == "registers" and geometry.row_plan(12287, "f32", "bwd").tiles == 12
    assert mode(12289) == "workspace" and mode(16385) == "workspace" and mode(24575, "f16") == "workspace"
    assert mode(24577) == "stream" and mode(30001, "f16") == "stream" and mode(32767, "bf16") == "stream"
    assert mode(32766, "bf16") == "workspace"                           # 16 tiles of 2: not scalar
    # the forward holds 32 scalar tiles without spilling: it streams only past the element budget
    assert geometry.row_plan(32767, "f16", "fwd").mode == "registers"


def test_backward_accumulates_in_registers_for_moderate_rows():
    assert geometry.row_plan(8192, "bf16", "bwd").acc_in_registers
    assert not geometry.row_plan(32768, "f32", "bwd").acc_in_registers
    assert not geometry.row_plan(12289, "f32", "bwd").acc_in_registers


@pytest.mark.parametrize("arch,cus", [("gfx942", 304), ("gfx950", 256)])
def test_streaming_backward_programs_own_whole_batches(arch, cus):
    p = geometry.row_plan(65536, "bf16", "bwd")
    assert geometry.bwd_programs(1, p, arch) == 1
    assert geometry.bwd_programs(7, p, arch) == -(-7 // p.batch)           # every program has a batch
    assert geometry.bwd_programs(10 ** 6, p, arch) == cus                  # one 1024-thread program per CU


@pytest.mark.parametrize("arch,cus", [("gfx942", 304), ("gfx950", 256)])
def test_backward_programs_scale_with_m_and_cus(arch, cus):
    p = geometry.row_plan(4096, "bf16", "bwd")
    assert geometry.bwd_programs(1, p, arch) == 1
    assert geometry.bwd_programs(64, p, arch) == 64 // geometry.MIN_ROWS_PER_PROGRAM
    assert geometry.bwd_programs(10 ** 7, p, arch) == geometry.PROGRAMS_PER_CU * cus
    small = geometry.row_plan(64, "bf16", "bwd")
    groups = -(-4096 // small.rows_per_block)
    assert geometry.bwd_programs(4096, small, arch) == min(2 * cus, -(-groups // geometry.MIN_ROWS_PER_PROGRAM))


def test_workspace_mode_programs_own_fewer_rows():
    """512x32768 bf16 (partials read-modify-written in the workspace row): 128 programs of 4 rows, not 64 of 8
    (whose VALU floor on the busiest CU exceeded the memory floor); register-path rows keep 8 per program."""
    ws = geometry.row_plan(32768, "bf16", "bwd")
    assert ws.mode == "workspace"
    assert geometry.bwd_programs(512, ws, "gfx950") == 512 // geometry.MIN_ROWS_PER_PROGRAM_WS == 128
    reg = geometry.row_plan(16384, "bf16", "bwd")
    assert reg.mode == "registers" and geometry.bwd_programs(1024, reg, "gfx950") == 128


def test_reduce_plan():
    r = geometry.reduce_plan(4096)
    assert r.vec == 4 and r.grid() * r.strip >= 4096
    assert geometry.reduce_plan(7).vec == 1 and geometry.reduce_plan(6).vec == 2
    for n in (1, 7, 256, 4097, 65536, 2 ** 28):
        r = geometry.reduce_plan(n)
        assert r.grid() * r.strip >= n > (r.grid() - 1) * r.strip
        assert r.block == r.cols * r.splits <= geometry.REDUCE_BLOCK
        assert r.splits * n * 4 <= geometry.MAX_ROW_BYTES            # a split's byte offset fits Int32


def test_reduce_spreads_narrow_rows_over_workgroups_and_waves():
    """N = 256: the partial rows are summed by 64 workgroups of 4 waves (one 4-column chunk, 256 row splits
    each: 2 of the 512 rows per thread on gfx950), not by 4 workgroups of 16 splits (32 rows per thread, the
    busiest CU's VALU 2.7 times the launch's memory floor); the splits' sums added by a tree of 8, 8, 4."""
    r = geometry.reduce_plan(256)
    assert r.grid() == 64 and r.block == 256 and r.splits == 256 and r.fans == (8, 8, 4)
    assert [geometry.reduce_plan(n).grid() for n in (512, 768, 1000, 1024, 4096, 16384)] == [64, 96, 125, 64, 64,
                                                                                            256]


def test_reduce_tree_adds_every_split_once():
    """The combine's levels multiply to the splits (each split's sum is added exactly once), the first level
    gives every thread a job, and none is longer than the first level's 2·vec or REDUCE_FAN."""
    for n in (1, 6, 7, 256, 512, 1000, 4096, 65536, 2 ** 28):
        r = geometry.reduce_plan(n)
        assert math.prod(r.fans) == r.splits
        assert max(r.fans) <= max(2 * r.vec, geometry.REDUCE_FAN)
        if r.splits >= 2 * r.vec:
            assert r.splits // r.fans[0] * 2 * r.strip == r.block


def test_deterministic_backward_writes_one_partial_row_per_program():
    small = geometry.row_plan(256, "bf16", "bwd")
    assert small.rows_per_block == 8
    assert geometry.bwd_partial_rows(100, small, "deterministic") == 100
    assert geometry.bwd_partial_rows(100, small, "atomic") == 800       # the atomic kernel's own slots


def test_dtype_names():
    import torch
    assert geometry.dtype_name(torch.bfloat16) == "bf16"
    assert geometry.dtype_name("float32") == "f32"
    with pytest.raises(ValueError):
        geometry.dtype_name(torch.int8)

"""Launch-geometry choices (pure Python, no compile)."""
import pytest

from lnbench.flydsl import config


@pytest.mark.parametrize("dtype,vec", [("bf16", 8), ("f16", 8), ("f32", 4)])
def test_vector_width_is_16_bytes_when_n_allows(dtype, vec):
    for n in (64, 1000, 2048, 4096, 5120, 8192, 12288, 16384):
        p = config.row_plan(n, dtype)
        assert p.vec == vec and p.vectorized, (n, p)
        assert p.vec * config.ELEM_BYTES[dtype] == 16


@pytest.mark.parametrize("n,vec", [(1, 1), (7, 1), (257, 1), (6, 2), (12, 4), (1002, 2)])
def test_ragged_n_uses_largest_aligned_width(n, vec):
    p = config.row_plan(n, "bf16")
    assert p.vec == vec
    assert p.vectorized is False
    assert p.chunks * p.vec == n


def test_tiles_cover_the_row_and_mask_flag():
    for n in (1, 7, 64, 257, 1000, 2048, 4096, 5120, 8192, 12288, 16384, 32768):
        for dt in ("bf16", "f16", "f32"):
            for kind in ("fwd", "bwd"):
                p = config.row_plan(n, dt, kind)
                assert p.tiles * p.lanes >= p.chunks > (p.tiles - 1) * p.lanes
                assert p.masked == (p.chunks % p.lanes != 0)
                assert p.block <= config.MAX_BLOCK and p.lanes & (p.lanes - 1) == 0
                assert p.elems_per_thread <= config.MAX_ELEMS_PER_THREAD[kind]


def test_small_rows_share_blocks():
    p = config.row_plan(128, "bf16")
    assert p.lanes < 64 and p.rows_per_block > 1
    assert p.block == p.lanes * p.rows_per_block <= config.SMALL_ROW_BLOCK
    assert p.lanes * p.vec * p.tiles >= 128
    one = config.row_plan(1, "f32")
    assert one.lanes == 1 and one.rows_per_block == config.SMALL_ROW_BLOCK
    assert p.grid(1000) == -(-1000 // p.rows_per_block)


def test_wide_rows_use_one_block_per_row():
    p = config.row_plan(8192, "bf16")
    assert p.rows_per_block == 1 and p.lanes >= 64 and p.waves_per_row == p.lanes // 64


def test_misaligned_pointer_forces_narrow_access():
    assert config.row_plan(4096, "bf16", align_elems=1).vec == 1
    assert config.row_plan(4096, "bf16", align_elems=4).vec == 4
    assert config.row_plan(4096, "f32", align_elems=2).vec == 2


def test_too_wide_rows_are_refused():
    with pytest.raises(ValueError, match="register budget"):
        config.row_plan(config.max_n("bf16") * 2, "bf16")
    assert not config.fits_in_registers(10 ** 6, "bf16")
    assert config.fits_in_registers(32768, "bf16", "bwd")


def test_backward_accumulates_in_registers_for_moderate_rows():
    assert config.row_plan(8192, "bf16", "bwd").acc_in_registers
    assert not config.row_plan(32768, "f32", "bwd").acc_in_registers


@pytest.mark.parametrize("arch,cus", [("gfx942", 304), ("gfx950", 256)])
def test_backward_programs_scale_with_m_and_cus(arch, cus):
    p = config.row_plan(4096, "bf16", "bwd")
    assert config.bwd_programs(1, p, arch) == 1
    assert config.bwd_programs(64, p, arch) == 64 // config.MIN_ROWS_PER_PROGRAM
    assert config.bwd_programs(10 ** 7, p, arch) == config.PROGRAMS_PER_CU * cus
    small = config.row_plan(64, "bf16", "bwd")
    groups = -(-4096 // small.rows_per_block)
    assert config.bwd_programs(4096, small, arch) == min(2 * cus, -(-groups // config.MIN_ROWS_PER_PROGRAM))


def test_reduce_plan():
    r = config.reduce_plan(4096)
    assert r.vec == 4 and r.grid() * r.block * r.vec >= 4096
    assert config.reduce_plan(7).vec == 1 and config.reduce_plan(6).vec == 2


def test_dtype_names():
    import torch
    assert config.dtype_name(torch.bfloat16) == "bf16"
    assert config.dtype_name("float32") == "f32"
    with pytest.raises(ValueError):
        config.dtype_name(torch.int8)

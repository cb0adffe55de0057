"""The deterministic backward's plan chooser (lnbench/flydsl/bwd_plan.py, issue 55): over a grid of M·N from 2^20 to
2^26 and N from 256 to 65536 (odd N and M < 256 included), every plan's distinct bytes stay within 1.15× of the
compulsory bytes and its launches are memory-bound on all four targets, by the bound the plan reports; the
exceptions are the smallest ops only, named with their reason."""
import pytest

from lnbench.flydsl import bwd_plan, geometry
from lnbench.perf.bytes_model import flydsl_bwd_workspace, op_bytes, traffic_bytes

NS = (256, 257, 1000, 1024, 2048, 4096, 4097, 8192, 12289, 16384, 32768, 65535, 65536)
SIZES = (20, 22, 24, 26)
GRID = [(max(1, (1 << s) // n), n) for s in SIZES for n in NS]
ARCHES = ("gfx942", "gfx950")


def _targets(arch):
    return bwd_plan.default_targets(arch)


def test_the_grid_holds_odd_n_and_few_rows():
    assert any(n % 2 for _, n in GRID) and min(m for m, _ in GRID) < 256
    assert {t.name for a in ARCHES for t in _targets(a)} == {"MI300X", "MI325X", "MI350X", "MI355X"}


@pytest.mark.parametrize("dtype", ["bf16", "f16", "f32"])
@pytest.mark.parametrize("arch", ARCHES)
def test_every_grid_shape_stays_within_budget(arch, dtype):
    for m, n in GRID:
        plan = bwd_plan.choose(m, n, dtype, _targets(arch))
        assert plan.compulsory_bytes == op_bytes("bwd", m, n, {"f32": 4}.get(dtype, 2))
        assert plan.distinct_bytes <= 1.15 * plan.compulsory_bytes, (m, n, plan.describe())
        assert plan.model_bytes >= plan.distinct_bytes


def _small(m, n, dtype, arch=""):
    """The exceptions: ops of at most 2^20 elements and N <= 4097 (at most 13 MB, 2.4 µs of HBM time on the slowest
    target), where the launch of fewest bytes has less memory time than its waves' fixed VALU work (set-up,
    reductions: ~40 wave-instructions, 0.07 µs); and, on gfx950, 16-bit rows of odd N = 4097 at 2^22, whose
    scalar-width strips execute more VALU per element (docs/measurements.md, issue 55)."""
    small = m * n <= 1 << 20 and n <= 4097
    return small or (arch == "gfx950" and dtype != "f32" and n == 4097 and m * n <= 1 << 22)


@pytest.mark.parametrize("dtype", ["bf16", "f32"])
@pytest.mark.parametrize("arch", ARCHES)
def test_every_grid_shape_is_memory_bound_by_its_reported_bound(arch, dtype):
    targets = _targets(arch)
    failing = []
    for m, n in GRID:
        plan = bwd_plan.choose(m, n, dtype, targets)
        for t in targets:
            bound = plan.bound(t.name)
            assert bound == ("memory" if plan.worst_ratio(t.name) <= 1.0 else bound)     # reported = its ratios
            if bound != "memory":
                failing.append((m, n))
    assert failing and all(_small(m, n, dtype, arch) for m, n in failing), failing


def test_today_s_grid_is_kept_where_it_is_within_budget():
    targets = _targets("gfx950")
    plan = bwd_plan.choose(65536, 1024, "bf16", targets)            # 2^26: today's 512 programs, 2 % partials
    rp = geometry.row_plan(1024, "bf16", "bwd")
    assert plan.kind == "rows" and plan.programs == geometry.bwd_programs(65536, rp, "gfx950")
    ws = traffic_bytes(flydsl_bwd_workspace(65536, 1024, "bf16", "deterministic", "gfx950"))
    assert plan.distinct_bytes == plan.compulsory_bytes + ws


def test_fewer_programs_where_today_s_partials_exceed_the_budget():
    plan = bwd_plan.choose(4096, 4096, "bf16", _targets("gfx950"))  # today: 512 programs, 33 % partials
    assert plan.kind == "rows" and plan.programs < 512
    assert 16 * plan.programs * 4096 <= 0.15 * plan.compulsory_bytes
    assert plan.bound() == "memory"


def test_few_long_rows_take_the_strip_plan_and_say_where_the_second_read_comes_from():
    plan = bwd_plan.choose(16, 65536, "bf16", _targets("gfx942"))
    assert plan.kind == "strip" and plan.relies_on_llc and plan.partial_rows == 0
    e = 2
    assert plan.model_bytes - plan.distinct_bytes == 2 * 16 * 65536 * e          # x and dy read twice
    assert plan.strips * plan.strip >= 65536 and plan.bound() == "memory"
    assert "LLC" in plan.describe()


def test_chunks_keep_a_chunk_s_x_and_dy_within_half_the_infinity_cache():
    plan = bwd_plan.choose(1024, 65536, "f32", _targets("gfx950"))
    if plan.kind == "strip":
        assert 2 * plan.chunk_rows * 65536 * 4 <= 0.5 * 256 * 2 ** 20 and plan.chunks >= 2
    big = bwd_plan._strip(1024, 65536, "bf16", "gfx942", _targets("gfx942"), 512, 16, 1)
    assert big is not None and big.chunks == 2 and big.partial_rows == 2                              # 256 MB of x and dy


def test_choose_refuses_targets_of_two_arches_and_empty_shapes():
    with pytest.raises(ValueError):
        bwd_plan.choose(4, 256, "bf16", _targets("gfx942") + _targets("gfx950"))
    with pytest.raises(ValueError):
        bwd_plan.choose(0, 256, "bf16", _targets("gfx942"))

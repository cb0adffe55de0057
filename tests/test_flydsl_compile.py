"""Compile-only matrix (no GPU): every kernel variant for gfx942 and gfx950, checked from the
compiled ISA metadata. One test per (arch, dtype, op, N) compiles that op's kernels for both ABIs: the forward's
fwd and fwd-nostats, the backward's deterministic (main + reduce) and atomic kernels.
N covers the register paths, odd N above 8192 (scalar tiles: the backward once spilled at 12289) and
rows that stream (65536 but for the 16-bit forward, 262144): no spills and no scratch anywhere.

The default run compiles, per dtype and op, one N of each of that op's kernel paths (what decides the code of
geometry.row_plan's plan: access width, lanes per row, rows per block, streaming, masking) — the N of that path with
the most elements per thread, where registers run out first: 8-9 of the 16 N for each op. The forward and the
backward plan their rows apart, so a path of one is not compiled again for a new path of the other (244 compiles an
arch where pairs of paths took 320). LNBENCH_FULL_MATRIX=1 compiles every N (the sweep before a kernel change
lands)."""
import os

import pytest

pytest.importorskip("flydsl")

from lnbench.flydsl import geometry  # noqa: E402
from lnbench.flydsl.guard import FlyDSLCompileError, guarded_compile  # noqa: E402
from lnbench.flydsl.inspect import compile_facts, facts_to_rows  # noqa: E402
from lnbench.flydsl.toolkit import toolkit_info  # noqa: E402

if toolkit_info().kind == "missing":  # pragma: no cover
    pytest.skip("no linker toolkit (install ziglang)", allow_module_level=True)

ARCHES = ("gfx942", "gfx950")
DTYPES = ("f32", "f16", "bf16")
NS = (1, 7, 64, 257, 1000, 2048, 4096, 5120, 8192, 12288, 12289, 16384, 24577, 32768, 65536, 262144)
FULL_MATRIX = os.environ.get("LNBENCH_FULL_MATRIX") == "1"
#: (pointer args, 4-byte scalars) of each kernel, by kernel-name prefix
SIGNATURES = {"ln_fwd_nostats": (4, 1), "ln_fwd": (6, 1), "ln_bwd_reduce": (4, 1), "ln_bwd": (10, 2)}


def _signature(f):
    key = "ln_fwd_nostats" if (f.op == "fwd-nostats") else (
        "ln_bwd_reduce" if "reduce" in f.kernel_name else ("ln_fwd" if f.op == "fwd" else "ln_bwd"))
    return SIGNATURES[key]


#: the kernels of each op's test, by variant name: (op, dgamma strategy)
OP_VARIANTS = {"fwd": {"fwd": ("fwd", "deterministic"), "fwd-nostats": ("fwd-nostats", "deterministic")},
               "bwd": {"bwd-det": ("bwd", "deterministic"), "bwd-atomic": ("bwd", "atomic")}}


def _variants(arch, dtype, n, op):
    return {(abi, variant): compile_facts(kernel_op, dtype, n, abi, arch, dgamma_strategy=strategy)
            for abi in ("pointer", "tensor") for variant, (kernel_op, strategy) in OP_VARIANTS[op].items()}


def _path(plan: geometry.RowPlan) -> tuple:
    """What decides the code a row plan compiles to (not N itself)."""
    return (plan.vec, plan.vectorized, plan.lanes > 64, plan.rows_per_block > 1, plan.streaming, plan.batch,
            plan.head > 0, plan.masked, plan.step)


def matrix_ns(dtype: str, op: str) -> list[int]:
    """Every N (LNBENCH_FULL_MATRIX=1), else per path of `op`'s row plan the N with the most elements per thread."""
    if FULL_MATRIX:
        return list(NS)
    paths: dict[tuple, tuple[int, int]] = {}
    for n in NS:
        plan = geometry.row_plan(n, dtype, op)
        paths[_path(plan)] = max(paths.get(_path(plan), (0, 0)), (plan.elems_per_thread, n))
    return sorted(n for _, n in paths.values())


def test_the_default_matrix_keeps_a_variant_of_every_path_and_the_odd_n_that_once_spilled():
    for dtype in DTYPES:
        for op in OP_VARIANTS:
            kept = matrix_ns(dtype, op)
            paths = {_path(geometry.row_plan(n, dtype, op)) for n in NS}
            assert len(kept) == len(paths) and 262144 in kept, (dtype, op, kept)
            assert {_path(geometry.row_plan(n, dtype, op)) for n in kept} == paths, (dtype, op, kept)
        assert 12289 in matrix_ns(dtype, "bwd"), dtype


@pytest.mark.parametrize("arch,dtype,op,n", [(a, d, op, n) for a in ARCHES for d in DTYPES for op in OP_VARIANTS
                                             for n in matrix_ns(d, op)])
def test_compile_matrix(arch, dtype, op, n):
    v = _variants(arch, dtype, n, op)
    if op == "bwd":
        assert len(v[("pointer", "bwd-det")]) == 2 and len(v[("pointer", "bwd-atomic")]) == 1
    plan = geometry.row_plan(n, dtype, op)
    for (abi, variant), facts in v.items():
        for f in facts:
            where = f"{arch} {dtype} N={n} {abi} {variant} {f.kernel_name}"
            assert f.arch == arch and f.n == n and f.abi == abi
            assert f.scratch_bytes == 0, where
            assert f.vgpr_spills == 0 and f.sgpr_spills == 0, where
            assert f.vgpr <= 128, where                       # fits 16 waves/CU (1024-thread blocks)
            if f.vectorized:
                assert f.loads_128bit, where
                if "reduce" not in f.kernel_name:
                    assert f.stores_128bit, where
            if abi == "pointer":
                ptrs, scalars = _signature(f)
                assert f.kernarg_bytes == 8 * ptrs + 4 * scalars, where
                assert [s for _, s, _ in f.kernel_args] == [8] * ptrs + [4] * scalars, where
                assert f.launcher_slots == ptrs + scalars + 1, where   # + stream
    for variant in OP_VARIANTS[op]:
        for p, t in zip(v[("pointer", variant)], v[("tensor", variant)]):
            assert p.kernarg_bytes < t.kernarg_bytes, (variant, p.kernel_name)
            assert p.launcher_slots < t.launcher_slots
    # vectorized paths are exactly those the plan marks (16-byte access)
    first = "fwd" if op == "fwd" else "bwd-det"
    assert v[("pointer", first)][0].vectorized == plan.vectorized


def test_streaming_code_size_does_not_grow_with_n():
    """Streaming rows are a runtime loop: 4x the row, the same code (only loop bounds and immediates differ)."""
    for op, strategy in (("fwd", "deterministic"), ("bwd", "deterministic"), ("bwd", "atomic")):
        a = compile_facts(op, "bf16", 131072, "pointer", "gfx942", dgamma_strategy=strategy)[0]
        b = compile_facts(op, "bf16", 524288, "pointer", "gfx942", dgamma_strategy=strategy)[0]
        assert abs(a.instruction_count - b.instruction_count) <= 0.02 * a.instruction_count, (op, strategy)
        # reduction partials only: 4 per wave (gfx950's in-wave butterfly covers 16 lanes; lds_floats allocates for
        # it on either arch), columns padded to 16 banks: 1.5 KB at 16 waves
        assert a.lds_bytes == b.lds_bytes <= 2048


@pytest.mark.parametrize("abi", ["pointer", "tensor"])
def test_streaming_partial_tile_fits_the_registers(abi):
    """N = 65544 bf16 (32776 in the backward): a partial tile past the register head. The backward's per-tile
    descriptors peak at ~100 SGPRs here on gfx942 (software bf16 rounding): the tightest streaming variant
    measured."""
    for op, strategy, n in (("fwd", "deterministic", 65544), ("bwd", "deterministic", 32776),
                            ("bwd", "atomic", 32776)):
        assert geometry.row_plan(n, "bf16", op).streaming
        for f in compile_facts(op, "bf16", n, abi, "gfx942", dgamma_strategy=strategy):
            assert f.vgpr_spills == f.sgpr_spills == f.scratch_bytes == 0, (op, strategy, f.kernel_name)
            assert f.loads_128bit and (f.stores_128bit or "reduce" in f.kernel_name)


def test_ragged_rows_use_narrow_access_and_no_128bit_ops():
    f = compile_facts("fwd", "bf16", 257, "pointer", "gfx942")[0]
    assert not f.vectorized and not f.loads_128bit and not f.stores_128bit


def test_stats_variant_writes_stats_and_nostats_does_not():
    with_stats = compile_facts("fwd", "bf16", 4096, "pointer", "gfx942")[0]
    without = compile_facts("fwd-nostats", "bf16", 4096, "pointer", "gfx942")[0]
    assert with_stats.kernarg_bytes - without.kernarg_bytes == 16     # Mean and Rstd pointers
    assert with_stats.instruction_count > without.instruction_count


def test_arches_differ_in_isa():
    a = compile_facts("fwd", "bf16", 4096, "pointer", "gfx942")[0]
    b = compile_facts("fwd", "bf16", 4096, "pointer", "gfx950")[0]
    assert (a.arch, b.arch) == ("gfx942", "gfx950")
    assert a.instruction_count != b.instruction_count    # gfx950 has v_cvt_pk_bf16_f32


def test_facts_to_rows_flattens_args():
    rows = facts_to_rows(compile_facts("fwd", "f32", 64, "pointer", "gfx942"))
    assert rows[0].kernel_args.startswith("0:8:global_buffer")
    assert rows[0].dtype == "f32" and rows[0].n == 64


def _big_lds_launcher():
    """A kernel asking for 80 000 bytes of LDS (over gfx942's 64 KiB)."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx

    @fx.struct
    class Big:
        buf: fx.Array[fx.Float32, 20000, 16]

    @flyc.kernel
    def big_lds(X: fx.Pointer):
        part = fx.SharedAllocator().allocate(Big).peek().buf.view(fx.make_layout(20000, 1))
        fx.memref_store(fx.Float32(1.0), part, fx.thread_idx.x)
        fx.gpu.barrier()
        v = fx.memref_load(part, fx.thread_idx.x + 1)
        (X + fx.Int64(fx.thread_idx.x)).store(v)

    @flyc.jit
    def launch_big(X: fx.Pointer, stream: fx.Stream = fx.Stream(None)):
        big_lds(X).launch(grid=(1, 1, 1), block=(64, 1, 1), stream=stream)

    return launch_big


def test_printed_llvm_error_is_a_failure():
    """Pitfall 7: an LDS overflow makes LLVM print `error:` yet flyc.compile returns normally."""
    import flydsl.compiler as flyc
    import flydsl.expr as fx
    from lnbench.flydsl.toolkit import compile_env
    launcher = _big_lds_launcher()
    ptr = flyc.from_c_void_p(fx.Float32, None)
    env = compile_env("gfx950", compile_only=True)
    env["FLYDSL_RUNTIME_ENABLE_CACHE"] = "0"
    guarded_compile(flyc.compile, launcher, ptr, None, env=env)            # fits gfx950's 160 KiB
    env.update(ARCH="gfx942", FLYDSL_GPU_ARCH="gfx942")
    with pytest.raises(FlyDSLCompileError, match="error"):
        guarded_compile(flyc.compile, _big_lds_launcher(), ptr, None, env=env)

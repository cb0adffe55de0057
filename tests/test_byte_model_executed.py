"""The byte model of `lnbench perf` checked by execution: the bytes the emulated FlyDSL kernels move, per buffer.

The model counts compulsory traffic, so it is compared with the distinct bytes each launch touches per buffer
(the emulator's touched-byte maps), summed over the op's launches (a partial row written by the main kernel and
read by the reduce kernel counts twice, as in the model's workspace term). Instruction bytes are reported next
to it: the backward must read x and dy once; γ/β are re-read per row group (caches serve that on hardware).
"""
from __future__ import annotations

import pytest

from lnbench.perf.bytes_model import flydsl_bwd_workspace, op_traffic, traffic_bytes

pytestmark = pytest.mark.rocm

KERNARG = "kernarg segment"
ELEM = {"f32": 4, "f16": 2, "bf16": 2}
#: what the atomic backward's wrapper writes with a torch cast around the kernel (not a kernel's traffic)
CAST_WRITTEN = ("dweight", "dbias")
#: "a few percent": the largest relative difference between model and execution a test accepts
TOLERANCE = 0.03


def model_traffic(op: str, m: int, n: int, dtype: str, strategy: str, arch: str) -> dict[str, tuple[int, int]]:
    """The model's per-buffer (read, written) bytes of the op's kernels, workspace included."""
    traffic = dict(op_traffic(op, m, n, ELEM[dtype]))
    if op == "bwd":
        traffic.update(flydsl_bwd_workspace(m, n, dtype, strategy, arch))
        if strategy == "atomic":
            for name in CAST_WRITTEN:
                traffic.pop(name)
    return traffic


def executed_traffic(kernels, unique: bool = True) -> dict[str, tuple[int, int]]:
    """Per buffer over all launches of the op: (loaded, stored), distinct bytes or instruction bytes."""
    out: dict[str, tuple[int, int]] = {}
    for kernel in kernels:
        for name, b in kernel.buffers.items():
            if name == KERNARG:
                continue
            ld, st = (b["unique_loaded"], b["unique_stored"]) if unique else (b["loaded"], b["stored"])
            r0, w0 = out.get(name, (0, 0))
            out[name] = (r0 + ld, w0 + st)
    return {k: v for k, v in out.items() if v != (0, 0)}


def mismatches(model: dict[str, tuple[int, int]], executed: dict[str, tuple[int, int]]) -> list[str]:
    """Buffers where the model and the executed distinct bytes differ (empty: they agree exactly)."""
    out = []
    for name in sorted(set(model) | set(executed)):
        want, got = model.get(name, (0, 0)), executed.get(name, (0, 0))
        if want != got:
            out.append(f"{name}: model reads/writes {want}, kernels {got}")
    return out


def agreement(model: dict[str, tuple[int, int]], executed: dict[str, tuple[int, int]]) -> float:
    """Executed total / model total."""
    return traffic_bytes(executed) / traffic_bytes(model)


CASES = [
    # op, strategy, dtype, M, N: wide rows (one block per row), narrow rows sharing blocks with a ragged M,
    # and rows past the backward's register budget (partials read-modify-written in the workspace row)
    ("fwd", "", "bf16", 64, 1024),
    ("fwd-nostats", "", "bf16", 64, 1024),
    ("bwd", "deterministic", "bf16", 64, 1024),
    ("bwd", "atomic", "bf16", 64, 1024),
    ("fwd", "", "f16", 100, 64),
    ("bwd", "deterministic", "f16", 100, 64),
    ("bwd", "atomic", "f32", 16, 4096),
    ("bwd", "deterministic", "bf16", 3, 32768),
    ("bwd", "deterministic", "f32", 5, 65536),       # streaming: one batch per program, no read-back
]


@pytest.mark.parametrize("op, strategy, dtype, m, n", CASES)
def test_executed_kernels_move_exactly_the_modelled_bytes(op, strategy, dtype, m, n):
    from lnbench.flydsl.inspect import execute_variant
    kernels = execute_variant(op, dtype, m, n, "pointer", "gfx942", dgamma_strategy=strategy or "deterministic",
                              seed=3)
    model = model_traffic(op, m, n, dtype, strategy, "gfx942")
    executed = executed_traffic(kernels)
    assert mismatches(model, executed) == []
    assert abs(agreement(model, executed) - 1.0) <= TOLERANCE


@pytest.mark.parametrize("strategy", ["deterministic", "atomic"])
def test_backward_reads_x_and_dy_once(strategy):
    """Instruction bytes, not distinct bytes: a second pass over x or dy would show here."""
    from lnbench.flydsl.inspect import execute_variant
    m, n = 64, 1024
    kernels = execute_variant("bwd", "bf16", m, n, "pointer", "gfx942", dgamma_strategy=strategy, seed=3)
    moved = executed_traffic(kernels, unique=False)
    assert moved["x"] == (m * n * 2, 0) and moved["dy"] == (m * n * 2, 0) and moved["dx"] == (0, m * n * 2)


@pytest.mark.parametrize("m, n, dtype, second", [(5, 65536, "f32", 0), (12, 32768, "bf16", 3)])
def test_backward_reads_back_only_partial_rows_it_wrote_before(m, n, dtype, second):
    """Rows past the register budget accumulate dγ/dβ in their program's partial row, read-modify-write; a
    program's first row group only writes it (no zeroing pass, no read of it), so the main kernel reads back
    the rows of the programs that own a second group alone: none when every program owns one streaming batch
    (f32 65536: 3 programs of 2 rows), all 3 at bf16 32768 with 12 rows (3 programs of 4)."""
    from lnbench.flydsl import geometry
    from lnbench.flydsl.inspect import execute_variant
    kernels = execute_variant("bwd", dtype, m, n, "pointer", "gfx942", seed=3)
    main = kernels[0].buffers
    plan = geometry.row_plan(n, dtype, "bwd")
    assert geometry.bwd_programs(m, plan, "gfx942") >= second
    for name in ("wsg", "wsb"):
        assert main[name]["unique_loaded"] == second * n * 4
        assert main[name]["unique_stored"] == geometry.bwd_programs(m, plan, "gfx942") * n * 4


def test_forward_rereads_gamma_and_beta_per_row_which_the_model_does_not_count():
    from lnbench.flydsl import geometry
    from lnbench.flydsl.inspect import execute_variant
    m, n = 64, 1024
    (kernel,) = execute_variant("fwd", "bf16", m, n, "pointer", "gfx942", seed=3)
    assert kernel.grid[0] == m // geometry.row_plan(n, "bf16").rows_per_block < m     # several rows per block
    for name in ("weight", "bias"):
        moved = kernel.buffers[name]
        assert moved["unique_loaded"] == n * 2                    # the model's term
        assert moved["loaded"] == m * n * 2                       # every row's lanes read it again


def test_mismatch_check_catches_a_model_without_workspace():
    """Planted: the deterministic backward's model without its partials must disagree with execution."""
    from lnbench.flydsl.inspect import execute_variant
    m, n = 64, 1024
    kernels = execute_variant("bwd", "bf16", m, n, "pointer", "gfx942", seed=3)
    planted = dict(op_traffic("bwd", m, n, 2))
    problems = mismatches(planted, executed_traffic(kernels))
    assert any(p.startswith("wsg:") for p in problems) and any(p.startswith("wsb:") for p in problems)
    assert agreement(planted, executed_traffic(kernels)) > 1.0 + TOLERANCE

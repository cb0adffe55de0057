"""The backward's plans (lnbench/flydsl/bwd_plan.py, issue 55) executed on the kernel device: the strip plan (final
dγ/dβ, and partial rows with the reduce; chunks of rows) and the rows plan at the chooser's P, each within the pass
rule against fp64, and dγ/dβ bitwise equal across repeated runs, both ABIs and a fresh process (what `--jobs`
workers are)."""
from __future__ import annotations

import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from ln_reference import ATOL, DTYPES, inputs, max_err, reference, torch_same_dtype

from lnbench.flydsl import bwd_plan, launch

pytestmark = [pytest.mark.rocm]
ROOT = Path(__file__).resolve().parent.parent


def _case(m, n, dt, seed=3):
    x, w, b, dy = inputs(m, n, dt, seed)
    y, mean, rstd = launch.forward(x, w, b, 1e-5)
    return x, w, b, dy, mean, rstd


def _check(x, w, b, dy, got):
    m = x.shape[0]
    dt = next(k for k, v in DTYPES.items() if v == x.dtype)
    ref, base = reference(x, w, b, dy), torch_same_dtype(x, w, b, dy)
    for name, value in zip(("dx", "dweight", "dbias"), got):
        scale = m ** 0.5 if name != "dx" else 1.0
        err, allowed = max_err(value, ref[name]), 2 * max_err(base[name], ref[name]) + ATOL[dt] * scale
        assert err <= allowed, (name, err, allowed)


@pytest.mark.parametrize("m,n,dt,kind,partial", [(16, 65536, "bf16", "strip", False),
                                                 (128, 8192, "bf16", "strip", False),   # two-stage combine
                                                 (256, 16384, "bf16", "strip", True),
                                                 (4096, 256, "bf16", "rows", True)])
def test_the_chosen_plan_is_accurate_and_bitwise_reproducible_across_runs_and_abis(kernel_device, m, n, dt, kind,
                                                                                   partial):
    plan = bwd_plan.plan_for(m, n, DTYPES[dt], kernel_device.arch)
    assert plan.kind == kind and (plan.partial_rows > 0) == partial
    x, w, b, dy, mean, rstd = _case(m, n, dt)
    first = launch.backward(dy, x, w, mean, rstd, abi="pointer")
    _check(x, w, b, dy, first)
    for abi in ("pointer", "tensor"):
        again = launch.backward(dy, x, w, mean, rstd, abi=abi)
        for a, c in zip(first, again):
            assert torch.equal(a.view(torch.int16), c.view(torch.int16)), abi


def test_chunks_of_rows_give_the_same_values_within_the_rule(kernel_device, monkeypatch):
    """A plan of two chunks (a smaller last-level cache forces them): each chunk's row sums and strips, two
    partial rows added by the reduce; the rows past M in the last chunk's groups are masked."""
    m, n, dt = 200, 4096, "bf16"
    small = [dataclasses.replace(t, llc_mib=2.0 * m * n * 2 / 2 ** 20) for t in bwd_plan.default_targets(
        kernel_device.arch)]
    plan = bwd_plan._strip(m, n, dt, kernel_device.arch, small, 512, 1, 1)
    assert plan is not None and plan.chunks == 2 and plan.partial_rows == 2 and plan.chunk_rows * 2 >= m
    monkeypatch.setattr(bwd_plan, "plan_for", lambda *_a, **_k: plan)
    x, w, b, dy, mean, rstd = _case(m, n, dt)
    _check(x, w, b, dy, launch.backward(dy, x, w, mean, rstd, abi="tensor"))


def test_a_fresh_process_gives_the_same_bits(kernel_device, tmp_path):
    """A verify worker is a fresh process: the plan is a function of (M, N, dtype, arch) alone, so its dγ/dβ bits
    match this process's."""
    m, n, dt = 256, 16384, "bf16"
    x, w, b, dy, mean, rstd = _case(m, n, dt)
    _, dw, db = launch.backward(dy, x, w, mean, rstd)
    out = tmp_path / "bits.pt"
    script = textwrap.dedent(f"""
        import sys, torch
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        from lnbench.run.device import resolve_device
        resolve_device("emu:{kernel_device.arch}")
        from ln_reference import inputs
        from lnbench.flydsl import launch
        x, w, b, dy = inputs({m}, {n}, "{dt}", 3)
        y, mean, rstd = launch.forward(x, w, b, 1e-5)
        _, dw, db = launch.backward(dy, x, w, mean, rstd)
        torch.save((dw, db), {str(out)!r})
    """)
    if not kernel_device.emulated:
        pytest.skip("the fresh process activates the emulated device")
    subprocess.run([sys.executable, "-c", script], check=True, cwd=ROOT, timeout=600)
    dw2, db2 = torch.load(out)
    assert torch.equal(dw.view(torch.int16), dw2.view(torch.int16))
    assert torch.equal(db.view(torch.int16), db2.view(torch.int16))


@pytest.mark.parametrize("arch,shapes", [("gfx942", "256x4097,16x65536"), ("gfx950", "128x8192,64x16384")])
def test_verify_passes_at_grid_shapes_of_the_strip_plan(tmp_path, results_dir, arch, shapes):
    """`lnbench verify` on the emulated arch at grid shapes (M·N = 2^20) whose backward takes the strip plan: odd N,
    M < 256, N = 65536; every check of both ABIs passes (the offset rows' dγ/dβ included)."""
    import pandas as pd
    from cli_helpers import invoke

    from lnbench.run.device import emulator_status
    if not emulator_status()[0]:
        pytest.skip("the emulator is unavailable")
    for shape in shapes.split(","):
        m, n = (int(v) for v in shape.split("x"))
        assert bwd_plan.plan_for(m, n, torch.bfloat16, arch).kind == "strip"
    out = tmp_path / "v.csv"
    result = invoke("verify", "--device", f"emu:{arch}", "--backend", "flydsl,flydsl-tensor", "--dtype", "bf16",
                    "--shapes", shapes, "--csv", str(out))
    assert result.exit_code == 0, result.output
    frame = pd.read_csv(out)
    assert set(frame["status"]) == {"PASS"} and {"dweight", "dbias"} <= set(frame["tensor"])
    assert set(frame["shape"]) >= set(shapes.split(","))

"""The backward's persistent grid when a launch has more programs than row groups.

A register-path program runs its first row group before its loop (that group starts its dγ/dβ partials). Such a
program with no group (more programs than groups: bwd_programs never makes one, but the launcher takes any p)
must move nothing: its first group's accesses are masked, its partial row is zeros, and the results match the
usual grid's. Without the mask it reads and writes the rows past M (the emulator's memory checker faults).
"""
from __future__ import annotations

import pytest
import torch

pytestmark = pytest.mark.rocm


@pytest.mark.parametrize("m,n", [(5, 1024), (3, 256)])       # one row per block; 8 rows per block (one group)
def test_programs_without_a_row_group_move_nothing(kernel_device, monkeypatch, m, n):
    from lnbench.flydsl import geometry, launch

    gen = torch.Generator().manual_seed(m * 131 + n)
    x = torch.randn(m, n, generator=gen)
    w = torch.rand(n, generator=gen) + 0.5
    dy = torch.randn(m, n, generator=gen)
    dev = kernel_device.torch_device
    x, w, dy = (t.to(dev) for t in (x, w, dy))
    _, mean, rstd = launch.forward(x, w, torch.zeros_like(w), 1e-5)
    want = launch.backward(dy, x, w, mean, rstd)
    plan = geometry.row_plan(n, x.dtype, "bwd")
    assert plan.acc_in_registers
    groups = -(-m // plan.rows_per_block)
    monkeypatch.setattr(geometry, "bwd_programs", lambda *_a, **_k: groups + 3)
    got = launch.backward(dy, x, w, mean, rstd)
    assert torch.equal(got[0], want[0])                        # dx: the same rows, the same arithmetic
    for g, r in zip(got[1:], want[1:]):                        # dγ, dβ: other programs, another order of adds
        torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-5)

"""Buffer lifetimes on the emulated device (issue: the Pointer-ABI backward wrote to freed workspace).

A raw pointer carries no lifetime. The wrappers must own every buffer whose pointer they pass until the
launch has run, and the memory checker names a buffer that was freed before a launch touched it.
"""
from __future__ import annotations

import gc

import pytest
import torch

from lnbench.run.device import emulator_status, resolve_device
from lnbench.emu.errors import EmulatorFault

pytestmark = pytest.mark.skipif(not emulator_status()[0], reason=f"emulator unavailable: {emulator_status()[1]}")


def _inputs(m: int = 16, n: int = 256):
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(m, n, generator=gen)
    w = torch.rand(n, generator=gen) + 0.5
    dy = torch.randn(m, n, generator=gen)
    return x, w, dy


def test_pointer_backward_keeps_workspace_alive_until_it_runs():
    """Fails on the old wrapper: its closure held only data_ptr() ints, so wsg/wsb were freed before the
    kernel ran and the emulator's memory checker faulted (or, on a GPU, the block was reused)."""
    resolve_device("emu")
    from lnbench.flydsl import launch
    x, w, dy = _inputs()
    _, mean, rstd = launch.forward(x, w, torch.zeros_like(w), 1e-5)
    call, (dx, dw, db) = launch._backward_call(dy, x, w, mean, rstd, "pointer", "deterministic")
    gc.collect()
    torch.empty(1 << 20).fill_(7.0)             # reuse whatever memory was freed
    call()
    ref = launch.backward(dy, x, w, mean, rstd, abi="pointer")
    for got, want in zip((dx, dw, db), ref):
        assert torch.equal(got, want)


def test_checker_names_a_buffer_freed_before_its_launch():
    """The old pattern, by hand: pointers taken, the workspace tensor dropped, then the launch."""
    dev = resolve_device("emu")
    from lnbench.emu import runtime
    from lnbench.flydsl import geometry, launch
    x, w, dy = _inputs()
    m, n = x.shape
    _, mean, rstd = launch.forward(x, w, torch.zeros_like(w), 1e-5)
    plan = geometry.row_plan(n, x.dtype, "bwd")
    p = geometry.bwd_programs(m, plan, dev.arch)
    main_fn, _ = launch.bwd_compiled(plan, "deterministic", "pointer", dev, None, None)
    dx, acc = torch.empty_like(x), torch.zeros(n)

    def pointers_only():
        wsg, wsb = torch.empty(p * plan.rows_per_block, n), torch.empty(p * plan.rows_per_block, n)
        runtime.track_lifetimes({"wsg": wsg, "wsb": wsb})
        return [t.data_ptr() for t in (x, dy, w, mean, rstd, dx, wsg, wsb, acc, acc)]

    args = pointers_only()
    gc.collect()
    kept = {"x": x, "dy": dy, "weight": w, "mean": mean, "rstd": rstd, "dx": dx, "acc": acc}
    with pytest.raises(EmulatorFault) as fault:
        with runtime.launch_scope(kept):
            main_fn(*args, m, p, None)
    text = str(fault.value)
    assert "freed before the launch ran" in text
    assert "'wsg'" in text or "'wsb'" in text
    assert "ln_bwd_f32_n256_pointer_det" in text and "PC 0x" in text

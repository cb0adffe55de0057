"""The perf peers `compile` and `liger` on a CPU-only machine: honest availability, clear errors, and the
Liger call wiring checked against a stand-in module with liger-kernel 0.8.x's signatures."""
from __future__ import annotations

import sys
import types

import pytest
import torch

from lnbench.backends import get_backend
from lnbench.run.device import resolve_device
from lnbench.perf.workloads import build_workload, workspace_bytes

CPU = torch.device("cpu")


def test_compile_backend_ops_and_backward_message():
    backend = get_backend("compile")
    assert backend.name == "compile" and backend.ops == ("fwd", "fwd+bwd")
    with pytest.raises(NotImplementedError, match="fwd\\+bwd"):
        backend.backward(*(torch.zeros(2, 4),) * 2, torch.ones(4), torch.zeros(2), torch.ones(2))


def test_compile_backend_needs_a_cxx_compiler_on_cpu(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.delenv("CXX", raising=False)
    avail = get_backend("compile").availability(resolve_device("cpu"))
    assert not avail.runnable and "C++ compiler" in avail.reason


def test_liger_without_liger_kernel_is_not_run_with_the_install_hint(monkeypatch):
    import importlib.util
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None)
    avail = get_backend("liger").availability(resolve_device("cpu"))
    assert not avail.runnable and avail.reason == "liger-kernel not installed (pip install 'liger-kernel>=0.6')"


def _fake_liger(monkeypatch) -> dict:
    """A stand-in liger_kernel.ops.layer_norm with 0.8.x's call signatures (fp32 stats, as in 0.8.5)."""
    calls: dict = {}

    def layer_norm_forward(X, W, B, eps):
        y, mean, rstd = torch.ops.aten.native_layer_norm(X, [X.shape[-1]], W, B, eps)
        return y, X, mean.reshape(-1), rstd.reshape(-1), 1024, 4

    def layer_norm_backward(dY, X, W, B, Mean, RSTD):
        calls["B_dtype"] = B.dtype
        dx, dw, db = torch.ops.aten.native_layer_norm_backward(
            dY, X, [X.shape[-1]], Mean.reshape(-1, 1), RSTD.reshape(-1, 1), W, W, [True, True, True])
        return dx, dw, db

    class LigerLayerNormFunction:
        @staticmethod
        def apply(X, W, B, eps):
            calls["apply"] = True
            return torch.nn.functional.layer_norm(X, (X.shape[-1],), W, B, eps)

    ln = types.ModuleType("liger_kernel.ops.layer_norm")
    ln.layer_norm_forward, ln.layer_norm_backward = layer_norm_forward, layer_norm_backward
    ln.LigerLayerNormFunction = LigerLayerNormFunction
    ops = types.ModuleType("liger_kernel.ops")
    ops.layer_norm = ln
    pkg = types.ModuleType("liger_kernel")
    pkg.ops = ops
    for name, module in (("liger_kernel", pkg), ("liger_kernel.ops", ops), ("liger_kernel.ops.layer_norm", ln)):
        monkeypatch.setitem(sys.modules, name, module)
    return calls


def test_liger_wiring_against_the_0_8_signatures(monkeypatch):
    calls = _fake_liger(monkeypatch)
    backend = get_backend("liger")
    x, w, b = torch.randn(6, 32), torch.rand(32) + 0.5, torch.randn(32)
    y, mean, rstd = backend.forward(x, w, b, 1e-5)
    ref = torch.nn.functional.layer_norm(x, (32,), w, b, 1e-5)
    assert torch.allclose(y, ref, atol=1e-6) and mean.shape == (6,) and rstd.dtype == torch.float32
    assert backend.forward(x, w, b, 1e-5, store_stats=False)[1] is None
    dx, dw, db = backend.backward(torch.randn(6, 32), x, w, mean, rstd)
    assert dx.shape == x.shape and dw.shape == db.shape == (32,) and calls["B_dtype"] == w.dtype
    backend.layernorm(x, w, b, 1e-5)
    assert calls["apply"]
    # the harness times it like any backend (availability aside); workspace is declared only on a GPU
    w_load = build_workload(backend, "bwd", "hot", 6, 32, torch.float32, CPU)
    w_load.fn()
    assert workspace_bytes(backend, "bwd", 6, 32, CPU) == 0
    assert "fwd-nostats" not in backend.ops

"""Liger-Kernel's Triton LayerNorm (liger_kernel.ops.layer_norm), an optional peer (`pip install liger-kernel`).

Imported lazily: this module loads without liger-kernel. Calls, as in liger-kernel 0.8.x:
    layer_norm_forward(X, W, B, eps) -> (Y, X, Mean, RSTD, BLOCK_SIZE, num_warps)
    layer_norm_backward(dY, X, W, B, Mean, RSTD) -> (DX, DW, DB)
    LigerLayerNormFunction.apply(X, W, B, eps) -> Y   (the public autograd path)
Mean/RSTD are returned exactly as Liger allocates them (X.dtype in older releases, fp32 in newer ones), never
cast, so `verify` reports their dtype honestly. Backward writes per-SM fp32 dγ/dβ partials (SM count × N
each) and sums them: declared to `perf` as workspace traffic. No atomics: deterministic.
"""
from __future__ import annotations

import importlib.util

import torch

from lnbench.backends.base import Availability, Backend
from lnbench.run.device import Device
from lnbench.machine.install import install_hint

INSTALL_HINT = f"liger-kernel not installed ({install_hint('peers')})"


def _ops():
    from liger_kernel.ops import layer_norm as ln  # noqa: PLC0415 - optional dependency, imported on use
    return ln


class LigerBackend(Backend):
    name = "liger"
    description = "Liger-Kernel Triton LayerNorm (liger_kernel.ops.layer_norm)"
    deterministic = True
    ops = ("fwd", "bwd", "fwd+bwd")  # Liger always writes the stats: no fwd-nostats variant

    def availability(self, device: Device) -> Availability:
        if importlib.util.find_spec("liger_kernel") is None:
            return Availability(False, INSTALL_HINT)
        if not device.is_gpu or not torch.cuda.is_available():
            return Availability(False, "needs a CUDA/ROCm GPU")
        if importlib.util.find_spec("triton") is None:
            return Availability(False, "liger-kernel needs triton (not installed)")
        return Availability(True)

    def preload(self) -> None:
        _ops()

    def forward(self, x, weight, bias, eps, store_stats=True):
        y, _x, mean, rstd, _block, _warps = _ops().layer_norm_forward(x, weight, bias, eps)
        if not store_stats:
            return y, None, None
        return y, mean.reshape(-1), rstd.reshape(-1)

    def backward(self, dy, x, weight, mean, rstd):
        # B only sets dβ's dtype inside Liger; γ has the same dtype and shape.
        return _ops().layer_norm_backward(dy, x, weight, weight, mean, rstd)

    def layernorm(self, x, weight, bias, eps):
        return _ops().LigerLayerNormFunction.apply(x, weight, bias, eps)

    def perf_workspace_bytes(self, op: str, m: int, n: int, device: torch.device) -> int:
        """bwd: fp32 dγ and dβ partials, SM count × N each, written by the kernel and read back by the sum."""
        if op not in ("bwd", "fwd+bwd") or device.type != "cuda":
            return 0
        sms = torch.cuda.get_device_properties(device).multi_processor_count
        return 2 * (2 * sms * n * 4)

"""ATen's native LayerNorm (torch.ops.aten.native_layer_norm / _backward) on any device torch sees."""
from __future__ import annotations

import torch

from lnbench.backends.base import Availability, Backend
from lnbench.run.device import Device

_HALF = (torch.float16, torch.bfloat16)


def _param(t: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """γ/β as ATen should see them.

    ATen's CPU kernel returns mean/rstd in x's dtype unless the parameters are fp32 (its mixed-type
    path, same y bit for bit); on GPUs the stats are already fp32. Upcasting γ/β is exact.
    """
    if x.device.type == "cpu" and x.dtype in _HALF:
        return t.float()
    return t


class TorchBackend(Backend):
    name = "torch"
    description = "ATen native_layer_norm / native_layer_norm_backward"
    deterministic = True

    def availability(self, device: Device) -> Availability:
        if device.is_gpu and not torch.cuda.is_available():
            return Availability(False, "torch sees no GPU")
        return Availability(True)

    def forward(self, x, weight, bias, eps, store_stats=True):
        n = x.shape[-1]
        y, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], _param(weight, x), _param(bias, x), eps)
        if not store_stats:
            return y, None, None
        return y, mean.reshape(-1), rstd.reshape(-1)

    def backward(self, dy, x, weight, mean, rstd):
        n = x.shape[-1]
        w = _param(weight, x)
        dx, dw, db = torch.ops.aten.native_layer_norm_backward(
            dy, x, [n], mean.reshape(-1, 1), rstd.reshape(-1, 1), w, w, [True, True, True])
        return dx, dw.to(weight.dtype), db.to(weight.dtype)

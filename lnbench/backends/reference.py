"""The fp64 reference: torch autograd of F.layer_norm on fp64 upcasts of the same rounded inputs."""
from __future__ import annotations

import torch
import torch.nn.functional as F

TENSORS: tuple[str, ...] = ("y", "mean", "rstd", "dx", "dweight", "dbias")


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, dy: torch.Tensor,
              eps: float) -> dict[str, torch.Tensor]:
    """fp64 y, mean, rstd, dx, dweight, dbias for LayerNorm over the last dim (any leading dims).

    mean/rstd come from aten.native_layer_norm in fp64 and are flattened to one value per row.
    """
    n = x.shape[-1]
    x64 = x.detach().double().requires_grad_(True)
    w64 = weight.detach().double().requires_grad_(True)
    b64 = bias.detach().double().requires_grad_(True)
    with torch.enable_grad():
        y = F.layer_norm(x64, (n,), w64, b64, eps)
        y.backward(dy.detach().double())
    _, mean, rstd = torch.ops.aten.native_layer_norm(x64.detach(), [n], None, None, eps)
    return {
        "y": y.detach(), "mean": mean.reshape(-1), "rstd": rstd.reshape(-1),
        "dx": x64.grad, "dweight": w64.grad, "dbias": b64.grad,
    }

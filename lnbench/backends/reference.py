"""The fp64 reference: ATen's LayerNorm forward and backward (what torch autograd of F.layer_norm runs) on fp64
upcasts of the same rounded inputs."""
from __future__ import annotations

import torch

TENSORS: tuple[str, ...] = ("y", "mean", "rstd", "dx", "dweight", "dbias")


def reference(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, dy: torch.Tensor,
              eps: float) -> dict[str, torch.Tensor]:
    """fp64 y, mean, rstd, dx, dweight, dbias for LayerNorm over the last dim (any leading dims), mean and rstd
    flattened to one value per row. One forward, whose mean and rstd the backward uses, as autograd's does:
    the same values as y.backward(dy) through F.layer_norm (tests/test_verify.py), without a second forward."""
    n = x.shape[-1]
    x64, w64, b64 = x.detach().double(), weight.detach().double(), bias.detach().double()
    y, mean, rstd = torch.ops.aten.native_layer_norm(x64, [n], w64, b64, eps)
    dx, dweight, dbias = torch.ops.aten.native_layer_norm_backward(dy.detach().double(), x64, [n], mean, rstd, w64,
                                                                   b64, [True, True, True])
    return {"y": y, "mean": mean.reshape(-1), "rstd": rstd.reshape(-1), "dx": dx, "dweight": dweight, "dbias": dbias}

"""torch.autograd glue over any backend (lnbench's FlyDSL kernels, a kernel source): LayerNorm over any leading
dimensions, its backward through the backend's own."""
from __future__ import annotations

from typing import Any

import torch

from lnbench.errors import ContractError


def to_2d(x: torch.Tensor) -> tuple[torch.Tensor, torch.Size]:
    """(M, N) contiguous view/copy of x and the shape to restore; M = prod(leading dims)."""
    if x.dim() < 1:
        raise ContractError("x must have at least one dimension (the normalized one)")
    shape = x.shape
    return x.reshape(-1, shape[-1]).contiguous(), shape


def from_2d(y: torch.Tensor, shape: torch.Size) -> torch.Tensor:
    return y.reshape(shape)


class BackendLayerNormFn(torch.autograd.Function):
    """Saves x and the fp32 stats of any backend's forward; its backward runs the backend's backward (lnbench's
    kernels, or a kernel source through the builder contract)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                backend: Any) -> torch.Tensor:
        x2, shape = to_2d(x)
        y, mean, rstd = backend.forward(x2, weight, bias, eps, store_stats=True)
        ctx.save_for_backward(x2, weight, mean, rstd)
        ctx.backend = backend
        ctx.shape = shape
        return from_2d(y, shape)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor):
        x2, weight, mean, rstd = ctx.saved_tensors
        dy2, _ = to_2d(dy)
        dx, dw, db = ctx.backend.backward(dy2, x2, weight, mean, rstd)
        return from_2d(dx, ctx.shape), dw, db, None, None


def backend_layernorm(backend: Any, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor,
                      eps: float = 1e-5) -> torch.Tensor:
    """LayerNorm over the last dimension through `backend` (autograd-aware), any leading dimensions."""
    return BackendLayerNormFn.apply(x, weight, bias, float(eps), backend)

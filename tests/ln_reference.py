"""The LayerNorm results a kernel test checks against (test_emu_matrix.py, test_flydsl_long_rows.py): the fp64
reference of every forward and backward output of seeded inputs, torch's own result in the inputs' dtype (the flash-attention rule's
|err_torch_same_dtype|), and the largest difference of a result from a reference."""
from __future__ import annotations

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}
#: the rule's absolute term per dtype: |err| <= 2 |err_torch_same_dtype| + ATOL
ATOL = {"f32": 1e-5, "f16": 2e-3, "bf16": 1.6e-2}
EPS = 1e-5


def inputs(m: int, n: int, dtype: str, seed: int, offset: float = 0.0
           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Seeded x (M × N, shifted by `offset`), weight (0.5 to 1.5), bias and dy, in `dtype`."""
    gen = torch.Generator().manual_seed(seed)
    dt = DTYPES[dtype]
    x = (torch.randn(m, n, generator=gen) + offset).to(dt)
    w = (torch.rand(n, generator=gen) + 0.5).to(dt)
    b = torch.randn(n, generator=gen).to(dt)
    dy = torch.randn(m, n, generator=gen).to(dt)
    return x, w, b, dy


def reference(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, dy: torch.Tensor, eps: float = EPS
              ) -> dict[str, torch.Tensor]:
    """y, mean, rstd, dx, dweight and dbias in fp64."""
    xd, wd = x.double(), w.double()
    mean = xd.mean(1)
    rstd = (((xd - mean[:, None]) ** 2).mean(1) + eps).rsqrt()
    xhat = (xd - mean[:, None]) * rstd[:, None]
    wdy = dy.double() * wd
    dx = (wdy - wdy.mean(1, keepdim=True) - xhat * (wdy * xhat).mean(1, keepdim=True)) * rstd[:, None]
    return {"y": xhat * wd + b.double(), "mean": mean, "rstd": rstd, "dx": dx,
            "dweight": (dy.double() * xhat).sum(0), "dbias": dy.double().sum(0)}


def torch_same_dtype(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, dy: torch.Tensor, eps: float = EPS
                     ) -> dict[str, torch.Tensor]:
    """torch's layer_norm forward and backward in the inputs' dtype: y, dx, dweight, dbias."""
    xt, wt, bt = (t.clone().requires_grad_() for t in (x, w, b))
    y = torch.nn.functional.layer_norm(xt, (x.shape[1],), wt, bt, eps)
    y.backward(dy)
    return {"y": y.detach(), "dx": xt.grad, "dweight": wt.grad, "dbias": bt.grad}


def max_err(got: torch.Tensor, ref: torch.Tensor) -> float:
    """The largest |got - ref|, got taken to the CPU in fp64."""
    return (got.cpu().double() - ref).abs().max().item()

"""A copy of the LayerNorm math with switchable planted bugs, for `verify --self-test`.

The math mirrors what the kernels do (fp32 accumulation, centered variance, c1/c2 backward) so
each bug is one a real kernel could have. The self-test shows the pass rule catches every bug.
"""
from __future__ import annotations

import torch

from lnbench.backends.base import Availability, Backend
from lnbench.run.device import Device

BUGS: dict[str, str] = {
    "none": "control: the correct math must PASS",
    "drop-c2": "backward drops the c2 = mean(wdy·x̂) term of dx",
    "bf16-mean": "mean stored in bf16 instead of fp32 (and used by the backward)",
    "eps-decade": "eps off by one decade (eps/10 used)",
    "naive-variance": "variance as E[x²]−mean² in fp32, clamped at 0 (cancellation at large mean)",
    "f16-stats": "mean and rstd rounded to f16 on their way into the fp32 stats buffers",
    "bwd-own-stats": "backward ignores the saved stats and recomputes them as E[x²]−mean² (wrong at large mean)",
}


class PlantedBackend(Backend):
    """Reference math in fp32 with one planted bug (or none)."""

    name = "planted"
    description = "self-test: reference math with a planted bug"
    deterministic = True

    def __init__(self, bug: str = "none") -> None:
        if bug not in BUGS:
            raise ValueError(f"unknown planted bug {bug!r}")
        self.bug = bug
        self.name = f"planted:{bug}"
        self.eps = 0.0          # the last forward's eps: a kernel module is built with its eps

    def availability(self, device: Device) -> Availability:
        return Availability(True)

    def forward(self, x, weight, bias, eps, store_stats=True):
        xf = x.float()
        self.eps = eps
        eps_used = eps / 10 if self.bug == "eps-decade" else eps
        mean = xf.mean(dim=-1)
        if self.bug == "naive-variance":
            var = (xf.square().mean(dim=-1) - mean.square()).clamp_min(0.0)
        else:
            var = (xf - mean[:, None]).square().mean(dim=-1)
        rstd = torch.rsqrt(var + eps_used)
        y = ((xf - mean[:, None]) * rstd[:, None] * weight.float() + bias.float()).to(x.dtype)
        if self.bug == "bf16-mean":
            mean = mean.to(torch.bfloat16)
        if self.bug == "f16-stats":
            mean, rstd = mean.half().float(), rstd.half().float()
        return (y, mean, rstd) if store_stats else (y, None, None)

    def backward(self, dy, x, weight, mean, rstd):
        if self.bug == "bwd-own-stats":
            xf = x.float()
            mean = xf.mean(dim=-1)
            rstd = torch.rsqrt((xf.square().mean(dim=-1) - mean.square()).clamp_min(0.0) + self.eps)
        xhat = (x.float() - mean.float()[:, None]) * rstd[:, None]
        dyf = dy.float()
        wdy = dyf * weight.float()
        c1 = wdy.mean(dim=-1, keepdim=True)
        c2 = (wdy * xhat).mean(dim=-1, keepdim=True)
        if self.bug == "drop-c2":
            c2 = torch.zeros_like(c2)
        dx = (wdy - c1 - xhat * c2) * rstd[:, None]
        dweight = (dyf * xhat).sum(dim=0)
        dbias = dyf.sum(dim=0)
        return dx.to(x.dtype), dweight.to(weight.dtype), dbias.to(weight.dtype)

    def layernorm(self, x, weight, bias, eps):
        return _PlantedFunction.apply(x, weight, bias, eps, self)


class _PlantedFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps, backend):
        shape = x.shape
        x2 = x.reshape(-1, shape[-1]).contiguous()
        y, mean, rstd = backend.forward(x2, weight, bias, eps, True)
        ctx.save_for_backward(x2, weight, mean, rstd)
        ctx.backend, ctx.shape = backend, shape
        return y.reshape(shape)

    @staticmethod
    def backward(ctx, dy):
        x2, weight, mean, rstd = ctx.saved_tensors
        dx, dw, db = ctx.backend.backward(dy.reshape(x2.shape).contiguous(), x2, weight, mean, rstd)
        return dx.reshape(ctx.shape), dw, db, None, None

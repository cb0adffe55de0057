"""lnbench: validate and benchmark LayerNorm kernels (FlyDSL for AMD Instinct GPUs, torch peers)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from lnbench.version import __version__

if TYPE_CHECKING:  # pragma: no cover
    import torch


def layernorm(x: "torch.Tensor", weight: "torch.Tensor", bias: "torch.Tensor", eps: float = 1e-5,
              abi: str = "pointer") -> "torch.Tensor":
    """LayerNorm over the last dimension through lnbench's FlyDSL kernels (autograd-aware).

    Imported lazily so that `import lnbench` works where FlyDSL is not installed.
    """
    from lnbench.backends.flydsl_backend import layernorm as _layernorm

    return _layernorm(x, weight, bias, eps=eps, abi=abi)


__all__ = ["__version__", "layernorm"]

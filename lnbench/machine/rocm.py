"""Is there a ROCm GPU? (FlyDSL kernels execute only there.)"""
from __future__ import annotations

import torch

NEEDS_ROCM = "needs a ROCm GPU"


def has_rocm_gpu() -> bool:
    """True when torch is a ROCm build and sees at least one GPU."""
    return torch.version.hip is not None and torch.cuda.is_available()

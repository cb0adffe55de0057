"""lnbench's FlyDSL LayerNorm kernels (forward with stats, backward), launch wrappers and inspection.

Submodules import FlyDSL lazily where they can, so `import lnbench.flydsl` is cheap.
"""
from __future__ import annotations

__all__ = ["geometry", "inspect", "kernels_bwd", "kernels_fwd", "launch", "preflight", "reduce", "rowio", "toolkit"]

"""lnbench's own LayerNorm forward kernels behind FlyDSL's builder contract (lnbench.flydsl.contract).

`--backend module:lnbench.flydsl.builders` drives lnbench's forward exactly as it drives FlyDSL's LayerNorm or
any other kernel source, and gets the same code objects as `--backend flydsl` (a test checks the hashes);
a [backends.NAME] table with `builder_kwargs = {abi = "tensor"}` names the Tensor-ABI variant. The backward is
not offered here: lnbench's backward launches two kernels over an fp32 workspace whose size depends on M (a
persistent grid and a partial-sum reduction), which the contract's single launcher (..., m, stream) cannot
express; `--backend flydsl` runs it through the same compile cache and launch binding (lnbench.flydsl.launch).
"""
from __future__ import annotations

from typing import Any

from lnbench.flydsl import geometry
from lnbench.flydsl.kernels_fwd import build_fwd


def build_layernorm_module(N: int, dtype_str: str, store_stats: bool = False, eps: float = 1e-5,
                           abi: str = "pointer", align: int | None = None) -> Any:
    """The @flyc.jit forward launcher (Input, Gamma, Beta, Output[, Mean, Rstd], m, stream) for rows of N;
    `align`: the element alignment every buffer shares (default: 16-byte aligned, as torch allocates)."""
    return forward_launcher(geometry.row_plan(N, dtype_str, "fwd", align), eps, store_stats, abi)


def forward_launcher(plan: geometry.RowPlan, eps: float, store_stats: bool, abi: str) -> Any:
    """The one place lnbench's forward launchers are built: for this builder and for lnbench.flydsl.launch."""
    return build_fwd(plan, eps, store_stats, abi)

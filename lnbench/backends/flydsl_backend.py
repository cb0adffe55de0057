"""The `flydsl` backend: lnbench's own FlyDSL LayerNorm kernels (ROCm GPUs and the emulated device;
compile-only elsewhere)."""
from __future__ import annotations

import torch

from lnbench.backends.autograd import BackendLayerNormFn
from lnbench.backends.base import Availability, Backend
from lnbench.constants import ARCHES, KERNEL_OPS
from lnbench.run.device import Device
from lnbench.flydsl import toolkit
from lnbench.machine.install import install_hint



def flydsl_availability(device: Device) -> Availability:
    """Where FlyDSL kernels (lnbench's or a kernel source's) run: a ROCm GPU or the emulator; compile-only
    elsewhere when the linker toolkit is there."""
    if not toolkit.flydsl_importable():
        return Availability(False, "flydsl is not importable")
    if device.executes_flydsl:
        return Availability(True)
    can = toolkit.toolkit_info().kind != "missing"
    reason = "no ROCm GPU" if can else f"no ROCm GPU and no linker toolkit ({install_hint('compile')})"
    return Availability(False, reason, can_compile=can)


class FlyDSLBackend(Backend):
    name = "flydsl"
    description = "lnbench FlyDSL kernels (vectorized, fp32 stats, deterministic dγ/dβ)"
    deterministic = True            # default dγ strategy: fixed-order partials

    def __init__(self, abi: str = "pointer", dgamma_strategy: str = "deterministic") -> None:
        self.abi = abi
        self.dgamma_strategy = dgamma_strategy

    def availability(self, device: Device) -> Availability:
        return flydsl_availability(device)

    def preload(self) -> None:
        from lnbench.flydsl import launch  # noqa: F401,PLC0415 - imports flydsl and its runtime

    def forward(self, x, weight, bias, eps, store_stats=True):
        from lnbench.flydsl import launch
        return launch.forward(x, weight, bias, eps, store_stats=store_stats, abi=self.abi)

    def backward(self, dy, x, weight, mean, rstd):
        from lnbench.flydsl import launch
        return launch.backward(dy, x, weight, mean, rstd, abi=self.abi, dgamma_strategy=self.dgamma_strategy)

    def layernorm(self, x, weight, bias, eps):
        return layernorm(x, weight, bias, eps=eps, abi=self.abi)

    def compile_case(self, n: int, dtype: torch.dtype, eps: float) -> str:
        """Compile fwd (with and without stats) and bwd for gfx942 and gfx950; one-line summary."""
        from lnbench.flydsl.inspect import compile_facts
        parts = []
        for arch in ARCHES:
            facts = []
            for op in KERNEL_OPS:
                facts += compile_facts(op, dtype, n, self.abi, arch, eps=eps, dgamma_strategy=self.dgamma_strategy)
            vmax = max(f.vgpr for f in facts)
            spills = sum(f.vgpr_spills + f.sgpr_spills for f in facts)
            parts.append(f"{arch}: {len(facts)} kernels, max VGPR {vmax}, spills {spills}")
        return "; ".join(parts)


class FlyDSLTensorABIBackend(FlyDSLBackend):
    """The same kernels through the Tensor launch ABI (fx.Tensor arguments with layouts)."""

    name = "flydsl-tensor"
    description = "lnbench FlyDSL kernels, Tensor launch ABI"

    def __init__(self) -> None:
        super().__init__(abi="tensor")


class FlyDSLAtomicBackend(FlyDSLBackend):
    """Pointer ABI with fp32 atomic dγ/dβ: fast to launch, but the summation order varies run to run."""

    name = "flydsl-atomic"
    description = "lnbench FlyDSL kernels, fp32 atomic dγ/dβ (not bitwise reproducible)"
    deterministic = False

    def __init__(self) -> None:
        super().__init__(dgamma_strategy="atomic")


def layernorm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5,
              abi: str = "pointer") -> torch.Tensor:
    """LayerNorm over the last dimension (autograd-aware), any leading dimensions, through lnbench's FlyDSL
    kernels; the backward runs the deterministic dγ/dβ strategy."""
    return BackendLayerNormFn.apply(x, weight, bias, float(eps), FlyDSLBackend(abi))

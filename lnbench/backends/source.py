"""A backend over a kernel source: any module following FlyDSL's LayerNorm builder contract
(lnbench.flydsl.contract), e.g. FlyDSL's own `kernels.norm.layernorm_kernel` from a checkout.

A source that cannot be imported or built still makes a backend: its cases become `error` rows naming why in
one line. A source without a backward builder runs the forward only; its backward tensors are `not run`, with
`missing_backward` saying what is missing.
"""
from __future__ import annotations

from typing import Any

import torch

from lnbench.backends.base import Availability, Backend
from lnbench.backends.flydsl_backend import flydsl_availability
from lnbench.constants import ARCHES, FORWARD_OPS, KERNEL_OPS, OPS
from lnbench.run.device import Device
from lnbench.flydsl.contract import SourceSpec



class SourceBackend(Backend):
    """Drives one kernel source through the builder contract."""

    name = "source"

    def __init__(self, spec: SourceSpec) -> None:
        self.spec = spec
        self.name = spec.name
        self.description = spec.description or f"kernel source {spec.module} (builder contract)"
        self.deterministic = spec.deterministic

    # ops and missing_backward load the module on first use (an import error then surfaces in forward's rows)
    @property
    def missing_backward(self) -> str:
        from lnbench.flydsl.contract import missing_backward
        return missing_backward(self.spec)

    @property
    def ops(self) -> tuple[str, ...]:  # type: ignore[override]
        return FORWARD_OPS if self.missing_backward else OPS

    def availability(self, device: Device) -> Availability:
        return flydsl_availability(device)

    def preload(self) -> None:
        from lnbench.flydsl.contract import load_module
        load_module(self.spec)

    @staticmethod
    def _run(call: Any) -> tuple:
        call()
        return call.outputs

    def forward(self, x, weight, bias, eps, store_stats=True):
        from lnbench.flydsl.contract import forward_call
        out = self._run(forward_call(self.spec, x, weight, bias, eps, store_stats))
        return (out[0], out[1], out[2]) if store_stats else (out[0], None, None)

    def backward(self, dy, x, weight, mean, rstd):
        from lnbench.flydsl.contract import backward_call
        call = backward_call(self.spec, dy, x, weight, mean, rstd)
        if call is None:
            raise NotImplementedError(f"{self.name}: {self.missing_backward}")
        return self._run(call)

    def direct_forward_call(self, x, weight, bias, eps, store_stats):
        """Outputs preallocated, compiled once: a zero-argument launch (`.outputs`, `.buffers`)."""
        from lnbench.flydsl.contract import forward_call
        return forward_call(self.spec, x, weight, bias, eps, store_stats)

    def direct_backward_call(self, dy, x, weight, mean, rstd):
        from lnbench.flydsl.contract import backward_call
        call = backward_call(self.spec, dy, x, weight, mean, rstd)
        if call is None:
            raise NotImplementedError(f"{self.name}: {self.missing_backward}")
        return call

    def layernorm(self, x, weight, bias, eps):
        from lnbench.backends.autograd import backend_layernorm
        return backend_layernorm(self, x, weight, bias, eps)

    def compile_case(self, n: int, dtype: torch.dtype, eps: float) -> str:
        """Compile fwd (with and without stats) and bwd (where there is one) for gfx942 and gfx950."""
        from lnbench.flydsl.inspect import source_facts
        from lnbench.settings import dtype_name
        parts = []
        for arch in ARCHES:
            facts = [f for op in self.ops if op in KERNEL_OPS
                     for f in source_facts(self.spec, op, dtype_name(dtype), n, arch, eps)]
            vmax = max(f.vgpr for f in facts)
            spills = sum(f.vgpr_spills + f.sgpr_spills for f in facts)
            parts.append(f"{arch}: {len(facts)} kernels, max VGPR {vmax}, spills {spills}")
        return "; ".join(parts)

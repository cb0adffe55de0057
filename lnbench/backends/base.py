"""The backend interface every LayerNorm implementation plugs into. torch is imported where a tensor is made,
not here: the backend names (lnbench.backends) are read by every command's --help."""
from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from lnbench.constants import OPS

if TYPE_CHECKING:  # pragma: no cover
    import torch

    from lnbench.run.device import Device



@dataclass(frozen=True)
class Availability:
    """Whether a backend can run on a device, and why not.

    `can_compile` marks a backend that cannot execute here but can still compile its kernels
    (FlyDSL without a ROCm GPU): verify reports those cases as "compiled, not executed".
    """

    runnable: bool
    reason: str = ""
    can_compile: bool = False


class Backend(abc.ABC):
    """A LayerNorm implementation on 2-D contiguous (M, N) inputs.

    forward returns (y, mean, rstd) with fp32 (M,) stats, or (y, None, None) when store_stats is False;
    backward returns (dx, dweight, dbias) from the saved fp32 stats.
    """

    #: name, description, deterministic: a class's own, or set per instance (a kernel source, a planted bug)
    name: str
    description: str = ""
    #: dγ/dβ bitwise reproducible run to run (False for backends that document atomics).
    deterministic: bool = True
    #: ops `perf` may time; verify needs fwd and bwd.
    ops: ClassVar[tuple[str, ...]] = OPS

    @abc.abstractmethod
    def availability(self, device: Device) -> Availability:
        """Can this backend run on `device` in this process? (Tensors go on device.torch_device.)"""

    @abc.abstractmethod
    def forward(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float,
                store_stats: bool = True) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """y = (x - mean) * rstd * weight + bias, row-wise over the last dimension."""

    @abc.abstractmethod
    def backward(self, dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, mean: torch.Tensor,
                 rstd: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(dx, dweight, dbias) given the upstream gradient and the saved stats."""

    def preload(self) -> None:
        """Import what the first call would import (a perf worker's start-up; nothing runs on a device)."""

    def layernorm(self, x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float) -> torch.Tensor:
        """The backend's public autograd path (any leading dimensions)."""
        import torch

        return torch.nn.functional.layer_norm(x, (x.shape[-1],), weight, bias, eps)

    def compile_case(self, n: int, dtype: torch.dtype, eps: float) -> str:
        """Compile (without executing) everything a verify case at width n needs; return a summary.

        Only backends whose availability says can_compile implement this.
        """
        raise NotImplementedError(f"backend {self.name!r} has no compile-only route")

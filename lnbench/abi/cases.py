"""What the runtime comparison times: a case (op, dtype, shape) with two sides, and the pair registry.

A *pair* is a factory of cases whose two sides compute the same thing through two call paths:
`flydsl` (the Tensor vs the Pointer launch ABI of our kernels: on a ROCm GPU, or host cost only on the null
device) or a stand-in that runs anywhere (`torch-entry`, `planted-slow`). The side keys are always "tensor"
and "pointer"; a pair names what each side really is in `labels`.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, TypeAlias

from lnbench.errors import LnbenchUsageError

if TYPE_CHECKING:  # pragma: no cover
    import torch

#: torch is imported by the pairs' modules, not here: PAIRS names the pairs in abi-compare's --help
Outputs: TypeAlias = "tuple[torch.Tensor, ...]"


def case_key(op: str, dtype: str, shape: tuple[int, int]) -> str:
    """The key of a pair case: `op/dtype/MxN` (shared by the null device's executed checks)."""
    return f"{op}/{dtype}/{shape[0]}x{shape[1]}"


@dataclass
class Side:
    """One call path of a case.

    direct:  the hot call on preallocated buffers (what `direct` and `device` time);
    wrapper: the public wrapper, allocation included; returns its outputs (what `wrapper` times);
    direct_outputs: the buffers `direct` writes (for the checks), or None when the path returns them.
    """

    direct: Callable[[], Any]
    wrapper: Callable[[], Outputs]
    direct_outputs: Outputs | None = None
    #: what `device` times (default: direct)
    device: Callable[[], Any] | None = None


@dataclass
class PairCase:
    """One op × dtype × shape with both sides built on the same inputs."""

    op: str
    dtype: str
    shape: tuple[int, int]
    sides: dict[str, Side]
    #: independent expected outputs (fp32 torch), same order as the wrapper's outputs
    reference: Callable[[], Outputs]
    #: both sides must agree bitwise (False: max|diff| <= agree_atol + agree_rtol·max|out|, e.g. atomic dγ/dβ)
    exact: bool = True
    agree_atol: float = 0.0
    agree_rtol: float = 0.0
    #: tolerance against the reference (a stale kernel or garbage output is far outside it)
    ref_atol: float = 5e-2
    ref_rtol: float = 5e-2
    #: per output, added to that tolerance: what a correct result in the case dtype may legitimately miss the fp32
    #: reference by (e.g. dγ/dβ summed over M rows in a low-precision accumulator); () = nothing added
    ref_slack: tuple[float, ...] = ()
    #: launches that reached the device so far (the null device's HIP stand-in counts them), or None
    launch_counter: Callable[[], int] | None = None
    #: kernel launches one call of either path must make (checked where launch_counter is set); a dict gives
    #: each side its own count (a backend pair whose kernels differ)
    launches_per_call: int | dict[str, int] = 0

    @property
    def key(self) -> str:
        return case_key(self.op, self.dtype, self.shape)


@dataclass(frozen=True)
class PairInfo:
    """Registry entry: where the case factory lives and what the two sides are."""

    factory: str                  # "module:function"
    labels: dict[str, str]
    description: str


PAIRS: dict[str, PairInfo] = {
    "flydsl": PairInfo("lnbench.abi.flydsl_pairs:build_cases",
                       {"tensor": "Tensor ABI", "pointer": "Pointer ABI"},
                       "FlyDSL LayerNorm kernels, fx.Tensor vs fx.Pointer launch ABI (a ROCm GPU; host cost "
                       "only on the null device)"),
    "torch-entry": PairInfo("lnbench.abi.torch_pairs:entry_cases",
                            {"tensor": "torch.ops.aten (OpOverload)", "pointer": "torch.* C binding"},
                            "the same ATen LayerNorm kernel entered through two Python paths (runs anywhere)"),
    "planted-slow": PairInfo("lnbench.abi.torch_pairs:planted_slow_cases",
                             {"tensor": "torch.* C binding", "pointer": "same + planted host delay"},
                             "self-check: the 'pointer' side spins extra host time per call; must come out slower"),
}


def split_pair(pair: str) -> tuple[str, str] | None:
    """("A", "B") of a backend pair name `A,B`, else None."""
    parts = [p.strip() for p in pair.split(",")]
    return (parts[0], parts[1]) if len(parts) == 2 and all(parts) else None


def pair_info(name: str) -> PairInfo:
    """Registry entry of a pair, or of a backend pair `A,B` (lnbench.abi.backend_pairs); an unknown name is a
    usage error."""
    if name in PAIRS:
        return PAIRS[name]
    both = split_pair(name)
    if both is None:
        raise LnbenchUsageError(f"unknown pair {name!r}; choose from {', '.join(PAIRS)}, or A,B: two FlyDSL kernel "
                                f"backends (e.g. flydsl-src,flydsl)")
    from lnbench.backends import check_backend_names
    check_backend_names(list(both))
    return PairInfo("lnbench.abi.backend_pairs:build_cases", {"tensor": both[0], "pointer": both[1]},
                    f"{both[0]} vs {both[1]}: two FlyDSL LayerNorm kernels on the same inputs")


def flydsl_pair(name: str) -> bool:
    """Does the pair launch FlyDSL kernels (the flydsl pair, or a backend pair A,B)?"""
    return name == "flydsl" or split_pair(name) is not None


def build_cases(pair: str, ops: list[str], dtypes: list[str], shapes: list[tuple[int, int]],
                device: torch.device, eps: float, seed: int, options: dict[str, Any] | None = None
                ) -> list[PairCase]:
    """Import the pair's factory lazily (flydsl only when asked for) and build every case."""
    module_name, func_name = pair_info(pair).factory.split(":")
    factory = getattr(importlib.import_module(module_name), func_name)
    return factory(ops, dtypes, shapes, device, eps, seed, **(options or {}))

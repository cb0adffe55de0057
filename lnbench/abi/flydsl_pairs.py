"""The ROCm pair: our FlyDSL LayerNorm kernels through the Tensor ABI and the Pointer ABI.

direct  = lnbench.flydsl.launch.direct_forward_call / direct_backward_call (compiled functions called
          with preallocated outputs: raw data_ptr() ints for the Pointer ABI, tensors for the Tensor ABI);
wrapper = launch.forward(store_stats=True/False) / launch.backward, allocation included.
Checks (lnbench.abi.checks): forward outputs bitwise identical between the ABIs; backward bitwise
identical with the deterministic dγ/dβ strategy, within a relative 1e-2 with atomics.
Runs where FlyDSL launches reach a device (lnbench.run.device.Device.launches_flydsl): a ROCm GPU, the emulated
device (the executed checks of the null device, lnbench.abi.null_device) and the null device, where each case
also counts its launches (the HIP stand-in's counter). flydsl is imported only when cases are built.
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from lnbench import validate
from lnbench.abi.cases import PairCase, Side
from lnbench.constants import DTYPES, FORWARD_OPS
from lnbench.run.device import device_of
from lnbench.machine.rocm import NEEDS_ROCM

ABIS = ("tensor", "pointer")


def _reference(op: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, dy: torch.Tensor, eps: float):
    def ref():
        n = x.shape[1]
        xf, wf, bf = x.float(), w.float(), b.float()
        y, mean, rstd = torch.native_layer_norm(xf, [n], wf, bf, eps)
        if op == "fwd":
            return y, mean.reshape(-1), rstd.reshape(-1)
        if op == "fwd-nostats":
            return (y,)
        return tuple(torch.ops.aten.native_layer_norm_backward(dy.float(), xf, [n], mean, rstd, wf, bf,
                                                               [True, True, True]))
    return ref


def _not_none(outputs: tuple) -> tuple:
    return tuple(t for t in outputs if t is not None)


def _sides(op: str, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor, dy: torch.Tensor, eps: float,
           dgamma_strategy: str) -> dict[str, Side]:
    """Both ABIs' sides of one case, bound to these inputs (a function of its own: closures built in a loop
    would all see the loop's last inputs)."""
    from lnbench.flydsl import launch

    sides: dict[str, Side] = {}
    if op in FORWARD_OPS:
        stats = op == "fwd"

        def forward(abi: str) -> Callable[[], tuple]:
            return lambda: _not_none(launch.forward(x, w, b, eps, stats, abi))

        for abi in ABIS:
            call = launch.direct_forward_call(x, w, b, eps, stats, abi)
            sides[abi] = Side(direct=call, wrapper=forward(abi), direct_outputs=tuple(call.outputs))
        return sides
    _, mean, rstd = launch.forward(x, w, b, eps, True, "pointer")
    assert mean is not None and rstd is not None      # stored: store_stats=True

    def backward(abi: str) -> Callable[[], tuple]:
        return lambda: tuple(launch.backward(dy, x, w, mean, rstd, abi, dgamma_strategy))

    for abi in ABIS:
        call = launch.direct_backward_call(dy, x, w, mean, rstd, abi, dgamma_strategy)
        sides[abi] = Side(direct=call, wrapper=backward(abi), direct_outputs=tuple(call.outputs))
    return sides


def launch_counter(device: torch.device, what: str) -> Callable[[], int] | None:
    """The HIP stand-in's launch counter on the null device (None elsewhere); raises where FlyDSL cannot launch."""
    dev = device_of(torch.empty(0, device=device))
    if not dev.launches_flydsl:
        raise RuntimeError(f"{what} {NEEDS_ROCM} (or the null device, activated in this process)")
    if not dev.is_null:
        return None
    from lnbench.emu import hip
    return hip.launch_count


def case_inputs(seed: int, index: int, m: int, n: int, dtype: str, device: torch.device) -> tuple[torch.Tensor, ...]:
    """x, γ, β, dy of a pair case: seeded randn (the case's own seed derived from `seed` and its shape index)."""
    gen = torch.Generator().manual_seed(validate.derived_seed(seed, index))
    make = lambda *s: torch.randn(*s, generator=gen).to(device=device, dtype=DTYPES[dtype])  # noqa: E731
    return make(m, n), make(n), make(n), make(m, n)


def build_cases(ops: list[str], dtypes: list[str], shapes: list[tuple[int, int]], device: torch.device,
                eps: float, seed: int, dgamma_strategy: str = "deterministic", **_: Any) -> list[PairCase]:
    """Both ABIs of every op × dtype × shape on the same inputs (raises where FlyDSL cannot launch)."""
    counter = launch_counter(device, "the flydsl pair")
    cases = []
    for op in ops:
        for dtype in dtypes:
            for index, (m, n) in enumerate(shapes):
                x, w, b, dy = case_inputs(seed, index, m, n, dtype, device)
                sides = _sides(op, x, w, b, dy, eps, dgamma_strategy)
                exact = op != "bwd" or dgamma_strategy == "deterministic"
                launches = 2 if op == "bwd" and dgamma_strategy == "deterministic" else 1   # bwd: main + reduce
                cases.append(PairCase(op=op, dtype=dtype, shape=(m, n), sides=sides,
                                      reference=_reference(op, x, w, b, dy, eps), exact=exact,
                                      agree_rtol=0.0 if exact else 1e-2, launch_counter=counter,
                                      launches_per_call=launches))
    return cases

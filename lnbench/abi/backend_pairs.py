"""`--pair A,B`: two FlyDSL kernel backends side by side, e.g. FlyDSL's own LayerNorm (`flydsl-src`) against
lnbench's (`flydsl`), or a Tensor-ABI kernel source against a Pointer-ABI one.

The pair's side keys stay "tensor" (A) and "pointer" (B), as every pair's do; its labels name the backends.
Each backend is lnbench's own kernels (flydsl: Pointer ABI, deterministic dγ/dβ; flydsl-tensor: Tensor ABI;
flydsl-atomic: fp32 atomics) or a kernel source through the builder contract (lnbench.flydsl.contract).
direct = the compiled launch on preallocated outputs; wrapper = the backend's forward/backward, allocation
included. The two kernels are different code, so they agree within a tolerance, not bitwise, and each is
checked against the fp32 reference. On the null device each side's launch count is checked on its own
(lnbench's deterministic backward launches a reduce kernel too).
"""
from __future__ import annotations

from typing import Any, Callable

import torch

from lnbench.abi.cases import PairCase, Side
from lnbench.abi.flydsl_pairs import _not_none, _reference, case_inputs, launch_counter
from lnbench.constants import FORWARD_OPS

SIDES = ("tensor", "pointer")
#: lnbench's own kernels: backend name -> (launch ABI, dγ/dβ strategy)
OWN: dict[str, tuple[str, str]] = {"flydsl": ("pointer", "deterministic"), "flydsl-tensor": ("tensor", "deterministic"),
                                   "flydsl-atomic": ("pointer", "atomic")}


def _own_side(name: str, op: str, x, w, b, dy, eps: float, stats) -> Side:
    from lnbench.flydsl import launch
    abi, strategy = OWN[name]
    if op in FORWARD_OPS:
        keep = op == "fwd"
        call = launch.direct_forward_call(x, w, b, eps, keep, abi)
        return Side(direct=call, wrapper=lambda: _not_none(launch.forward(x, w, b, eps, keep, abi)),
                    direct_outputs=tuple(call.outputs))
    mean, rstd = stats
    call = launch.direct_backward_call(dy, x, w, mean, rstd, abi, strategy)
    return Side(direct=call, wrapper=lambda: tuple(launch.backward(dy, x, w, mean, rstd, abi, strategy)),
                direct_outputs=tuple(call.outputs))


def _source_side(backend: Any, op: str, x, w, b, dy, eps: float, stats) -> Side:
    if op in FORWARD_OPS:
        keep = op == "fwd"
        call = backend.direct_forward_call(x, w, b, eps, keep)
        return Side(direct=call, wrapper=lambda: _not_none(backend.forward(x, w, b, eps, keep)),
                    direct_outputs=tuple(call.outputs))
    mean, rstd = stats
    call = backend.direct_backward_call(dy, x, w, mean, rstd)
    return Side(direct=call, wrapper=lambda: tuple(backend.backward(dy, x, w, mean, rstd)),
                direct_outputs=tuple(call.outputs))


def side_factory(name: str) -> Callable[..., Side]:
    """A function (op, x, w, b, dy, eps, (mean, rstd)) -> Side for backend `name`."""
    if name in OWN:
        return lambda *args: _own_side(name, *args)
    from lnbench.backends import get_backend
    backend = get_backend(name)
    if not hasattr(backend, "direct_forward_call"):
        raise ValueError(f"backend {name!r} is not a FlyDSL kernel backend (flydsl, flydsl-tensor, flydsl-atomic, "
                         f"flydsl-src, a [backends.NAME], an lnbench.backends plugin or module:PKG.MOD)")
    return lambda *args: _source_side(backend, *args)


def build_cases(ops: list[str], dtypes: list[str], shapes: list[tuple[int, int]], device: torch.device,
                eps: float, seed: int, backends: tuple[str, str] = ("flydsl-src", "flydsl"), **_: Any
                ) -> list[PairCase]:
    """Both backends of every op × dtype × shape on the same inputs (the backward's stats from lnbench's
    forward, the same for both sides)."""
    from lnbench.flydsl import launch

    counter = launch_counter(device, "a FlyDSL backend pair")
    factories = {side: side_factory(name) for side, name in zip(SIDES, backends)}
    cases = []
    for op in ops:
        for dtype in dtypes:
            for index, (m, n) in enumerate(shapes):
                x, w, b, dy = case_inputs(seed, index, m, n, dtype, device)
                stats = launch.forward(x, w, b, eps, True, "pointer")[1:] if op == "bwd" else None
                sides = {side: make_side(op, x, w, b, dy, eps, stats) for side, make_side in factories.items()}
                launches = {side: 2 if op == "bwd" and OWN.get(name, ("", ""))[1] == "deterministic" else 1
                            for side, name in zip(SIDES, backends)}          # lnbench's bwd: main + reduce
                cases.append(PairCase(op=op, dtype=dtype, shape=(m, n), sides=sides,
                                      reference=_reference(op, x, w, b, dy, eps), exact=False,
                                      agree_atol=1e-2, agree_rtol=2e-2, launch_counter=counter,
                                      launches_per_call=launches))
    return cases


# ---------------------------------------------------------------- static part (compile-only, executed profile)

class MissingBuilder(ValueError):
    """A kernel source without the builder an op needs (its rows are `not run`, saying what is missing)."""


def _merged_facts(facts: list) -> list:
    """One KernelFacts for all kernels an op launches (summed counts; registers, LDS, scratch: the largest), so
    two backends launching different numbers of kernels compare per op."""
    if len(facts) <= 1:
        return facts
    from dataclasses import replace
    first = facts[0]
    return [replace(first, kernel_name="+".join(f.kernel_name for f in facts),
                    kernarg_bytes=sum(f.kernarg_bytes for f in facts),
                    kernel_args=[a for f in facts for a in f.kernel_args],
                    launcher_slots=sum(f.launcher_slots for f in facts), vgpr=max(f.vgpr for f in facts),
                    sgpr=max(f.sgpr for f in facts), agpr=max(f.agpr for f in facts),
                    vgpr_spills=sum(f.vgpr_spills for f in facts), sgpr_spills=sum(f.sgpr_spills for f in facts),
                    lds_bytes=max(f.lds_bytes for f in facts), scratch_bytes=max(f.scratch_bytes for f in facts),
                    instruction_count=sum(f.instruction_count for f in facts))]


def _merged_runs(runs: list) -> list:
    """One ExecutedKernel for all launches of an op: wave-instructions and bytes summed."""
    if len(runs) <= 1:
        return runs
    from dataclasses import replace
    waves: dict[str, int] = {}
    for r in runs:
        for cls, count in r.wave_instructions.items():
            waves[cls] = waves.get(cls, 0) + count
    return [replace(runs[0], kernel_name="+".join(r.kernel_name for r in runs), wave_instructions=waves,
                    global_bytes_loaded=sum(r.global_bytes_loaded for r in runs),
                    global_bytes_stored=sum(r.global_bytes_stored for r in runs),
                    lds_bytes=sum(r.lds_bytes for r in runs),
                    code_object=" ".join(dict.fromkeys(r.code_object for r in runs if r.code_object)))]


def _source_of(name: str):
    from lnbench.backends import source_spec
    from lnbench.flydsl.contract import missing_backward
    spec = source_spec(name)
    if spec is None:
        raise ValueError(f"backend {name!r} is not a FlyDSL kernel backend")
    return spec, missing_backward(spec)


def pair_facts_fn(backends: tuple[str, str]) -> Callable[..., list]:
    """static_rows' facts_fn for a backend pair: side "tensor" is backend A, "pointer" backend B."""
    def facts(op: str, dtype: str, n: int, side: str, arch: str, eps: float = 1e-5, **_: Any) -> list:
        from lnbench.flydsl.inspect import compile_facts, source_facts
        name = backends[SIDES.index(side)]
        if name in OWN:
            abi, strategy = OWN[name]
            return _merged_facts(compile_facts(op, dtype, n, abi, arch, eps=eps, dgamma_strategy=strategy))
        spec, missing = _source_of(name)
        if op == "bwd" and missing:
            raise MissingBuilder(f"{name}: {missing}")
        return _merged_facts(source_facts(spec, op, dtype, n, arch, eps))
    return facts


def pair_execute_fn(backends: tuple[str, str]) -> Callable[..., list]:
    """static_rows' execute_fn for a backend pair (what each side executes on the emulated device)."""
    def run(op: str, dtype: str, m: int, n: int, side: str, arch: str, eps: float = 1e-5, **_: Any) -> list:
        from lnbench.flydsl.inspect import execute_variant
        name = backends[SIDES.index(side)]
        if name in OWN:
            abi, strategy = OWN[name]
            return _merged_runs(execute_variant(op, dtype, m, n, abi, arch, eps=eps, dgamma_strategy=strategy))
        spec, _ = _source_of(name)
        return _merged_runs(execute_variant(op, dtype, m, n, "", arch, eps=eps, source=spec))
    return run

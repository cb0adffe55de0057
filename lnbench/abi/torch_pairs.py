"""Stand-in pairs that run on any device torch sees: the same ATen LayerNorm, two host paths.

`torch-entry`: the "tensor" side enters ATen through the Python dispatcher object
(`torch.ops.aten.<op>.default`, an OpOverload: extra Python layers per call), the "pointer" side through
the C-bound function (`torch.native_layer_norm`, `torch.layer_norm`; the backward has no C-bound torch
function, so it calls the overload's raw builtin `OpOverload._op`). Same kernel, same inputs, so the
outputs are bitwise identical and only host overhead differs — what the FlyDSL ABI change is about.

Against the fp32 reference, each output also gets verify's pass rule as slack (`ref_slack`): k × the error of
this ATen op in the case dtype + atol(dtype, tensor), × √M for dγ/dβ (lnbench.backends.tolerance). ATen's CPU
backward for all-bf16/f16 inputs sums dγ/dβ over the rows in an accumulator of the input dtype (per thread;
the workers run one), so at bf16 1024x8192 dγ is ~9.8 off the fp32 result (max |dγ| 120): torch's own error,
which verify also takes as the bar. A stale or wrong result is still far outside it.

`planted-slow`: both sides use the C binding, the "pointer" side spins `delay_us` extra host time per
call. It must come out `slower`: a self-check of the statistics and of `--fail-if-slower`.
"""
from __future__ import annotations

import time
from typing import Any, Callable

import torch

from lnbench import validate
from lnbench.abi.cases import Outputs, PairCase, Side
from lnbench.constants import DTYPES
from lnbench.backends.tolerance import Tolerance

_NLN = torch.ops.aten.native_layer_norm.default
_LN = torch.ops.aten.layer_norm.default
_NLN_BWD = torch.ops.aten.native_layer_norm_backward.default
_MASK = [True, True, True]
#: the verify tensor names of each op's outputs, in output order
_TENSORS = {"fwd": ("y", "mean", "rstd"), "fwd-nostats": ("y",), "bwd": ("dx", "dweight", "dbias")}


def _inputs(m: int, n: int, dtype: torch.dtype, device: torch.device, seed: int, eps: float
            ) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=gen).to(device=device, dtype=dtype)  # noqa: E731
    x, w, b, dy = make(m, n), make(n), make(n), make(m, n)
    _, mean, rstd = torch.native_layer_norm(x, [n], w, b, eps)
    return {"x": x, "w": w, "b": b, "dy": dy, "mean": mean, "rstd": rstd}


def _check(x: torch.Tensor, *others: torch.Tensor) -> None:
    """The contracts a lnbench wrapper checks (part of the wrapper's host cost on both sides)."""
    if not x.is_contiguous():
        raise ValueError("x must be contiguous")
    for t in others:
        if t.dtype != x.dtype or t.device != x.device:
            raise ValueError("all tensors need x's dtype and device")


def _entries(op: str, side: str) -> Callable[..., Any]:
    """The raw entry point of `op` for a side of the torch-entry pair."""
    if op == "fwd":
        return _NLN if side == "tensor" else torch.native_layer_norm
    if op == "fwd-nostats":
        return _LN if side == "tensor" else torch.layer_norm
    return _NLN_BWD if side == "tensor" else _NLN_BWD._op


def _spin(us: float) -> None:
    end = time.perf_counter_ns() + int(us * 1e3)
    while time.perf_counter_ns() < end:
        pass


def _side(op: str, entry: Callable[..., Any], t: dict[str, torch.Tensor], eps: float, delay_us: float) -> Side:
    """direct = the bare entry call; wrapper = contract checks + entry + stats reshaped to (M,)."""
    x, w, b, dy, mean, rstd = t["x"], t["w"], t["b"], t["dy"], t["mean"], t["rstd"]
    n = x.shape[1]
    shape = [n]
    pause = (lambda: _spin(delay_us)) if delay_us > 0 else (lambda: None)

    args = (dy, x, shape, mean, rstd, w, b, _MASK) if op == "bwd" else (x, shape, w, b, eps)

    def direct() -> Any:
        pause()
        return entry(*args)

    if op == "fwd":
        def wrapper() -> Outputs:
            _check(x, w, b)
            y, mu, rs = direct()
            return y, mu.reshape(-1), rs.reshape(-1)
    elif op == "fwd-nostats":
        def wrapper() -> Outputs:
            _check(x, w, b)
            return (direct(),)
    else:
        def wrapper() -> Outputs:
            _check(x, dy, w)
            return tuple(direct())
    return Side(direct=direct, wrapper=wrapper)


def _reference(op: str, t: dict[str, torch.Tensor], eps: float) -> Callable[[], Outputs]:
    """fp32 results of the same op on fp32 copies of the inputs."""
    def ref() -> Outputs:
        f = {k: v.float() for k, v in t.items()}
        n = f["x"].shape[1]
        if op == "bwd":
            return tuple(_NLN_BWD(f["dy"], f["x"], [n], f["mean"], f["rstd"], f["w"], f["b"], _MASK))
        y, mu, rs = torch.native_layer_norm(f["x"], [n], f["w"], f["b"], eps)
        return (y, mu.reshape(-1), rs.reshape(-1)) if op == "fwd" else (y,)
    return ref


def _slack(op: str, dtype: str, t: dict[str, torch.Tensor], eps: float, tol: Tolerance) -> tuple[float, ...]:
    """Per output: verify's allowance for a correct result in `dtype`, with the bar set by this op's own error
    (the C-bound entry, run once now) against the fp32 reference."""
    same_dtype = _side(op, _entries(op, "pointer"), t, eps, 0.0).wrapper()
    expected = _reference(op, t, eps)()
    rows = t["x"].shape[0]
    return tuple(tol.allowed(name, dtype, rows, (got.double() - want.double()).abs().max().item())
                 for name, got, want in zip(_TENSORS[op], same_dtype, expected))


def _build(ops: list[str], dtypes: list[str], shapes: list[tuple[int, int]], device: torch.device, eps: float,
           seed: int, sides: dict[str, tuple[str, float]]) -> list[PairCase]:
    """sides: side key -> (which entry family to use, planted delay µs)."""
    cases = []
    tol = Tolerance.packaged()
    for op in ops:
        for dtype in dtypes:
            for index, (m, n) in enumerate(shapes):
                t = _inputs(m, n, DTYPES[dtype], device, validate.derived_seed(seed, index), eps)
                built = {key: _side(op, _entries(op, family), t, eps, delay) for key, (family, delay) in sides.items()}
                cases.append(PairCase(op=op, dtype=dtype, shape=(m, n), sides=built, reference=_reference(op, t, eps),
                                      ref_slack=_slack(op, dtype, t, eps, tol)))
    return cases


def entry_cases(ops: list[str], dtypes: list[str], shapes: list[tuple[int, int]], device: torch.device,
                eps: float, seed: int, **_: Any) -> list[PairCase]:
    """The torch-entry pair (see the module docstring)."""
    return _build(ops, dtypes, shapes, device, eps, seed, {"tensor": ("tensor", 0.0), "pointer": ("pointer", 0.0)})


def planted_slow_cases(ops: list[str], dtypes: list[str], shapes: list[tuple[int, int]], device: torch.device,
                       eps: float, seed: int, delay_us: float = 20.0, **_: Any) -> list[PairCase]:
    """The planted-slow pair: identical paths, the pointer side spins `delay_us` more per call."""
    return _build(ops, dtypes, shapes, device, eps, seed,
                  {"tensor": ("pointer", 0.0), "pointer": ("pointer", float(delay_us))})

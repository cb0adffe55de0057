"""Run verify cases on a backend: outputs vs the fp64 reference, judged by the pass rule."""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Mapping

import torch

from lnbench.backends import Backend
from lnbench.backends.base import Availability
from lnbench.backends.torch_native import TorchBackend
from lnbench.constants import DTYPES
from lnbench.run.device import Device
from lnbench.emu.ledger import recording, row_columns
from lnbench.errors import one_line
from lnbench.backends.reference import TENSORS, reference
from lnbench.results import SelftestRow, VerifyRow
from lnbench.backends.tolerance import Conditioning, Tolerance
from lnbench.verify.cases import Case, Inputs, make_inputs

AUTOGRAD_TENSORS = ("y", "dx", "dweight", "dbias")
BACKWARD_TENSORS = ("dx", "dweight", "dbias")
COMPILED_ONLY = "compiled, not executed"
#: detail of the backward rows of a backend without a standalone backward (perf skips its `bwd` op the same way)
NO_STANDALONE_BWD = "no standalone backward"


@dataclass
class Outputs:
    """A backend's results for one case; `problems` holds contract breaches found on the way."""

    tensors: dict[str, torch.Tensor | None]      # None: not returned (stats, a grad autograd did not set)
    problems: dict[str, str] = field(default_factory=dict)
    bitwise_repeat: bool | None = None  # dγ/dβ bitwise equal across two backward runs
    not_run: dict[str, str] = field(default_factory=dict)  # tensor -> why the backend does not produce it


def _check_stats(name: str, value: torch.Tensor | None, rows: int) -> str:
    if value is None:
        return f"{name} not returned with store_stats=True"
    if value.dtype != torch.float32:
        return f"{name} is {value.dtype}, must be torch.float32"
    if tuple(value.shape) != (rows,):
        return f"{name} has shape {tuple(value.shape)}, must be ({rows},)"
    return ""


def run_2d(backend: Backend, inp: Inputs, eps: float) -> Outputs:
    """forward with stats, then backward twice from the backend's own stats (determinism check). A backend
    without a standalone backward (no `bwd` op, e.g. compile) gives the forward only: its dx, dγ, dβ, and the
    stats it does not return, are `not run`."""
    rows = inp.x.shape[0]
    y, mean, rstd = backend.forward(inp.x, inp.weight, inp.bias, eps, store_stats=True)
    if "bwd" not in backend.ops:
        not_run = dict.fromkeys(BACKWARD_TENSORS, getattr(backend, "missing_backward", "") or NO_STANDALONE_BWD)
        not_run.update({k: f"{k} not returned (no standalone backward needs it)"
                        for k, v in (("mean", mean), ("rstd", rstd)) if v is None})
        return Outputs({"y": y, "mean": mean, "rstd": rstd}, not_run=not_run)
    problems = {k: msg for k, msg in (("mean", _check_stats("mean", mean, rows)),
                                      ("rstd", _check_stats("rstd", rstd, rows))) if msg}
    # stats missing (None): `problems` says so, and the backward's own error on them follows, as it will
    dx, dw, db = backend.backward(inp.dy, inp.x, inp.weight, mean, rstd)   # type: ignore[arg-type]
    _, dw2, db2 = backend.backward(inp.dy, inp.x, inp.weight, mean, rstd)  # type: ignore[arg-type]
    repeat = bool(torch.equal(dw, dw2) and torch.equal(db, db2))
    tensors = {"y": y, "mean": mean, "rstd": rstd, "dx": dx, "dweight": dw, "dbias": db}
    return Outputs(tensors, problems, repeat)


def backward_with(y: torch.Tensor, dy: torch.Tensor) -> None:
    """y.backward(dy), without the import it costs: torch's autograd checks a given gradient's shape through its
    symbolic-shape helpers, importing sympy (~0.3 s of CPU in every verify worker). The gradient of sum(y·dy) reaches
    y as 1·dy, the same values (exactly: a product with one), so where dy is a gradient torch would take as given
    (same shape, dtype and device) the sum's backward is y.backward(dy); anything else goes to y.backward(dy) and
    its error."""
    if y.shape == dy.shape and y.dtype == dy.dtype and y.device == dy.device:
        (y * dy).sum().backward()
    else:
        y.backward(dy)


def run_autograd(backend: Backend, inp: Inputs, eps: float) -> Outputs:
    """The backend's public autograd path on N-D input: y, then dx, dγ, dβ from y.backward(dy)."""
    missing = getattr(backend, "missing_backward", "")
    if missing:                                  # a kernel source without a backward: its forward only
        with torch.no_grad():
            y = backend.layernorm(inp.x, inp.weight, inp.bias, eps)
        return Outputs({"y": y}, not_run=dict.fromkeys(BACKWARD_TENSORS, missing))
    x = inp.x.detach().clone().requires_grad_(True)
    w = inp.weight.detach().clone().requires_grad_(True)
    b = inp.bias.detach().clone().requires_grad_(True)
    with torch.enable_grad():
        y = backend.layernorm(x, w, b, eps)
        backward_with(y, inp.dy)
    problems: dict[str, str] = {}
    if tuple(y.shape) != tuple(inp.x.shape):
        problems["y"] = f"y has shape {tuple(y.shape)}, must be {tuple(inp.x.shape)}"
    return Outputs({"y": y.detach(), "dx": x.grad, "dweight": w.grad, "dbias": b.grad}, problems)


#: elements per block of the fp64 error and conditioning passes (2 MiB of fp64): a block's temporaries come and go
#: in memory the process already holds, where a whole 4096x4096 tensor's would be fresh pages every time (page
#: faults were most of verify's system time). Maxima and per-row reductions over blocks equal the whole-tensor ones.
BLOCK_ELEMENTS = 1 << 18


def _blocks(total: int, size: int) -> Iterator[slice]:
    """Slices of range(total) of at most `size` (at least 1) each."""
    size = max(1, size)
    return (slice(start, min(total, start + size)) for start in range(0, total, size))


def max_errors(got: torch.Tensor | None, ref: torch.Tensor, floor: float | None = None) -> tuple[float, float]:
    """(max abs error, max rel error) against the fp64 reference; NaN/Inf or a shape mismatch is inf.

    Relative error divides by max(|ref|, floor), floor = 1e-3 * max|ref| (relative_floor), so that near-zero
    elements do not dominate (`floor`: given when the caller keeps it for several tensors judged against one
    reference).
    """
    if got is None or got.numel() != ref.numel():
        return math.inf, math.inf
    if ref.numel() == 0:
        return 0.0, 0.0
    floor = relative_floor(ref) if floor is None else floor
    flat_got, flat_ref = got.detach().reshape(-1), ref.reshape(-1)
    worst = rel = 0.0
    for block in _blocks(flat_ref.numel(), BLOCK_ELEMENTS):
        reference = flat_ref[block]
        diff = flat_got[block].double() - reference
        diff.abs_()
        block_worst = float(diff.max())    # NaN anywhere makes the max NaN, an Inf makes it Inf
        if not math.isfinite(block_worst):
            return math.inf, math.inf
        worst = max(worst, block_worst)
        rel = max(rel, float(diff.div_(reference.abs().clamp_min_(floor)).max()))
    return worst, rel


def relative_floor(ref: torch.Tensor) -> float:
    """1e-3 * max|ref| (never below 1e-30): the least divisor of max_errors' relative error."""
    low, high = torch.aminmax(ref)
    return max(max(-float(low), float(high)) * 1e-3, 1e-30)


def conditioning(case: Case, inp: Inputs, ref: dict[str, torch.Tensor]) -> Conditioning:
    """The case's conditioning, from the fp64 reference stats and the inputs (see tolerance.py), a block of
    rows at a time."""
    x_rows, dy_rows = inp.x.reshape(-1, case.n), inp.dy.reshape(-1, case.n)
    weight = inp.weight.double()
    dx_scale = mean_abs_x = 0.0
    for block in _blocks(x_rows.shape[0], BLOCK_ELEMENTS // max(1, case.n)):
        x = x_rows[block].double()
        mean, rstd = ref["mean"][block].double(), ref["rstd"][block].double()
        wdy = dy_rows[block].double() * weight
        c2 = (wdy * (x - mean[:, None]) * rstd[:, None]).mean(dim=-1)
        scale = rstd * (wdy.abs().amax(dim=-1) + c2.abs() * mean.abs() * rstd)
        dx_scale = max(dx_scale, float(scale.max()))
        mean_abs_x = max(mean_abs_x, float(x.abs().mean(dim=-1).max()))
    return Conditioning(n=case.n, rows=case.rows,
                        mean_times_rstd=float((ref["mean"].abs() * ref["rstd"]).max()),
                        max_weight=float(weight.abs().max()), max_dy=_max_abs(inp.dy),
                        mean_abs_x=mean_abs_x, dx_scale=dx_scale)


def _max_abs(tensor: torch.Tensor) -> float:
    """max|tensor| as a float (exact in any dtype: the extremes of the values themselves)."""
    low, high = torch.aminmax(tensor.reshape(-1))
    return max(-float(low), float(high))


def judge_case(case: Case, got: Outputs, base: Outputs, ref: dict[str, torch.Tensor],
               tol: Tolerance, deterministic: bool, cond: Conditioning | None = None,
               memo: dict[tuple[str, str], Any] | None = None) -> list[VerifyRow]:
    """One row per tensor: errors, allowed error under the pass rule, margin and status. `memo` (a dict kept
    with the case's set-up) keeps what does not depend on the backend judged: torch's errors, the relative floors."""
    rows: list[VerifyRow] = []
    names = AUTOGRAD_TENSORS if case.kind == "autograd-3d" else TENSORS
    memo = {} if memo is None else memo
    for name in names:
        if name in got.not_run:
            rows.extend(row.with_(tensor=name) for row in status_rows(case, "not run", got.not_run[name]))
            continue
        if ("scale", name) not in memo:
            memo[("scale", name)] = relative_floor(ref[name]) if ref[name].numel() else None
            memo[("torch_err", name)] = max_errors(base.tensors.get(name), ref[name], memo[("scale", name)])[0]
        err, rel = max_errors(got.tensors.get(name), ref[name], memo[("scale", name)])
        torch_err = memo[("torch_err", name)]
        allowed = tol.allowed(name, case.dtype, case.rows, torch_err if math.isfinite(torch_err) else 0.0, cond)
        detail = got.problems.get(name, "")
        status = "PASS" if err <= allowed and not detail else "FAIL"
        determinism = ""
        if name in ("dweight", "dbias") and got.bitwise_repeat is not None:
            determinism = "bitwise" if got.bitwise_repeat else "differs"
            if not got.bitwise_repeat and deterministic:
                status, detail = "FAIL", (detail + "; " if detail else "") + "dγ/dβ not bitwise reproducible"
        rows.append(case_row(case, tensor=name, max_abs_err=err, max_rel_err=rel, torch_err=torch_err,
                             allowed=allowed, margin=allowed - err, determinism=determinism, status=status,
                             detail=detail))
    return rows


def case_row(case: Case, **check: Any) -> VerifyRow:
    """A check row of `case` (its backend set by the caller): the case's columns and the check's."""
    return VerifyRow(case=case.kind, dtype=case.dtype, shape="x".join(map(str, case.shape)), M=case.rows,
                     N=case.n, eps=case.eps, seed=case.seed, **check)


def status_rows(case: Case, status: str, detail: str) -> list[VerifyRow]:
    """A single row for a case that did not produce values (not run, error, compiled only)."""
    return [case_row(case, tensor="-", max_abs_err=None, max_rel_err=None, torch_err=None, allowed=None,
                     margin=None, determinism="", status=status, detail=detail)]


@dataclass
class CaseSetup:
    """What judging any backend on one case needs: its inputs, the fp64 reference, the torch baseline's outputs
    on the same inputs, the case's conditioning, and how the case is run (2-D or autograd-3d). `memo`: what
    judge_case keeps for the next backend judged on the same case."""

    inp: Inputs
    ref: dict[str, torch.Tensor]
    base: Outputs
    cond: Conditioning
    run: Callable[[Backend, Inputs, float], Outputs]
    memo: dict[tuple[str, str], Any] = field(default_factory=dict)

    def fresh(self) -> "CaseSetup":
        """The same set-up with its own copy of the inputs (a backend may write into what it is given)."""
        inp = Inputs(*(t.clone() for t in (self.inp.x, self.inp.weight, self.inp.bias, self.inp.dy)))
        return CaseSetup(inp, self.ref, self.base, self.cond, self.run, self.memo)


def set_up_case(case: Case, device: Device, baseline: Backend | None = None) -> CaseSetup:
    """Inputs live on device.torch_device (the CPU for the emulated device), so the torch baseline and the
    fp64 reference run there while a backend's kernels run on the device."""
    inp = make_inputs(case, device.torch_device)
    ref = reference(inp.x, inp.weight, inp.bias, inp.dy, case.eps)
    run = run_autograd if case.kind == "autograd-3d" else run_2d
    return CaseSetup(inp, ref, run(baseline or TorchBackend(), inp, case.eps), conditioning(case, inp, ref), run)


#: set-ups of recent cases, shared by the backends verified on them in this process (the same seeded inputs,
#: reference and torch baseline: computing them again gives the same values). Bounded by elements of x; a case
#: above SETUP_SHARE_ELEMENTS is not kept (memory as verify budgets it: validate.shapes_fit).
_setups: "OrderedDict[tuple[Case, str], CaseSetup]" = OrderedDict()
SETUP_CACHE_ELEMENTS = 6 << 20
SETUP_SHARE_ELEMENTS = 2 << 20


def shared_setup(case: Case, device: Device) -> CaseSetup:
    """set_up_case with the torch baseline, kept for the next backend on the same case (a fresh copy of the
    inputs each time)."""
    key = (case, str(device.torch_device))
    setup = _setups.get(key)
    if setup is None:
        setup = set_up_case(case, device)
        size = setup.inp.x.numel()
        if size > SETUP_SHARE_ELEMENTS:
            return setup
        while _setups and sum(s.inp.x.numel() for s in _setups.values()) + size > SETUP_CACHE_ELEMENTS:
            _setups.popitem(last=False)
        _setups[key] = setup
    else:
        _setups.move_to_end(key)
    return setup.fresh()


def verify_case(backend: Backend, case: Case, device: Device, tol: Tolerance,
                baseline: Backend | None = None) -> list[VerifyRow]:
    """All rows of one case; an exception inside the case (an emulator fault included) becomes an `error` row."""
    try:
        with recording(device) as launches:          # the emulator's fidelity ledger of this case
            setup = set_up_case(case, device, baseline) if baseline is not None else shared_setup(case, device)
            got = setup.run(backend, setup.inp, case.eps)
        rows = judge_case(case, got, setup.base, setup.ref, tol, backend.deterministic, setup.cond, setup.memo)
        return [row.with_(**row_columns(launches)) for row in rows]
    except Exception as exc:  # one broken case must not lose the others
        return status_rows(case, "error", one_line(exc))


def backend_case_rows(backend: Backend, case: Case, device: Device, tol: Tolerance, avail: Availability,
                      compiled: dict[tuple[int, str, float], str]) -> list[VerifyRow]:
    """The rows of one case on one backend, honest about a case that could not execute: `avail` is the
    backend's availability on `device`, `compiled` caches compile-only results by (N, dtype, eps)."""
    if avail.runnable:
        case_rows = verify_case(backend, case, device, tol)
    elif avail.can_compile:
        key = (case.n, case.dtype, case.eps)
        try:
            if key not in compiled:
                compiled[key] = backend.compile_case(case.n, DTYPES[case.dtype], case.eps)
            case_rows = status_rows(case, f"{COMPILED_ONLY} ({avail.reason})", compiled[key])
        except Exception as exc:
            case_rows = status_rows(case, "error", f"compile failed: {one_line(exc)}")
    else:
        case_rows = status_rows(case, "not run", avail.reason)
    return [row.with_(backend=backend.name) for row in case_rows]


def outcome(rows: Iterable[VerifyRow | SelftestRow]) -> str:
    """One word for a case's rows, as the progress line shows it: error (no verdict) before FAIL (a value
    outside its bar) before the first row's status (PASS, not run, compiled, not executed)."""
    statuses = [str(row.status) for row in rows]
    for word in ("error", "FAIL"):
        if word in statuses:
            return word
    return statuses[0] if statuses else ""


def case_label(backend_name: str, case: Case, rows: Iterable[VerifyRow | SelftestRow]) -> str:
    """A finished case for progress lines: backend, kind, dtype, shape, eps and its outcome."""
    return f"{backend_name} {case.label} {outcome(rows)}"


def failed(rows: Iterable[VerifyRow | SelftestRow]) -> bool:
    """Any executed check failed (FAIL or error)?"""
    return any(row.status in ("FAIL", "error") for row in rows)

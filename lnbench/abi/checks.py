"""Checks before any timing: both sides agree, and alternating shapes never returns a stale result.

Agreement: both sides' wrapper and direct outputs are bitwise identical (`exact` cases, e.g. the
forward of both ABIs) or within `agree_atol` (backward with atomic dγ/dβ). Reference: every output is
within tolerance of an independent fp32 result (ref_atol + ref_rtol·max|ref|, plus the case's per-output
`ref_slack`); this is what catches a stale compiled function, since both sides could be equally stale.
Alternation: cases are called in the order c1 c2 … c1 c2 … (each switch changes shape) and every output is
checked against its own case's reference.
Launches (where a case counts them, e.g. on the null device, whose outputs are never computed): every call
of each side and path makes the case's number of kernel launches, so a path that skips its launch (an empty
early return, a cached no-op) cannot be timed as if it launched.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Sequence

import torch

from lnbench.abi.cases import Outputs, PairCase, Side
from lnbench.abi.schedule import alternation
from lnbench.measure.timing import synchronize


@dataclass
class CheckResult:
    case: str
    check: str          # "agreement" | "reference" | "alternation" | "launches"
    ok: bool
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


#: what runs the checks before timing: (results, keys of the cases that failed one)
Checker = Callable[[Sequence[PairCase], torch.device], tuple[list[CheckResult], set[str]]]


def _as_tuple(value: Any) -> Outputs:
    if isinstance(value, torch.Tensor):
        return (value,)
    return tuple(value)


def call_outputs(side: Side, path: str, device: torch.device) -> Outputs:
    """Run one call of a side's `path` ("wrapper" or "direct") and return what it produced."""
    if path == "wrapper":
        out = _as_tuple(side.wrapper())
    else:
        result = side.direct()
        out = side.direct_outputs if side.direct_outputs is not None else _as_tuple(result)
    synchronize(device)
    return out


def _mismatch(a: Outputs, b: Outputs, atol: float, rtol: float, exact: bool, slack: Sequence[float] = ()) -> str:
    """'' when equal (bitwise, or max|a-b| <= atol + rtol·max|b| + slack[i] for output i), else a one-line
    description of the first difference."""
    if len(a) != len(b):
        return f"{len(a)} outputs vs {len(b)}"
    for i, (u, v) in enumerate(zip(a, b)):
        if u.numel() != v.numel():
            return f"output {i}: {u.numel()} elements vs {v.numel()} (shape {tuple(u.shape)} vs {tuple(v.shape)})"
        if exact:
            if u.dtype != v.dtype or not torch.equal(u.reshape(-1), v.reshape(-1)):
                diff = (u.reshape(-1).double() - v.reshape(-1).double()).abs().max().item() if u.numel() else 0.0
                return f"output {i}: not bitwise identical (max |diff| {diff:.3g})"
            continue
        uu, vv = u.reshape(-1).double().cpu(), v.reshape(-1).double().cpu()
        if uu.numel() == 0:
            continue
        if not bool(torch.isfinite(uu).all()):
            return f"output {i}: non-finite values"
        # norm-wise: max |diff| against the output's scale (dγ/dβ sums over M rows grow with M)
        err = (uu - vv).abs().max().item()
        allowed = atol + rtol * vv.abs().max().item() + (slack[i] if i < len(slack) else 0.0)
        if err > allowed:
            return f"output {i}: max |diff| {err:.3g} above the allowed {allowed:.3g}"
    return ""


def check_agreement(case: PairCase, device: torch.device) -> CheckResult:
    """Both sides give the same outputs on the same inputs (wrapper, and direct when it is measured)."""
    paths = ["wrapper", "direct"]
    for path in paths:
        t = call_outputs(case.sides["tensor"], path, device)
        p = call_outputs(case.sides["pointer"], path, device)
        problem = _mismatch(t, p, case.agree_atol, case.agree_rtol, case.exact)
        if problem:
            kind = "bitwise" if case.exact else f"within {case.agree_atol:g} + {case.agree_rtol:g}·max|out|"
            return CheckResult(case.key, "agreement", False, f"{path}: sides differ ({kind} required): {problem}")
    how = "bitwise identical" if case.exact else f"agree within {case.agree_atol:g} + {case.agree_rtol:g}·max|out|"
    return CheckResult(case.key, "agreement", True, f"{' and '.join(paths)} outputs {how}")


def check_reference(case: PairCase, device: torch.device, expected: Outputs | None = None) -> CheckResult:
    """Each side's outputs are within tolerance of the independent fp32 result."""
    expected = expected if expected is not None else case.reference()
    for side_name, side in case.sides.items():
        for path in ["wrapper", "direct"]:
            problem = _mismatch(call_outputs(side, path, device), expected, case.ref_atol, case.ref_rtol, False,
                                case.ref_slack)
            if problem:
                return CheckResult(case.key, "reference", False, f"{side_name} {path}: {problem}")
    return CheckResult(case.key, "reference", True, "within tolerance of the fp32 reference")


def check_alternation(cases: Sequence[PairCase], device: torch.device, repeats: int = 2) -> list[CheckResult]:
    """Call the cases in alternation (c1 c2 … c1 c2 …) and check each result against its own reference.

    One result per case; needs at least two cases with different shapes.
    """
    if len({c.shape for c in cases}) < 2:
        raise ValueError("the alternation check needs at least two different shapes")
    expected = {c.key: c.reference() for c in cases}
    problems: dict[str, str] = {}
    for step, case in enumerate(alternation(list(cases), repeats)):
        if case.key in problems:
            continue
        for side_name, side in case.sides.items():
            for path in ["wrapper", "direct"]:
                problem = _mismatch(call_outputs(side, path, device), expected[case.key],
                                    case.ref_atol, case.ref_rtol, False, case.ref_slack)
                if problem:
                    problems[case.key] = f"step {step} ({side_name} {path}, after a shape switch): {problem}"
                    break
            if case.key in problems:
                break
    return [CheckResult(c.key, "alternation", c.key not in problems,
                        problems.get(c.key, f"{repeats} alternations over {len(cases)} cases, results stay right"))
            for c in cases]


def run_checks(cases: Sequence[PairCase], device: torch.device) -> tuple[list[CheckResult], set[str]]:
    """All checks; returns the results and the keys of cases that failed any of them."""
    results: list[CheckResult] = []
    for case in cases:
        results.append(check_agreement(case, device))
        results.append(check_reference(case, device))
    if len({c.shape for c in cases}) >= 2:
        results.extend(check_alternation(cases, device))
    failed = {r.case for r in results if not r.ok}
    return results, failed


def check_launches(case: PairCase, device: torch.device) -> CheckResult:
    """Each call of each side's wrapper and direct path makes exactly `case.launches_per_call` launches."""
    if case.launch_counter is None:
        raise ValueError(f"{case.key}: the launch check needs a case with a launch counter")
    per_side = case.launches_per_call
    for side_name, side in case.sides.items():
        want = per_side[side_name] if isinstance(per_side, dict) else per_side
        for path in ["wrapper", "direct"]:
            before = case.launch_counter()
            call_outputs(side, path, device)
            made = case.launch_counter() - before
            if made != want:
                return CheckResult(case.key, "launches", False, f"{side_name} {path}: {made} launch(es) per call, "
                                                                f"expected {want}")
    counts = (" and ".join(f"{k} {v}" for k, v in per_side.items()) if isinstance(per_side, dict) else per_side)
    return CheckResult(case.key, "launches", True, f"every call of both sides and paths makes {counts} launch(es)")


def launch_checks(cases: Sequence[PairCase], device: torch.device) -> tuple[list[CheckResult], set[str]]:
    """The launch check of every case (cases without a launch counter are an error: nothing would be checked)."""
    results = [check_launches(case, device) for case in cases]
    return results, {r.case for r in results if not r.ok}

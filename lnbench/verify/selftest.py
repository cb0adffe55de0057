"""`verify --self-test`: run planted-bug copies of the math through the pass rule; each must be caught.

A planted bug can only be caught where it changes an output. On some shapes it cannot: with N = 1,
x̂ = 0 so dropping the c2 = mean(wdy·x̂) term changes nothing, and E[x²]−mean² is exact; on bf16/f16
inputs of a few elements the naive variance is exact too (x² of an 8-bit significand fits fp32). Such
a bug is reported `not detectable on these shapes` instead of blaming the pass rule.

A check (case × tensor) counts as changed by a bug when the bug's output differs from the control's
(the same math without the bug, on the same inputs) by more than RESOLUTION (2) times the output's own
rounding noise: the larger of one ulp of the output dtype at the reference's magnitude
(eps_dtype · max|ref|) and the error a correct implementation already has there (max of the control's
and torch's error vs the fp64 reference). Two correct kernels can differ by that much, so within it no
sound rule could tell the bug from a correct kernel (e.g. drop-c2 on 2 rows of N = 12289 in bf16: c2 ~
1/sqrt(N), dx moves by ~2 bf16 ulps where torch itself is off by ~1). The constant is the self-test's,
not the config's k, so a loosened rule still shows up as "NOT caught". A bug that
changes some check must fail some check the control passes (failures the control shares are not
credited to the bug); otherwise the rule is too loose.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from lnbench.run.device import Device
from lnbench.errors import one_line
from lnbench.results import SelftestRow, VerifyRow
from lnbench.backends.tolerance import Tolerance
from lnbench.verify.cases import Case
from lnbench.verify.diagnosis import diagnose, rule_of
from lnbench.verify.planted import BUGS, PlantedBackend
from lnbench.verify.runner import Outputs, judge_case, set_up_case, status_rows

CONTROL = "none"
#: summary statuses: "ok" (control passes / bug caught), "FAIL", and UNDETECTABLE (the bug changes no output)
UNDETECTABLE = "not detectable"
UNDETECTABLE_OUTCOME = "not detectable on these shapes (the bug changes no output here)"
WITHIN_ROUNDING_OUTCOME = "not detectable on these shapes (the bug changes outputs only within rounding here)"
#: a bug must move an output by more than this many times its rounding noise to count as a change
RESOLUTION = 2.0


def _changed(got: torch.Tensor | None, control: torch.Tensor | None, ref: torch.Tensor, noise: float) -> int:
    """0: the bug's output equals the control's; 1: differs within rounding (RESOLUTION × max(`noise`, one
    output ulp)); 2: differs by more."""
    if got is None or control is None or got.numel() != control.numel():
        return 0 if got is control else 2
    if got.numel() == 0 or torch.equal(got, control):
        return 0
    diff = (got.detach().double().reshape(-1) - control.detach().double().reshape(-1)).abs()
    if not bool(torch.isfinite(diff).all()):
        return 2
    ulp = torch.finfo(got.dtype).eps * float(ref.abs().max()) if got.is_floating_point() else 0.0
    return 2 if float(diff.max()) > RESOLUTION * max(noise, ulp) else 1


def _run_case(case: Case, device: Device, tol: Tolerance) -> dict[str, tuple[list[VerifyRow], dict[str, int]]]:
    """bug -> (judged rows, tensor -> _changed level) for one case; an exception is an `error` row (a catch)."""
    try:
        setup = set_up_case(case, device)
    except Exception as exc:  # the reference or torch broke: no bug can be judged on this case
        rows = status_rows(case, "error", one_line(exc))
        return {bug: (rows, {}) for bug in BUGS}
    ref = setup.ref
    out: dict[str, tuple[list[VerifyRow], dict[str, int]]] = {}
    control: Outputs | None = None
    control_rows: dict[str, VerifyRow] = {}
    for bug in BUGS:
        try:
            got = setup.run(PlantedBackend(bug), setup.inp, case.eps)
            rows = judge_case(case, got, setup.base, ref, tol, True, setup.cond)
        except Exception as exc:
            out[bug] = (status_rows(case, "error", one_line(exc)), {"-": 2})
            continue
        if bug == CONTROL:
            control, control_rows = got, {str(r.tensor): r for r in rows}
            out[bug] = (rows, {})
            continue
        changed = {}
        for row in rows:
            name = str(row.tensor)
            c = control_rows.get(name)
            noise = max((v for v in (c and c.max_abs_err, row.torch_err)
                         if isinstance(v, float) and math.isfinite(v)), default=0.0)
            changed[name] = 2 if control is None else _changed(got.tensors.get(name), control.tensors.get(name),
                                                                 ref[name], noise)
        out[bug] = (rows, changed)
    return out


def diagnosed_as(rows: list[VerifyRow]) -> str:
    """The diagnosis rules of a planted bug's FAIL/error rows, most rows first, with their counts."""
    counts: dict[str, int] = {}
    for row in rows:
        if row.status in ("FAIL", "error"):
            for rule in rule_of(row.diagnosis or "") or ["none"]:
                counts[rule] = counts.get(rule, 0) + 1
    return ", ".join(f"{rule} ({n})" for rule, n in sorted(counts.items(), key=lambda item: -item[1]))


def run_self_test(cases: list[Case], device: Device, tol: Tolerance,
                  advance: Callable[[str], None] = lambda label: None) -> tuple[list[dict[str, Any]], list[SelftestRow]]:
    """(summary rows, one per bug; detail rows, one per case × tensor × bug).

    Every detail row carries its `diagnosis` (verify.diagnosis), and a summary row the rules its FAIL rows got.
    A summary row's status is "ok" when the control passes everything / the bug fails a check the control
    passes, UNDETECTABLE when the bug changes no output beyond rounding on these cases, else "FAIL".
    """
    rows: dict[str, list[VerifyRow]] = {bug: [] for bug in BUGS}
    caught: dict[str, list[tuple[int, str]]] = {bug: [] for bug in BUGS}
    changes: dict[str, int] = dict.fromkeys(BUGS, 0)     # checks the bug changes beyond rounding
    touched: dict[str, int] = dict.fromkeys(BUGS, 0)     # checks the bug changes at all
    for index, case in enumerate(cases):
        per_bug = _run_case(case, device, tol)
        control_bad = {str(r.tensor) for r in per_bug[CONTROL][0] if r.status != "PASS"}
        for bug, (case_rows, changed) in per_bug.items():
            rows[bug].extend(case_rows)
            changes[bug] += sum(level == 2 for level in changed.values())
            touched[bug] += sum(level > 0 for level in changed.values())
            bad = {str(r.tensor) for r in case_rows if r.status != "PASS"}
            caught[bug].extend((index, t) for t in sorted(bad if bug == CONTROL else bad - control_bad))
            outcome = "FAIL" if bad else "PASS"
            advance(f"planted:{bug} {case.kind} {case.dtype} {'x'.join(map(str, case.shape))} eps={case.eps:g} {outcome}")
    for bug, bug_rows in rows.items():
        for row in bug_rows:
            row.backend = f"planted:{bug}"
    diagnose([row for bug_rows in rows.values() for row in bug_rows])
    summary: list[dict[str, Any]] = []
    detail: list[SelftestRow] = []
    for bug, meaning in BUGS.items():
        failed = caught[bug]
        caught_in = sorted({t for _, t in failed})
        n_checks = len(rows[bug])
        if bug == CONTROL:
            status = "ok" if not failed else "FAIL"
            outcome = "passes every check" if not failed else f"control FAILED {len(failed)} checks: {', '.join(caught_in)}"
        elif failed:
            status, outcome = "ok", f"caught by {len(failed)}/{n_checks} checks ({', '.join(caught_in)})"
        elif not changes[bug]:
            status, outcome = UNDETECTABLE, WITHIN_ROUNDING_OUTCOME if touched[bug] else UNDETECTABLE_OUTCOME
        else:
            status = "FAIL"
            outcome = f"NOT caught: the pass rule is too loose (the bug changes {changes[bug]} checks, none fails)"
        summary.append({"bug": bug, "meaning": meaning, "checks": n_checks, "failed_checks": len(failed),
                        "changed_checks": changes[bug], "caught_in": " ".join(caught_in), "outcome": outcome,
                        "status": status, "diagnosis": diagnosed_as(rows[bug])})
        detail.extend(SelftestRow(planted_bug=bug, **r.cells()) for r in rows[bug])
    return summary, detail

"""`verify --self-test`: run planted-bug copies of the math through the pass rule; each must be caught."""
from __future__ import annotations

from typing import Any, Callable

from lnbench.device import Device
from lnbench.verify.cases import Case
from lnbench.verify.planted import BUGS, PlantedBackend
from lnbench.verify.runner import verify_backend
from lnbench.verify.tolerance import Tolerance


def run_self_test(cases: list[Case], device: Device, tol: Tolerance,
                  advance: Callable[[str], None] = lambda label: None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(summary rows, one per bug; detail rows, one per case × tensor × bug).

    A summary row's status is "ok" when the control passes everything and every bug fails something.
    """
    summary, detail = [], []
    for bug, meaning in BUGS.items():
        rows = verify_backend(PlantedBackend(bug), cases, device, tol, advance)
        failed = [r for r in rows if r["status"] != "PASS"]
        caught_in = sorted({r["tensor"] for r in failed})
        if bug == "none":
            ok = not failed
            outcome = "passes every check" if ok else f"control FAILED {len(failed)} checks: {', '.join(caught_in)}"
        else:
            ok = bool(failed)
            outcome = (f"caught by {len(failed)}/{len(rows)} checks ({', '.join(caught_in)})" if ok
                       else "NOT caught: the pass rule is too loose")
        summary.append({"bug": bug, "meaning": meaning, "checks": len(rows), "failed_checks": len(failed),
                        "caught_in": " ".join(caught_in), "outcome": outcome, "status": "ok" if ok else "FAIL"})
        detail.extend({"planted_bug": bug, **r} for r in rows)
    return summary, detail

"""The FlyDSL pair on the null device: equality checked by execution first, then host cost timed.

On the null device (lnbench.run.device, kind "null") FlyDSL's real launch path runs against the HIP stand-in and
every launch completes at once without executing: `direct` and `wrapper` time exactly the host work of each
launch ABI, and the kernels compute nothing. So a null-device worker checks outputs before it times, in its
own process and on the same compiled functions (the compile cache does not depend on M):

1. `executed_checks`: activate the emulated device for the arch (execute mode), build the cases on at most
   `check_elements` elements each (M' = min(M, check_elements // N) rows, at least one) and run the usual
   checks (lnbench.abi.checks: Tensor vs Pointer bitwise, both against the fp32 reference, shape
   alternation). Each result is reported under the key of every timed case it stands for, with the rows
   it ran on.
2. The worker then activates the null device (the same stand-in, null mode) and builds the timed cases on the
   full shapes.
3. `checker`: the timed cases get the launch check (every call of each side and path makes the expected
   number of launches, counted by the stand-in); a case whose executed checks failed is never timed.
"""
from __future__ import annotations

from typing import Any, Sequence

import torch

from lnbench import validate
from lnbench.abi.cases import PairCase, build_cases, case_key
from lnbench.abi.checks import CheckResult, Checker, launch_checks, run_checks

#: default element budget of an executed check case: 16 rows at N = 4096 (the emulator takes ~0.05-0.2 s a launch
#: there, and the checks make 16 calls per case); `[abi_compare] check_elements` overrides it
CHECK_ELEMENTS = 1 << 16


def check_rows(m: int, n: int, check_elements: int = CHECK_ELEMENTS) -> int:
    """Rows an executed check runs for a timed case of M × N: min(M, check_elements // N), at least 1."""
    return max(1, min(m, check_elements // max(n, 1)))


def executed_checks(pair: str, ops: Sequence[str], dtypes: Sequence[str], shapes: Sequence[tuple[int, int]],
                    probe_shapes: Sequence[tuple[int, int]], arch: str, eps: float, seed: int,
                    options: dict[str, Any] | None = None, check_elements: int = CHECK_ELEMENTS
                    ) -> list[CheckResult]:
    """Run the output checks of the timed cases on the emulated device for `arch` (activated here, execute
    mode); results keyed by the timed cases (see the module docstring)."""
    from lnbench.run.device import activate, emu_device

    dev = activate(emu_device(arch))
    small = {shape: (check_rows(shape[0], shape[1], check_elements), shape[1]) for shape in shapes}
    check_shapes = list(dict.fromkeys(small.values()))
    probes = [(check_rows(m, n, check_elements), n) for m, n in probe_shapes]
    probes = [p for p in dict.fromkeys(probes) if p not in check_shapes]
    cpu = dev.torch_device
    cases = build_cases(pair, list(ops), list(dtypes), check_shapes, cpu, eps, seed, options)
    probe_cases = build_cases(pair, list(ops)[:1], list(dtypes)[:1], probes, cpu, eps,
                               validate.derived_seed(seed, 1000), options) \
        if probes else []
    results, _ = run_checks(cases + probe_cases, cpu)
    stands_for: dict[str, list[tuple[str, str]]] = {}       # checked case -> (timed case, rows note)
    for op in ops:
        for dtype in dtypes:
            for shape, checked in small.items():
                note = f"executed on {dev.name}, {checked[0]} of {shape[0]} rows"
                stands_for.setdefault(case_key(op, dtype, checked), []).append((case_key(op, dtype, shape), note))
    return [CheckResult(key, r.check, r.ok, f"{r.detail} ({note})")
            for r in results for key, note in stands_for.get(r.case, [])]


def checker(executed: Sequence[CheckResult]) -> Checker:
    """The check a null-device worker runs before timing: the executed results (step 1), plus the launch
    check of the timed cases (step 3)."""
    def run(cases: Sequence[PairCase], device: torch.device) -> tuple[list[CheckResult], set[str]]:
        keys = {c.key for c in cases}
        missing = [c.key for c in cases if not any(r.case == c.key for r in executed)]
        results = [r for r in executed if r.case in keys]
        results += [CheckResult(k, "agreement", False, "no executed check stands for this case") for k in missing]
        counted, _ = launch_checks(cases, device)
        results += counted
        return results, {r.case for r in results if not r.ok}
    return run

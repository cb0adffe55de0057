"""What `lnbench verify` prints: the result and self-test columns, the rows worth a look, the summary line."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

from rich.console import Console

from lnbench.cli_common import err_console
from lnbench.output.tables import Column, fmt_duration, fmt_float, render_table, styled_status
from lnbench.results.rows import SelftestRow, VerifyRow
from lnbench.verify.diagnosis import by_rule, rule_of
from lnbench.verify.estimate import Estimate
from lnbench.verify.plan import usable_cores
from lnbench.verify.summary import SUMMARY_COLUMNS, summary_rows, worth_a_look

RESULT_COLUMNS = [
    Column("backend", "backend", justify="left"), Column("case", "case", justify="left"),
    Column("dtype", "dtype", justify="left"), Column("shape", "shape"), Column("eps", "eps", fmt_float(2)),
    Column("tensor", "tensor", justify="left"), Column("max_abs_err", "max abs err", fmt_float()),
    Column("allowed", "allowed", fmt_float()), Column("margin", "margin", fmt_float()),
    Column("_used", "err/allowed", fmt_float(2)), Column("determinism", "dγ/dβ repeat", justify="left"),
    Column("status", "status", styled_status, justify="left", markup=True),
    Column("diagnosis", "diagnosis", lambda text: "; ".join(rule_of(text or "")), justify="left"),
]
SELFTEST_COLUMNS = [
    Column("bug", "planted bug", justify="left"), Column("meaning", "what it does", justify="left"),
    Column("outcome", "outcome", justify="left"), Column("status", "status", styled_status, justify="left", markup=True),
    Column("diagnosis", "diagnosed as", justify="left"),
]
#: verify's "why" table: one row per backend × diagnosis rule (diagnosis.by_rule)
WHY_COLUMNS = [
    Column("backend", "backend", justify="left"), Column("rule", "diagnosis", justify="left"),
    Column("rows", "rows"), Column("where", "where (dtype case: tensors)", justify="left"),
    Column("why", "why (numbers of the row furthest outside its bar)", justify="left"),
]


def bar_used(row: VerifyRow | SelftestRow) -> float | None:
    """max abs err / allowed: the fraction of the pass bar a tensor uses (< 1 is within it), or None.

    The table shows this instead of the CSV's max_rel_err: the pass rule is absolute, and an element-wise
    relative error blows up to ~1e24 wherever the reference is near zero (dx of constant rows, a mean of ~0)."""
    err, allowed = row.max_abs_err, row.allowed
    if err is None or allowed is None or err != err or not allowed >= 0:
        return None
    if allowed == 0:                       # a bar of zero (a config with k = atol = fp32_ulps = 0)
        return math.inf if err > 0 else 0.0
    return err / allowed


def summary_line(rows: Sequence[VerifyRow | SelftestRow]) -> str:
    """`N rows: k FAIL, m PASS, ...` (statuses without their parenthesised reasons)."""
    counts: dict[str, int] = {}
    for row in rows:
        key = str(row.status).split(" (")[0]
        counts[key] = counts.get(key, 0) + 1
    parts = [f"{n} {k}" for k, n in sorted(counts.items())]
    return f"{len(rows)} rows: " + ", ".join(parts)


def warn_long(estimate: Estimate, jobs: int, shapes: list[tuple[int, int]], shown: str = "") -> None:
    """Say before a long emulated run how long it will take (`shown`: the up-front estimate's words, default the
    model's ~seconds), and how to make it shorter."""
    cores = usable_cores()
    faster = (f"more --jobs (this machine has {cores} usable cores)" if jobs < cores else
              "a machine with more cores (--jobs)")
    largest = max(shapes, key=lambda s: s[0] * s[1])
    err_console.print(f"[yellow]lnbench: this run is estimated to take {shown or '~' + fmt_duration(estimate.wall_s)} on the "
                      f"emulated device ({len(estimate.costs)} cases, {jobs} job{'s' if jobs > 1 else ''}; the "
                      f"largest shape {largest[0]}x{largest[1]}): for a quicker check use smaller shapes (e.g. "
                      f"--shape-set quick) or {faster}[/yellow]", soft_wrap=True)


def print_rows(rows: Sequence[VerifyRow] | Sequence[SelftestRow], device_name: str, details: bool, out: Console) -> None:
    """The summary table and the rows worth a look (every row with --details), then the diagnoses of the FAIL and
    error rows (one row per backend × rule) and each FAIL/error row's detail."""
    shown = [{**row.cells(), "_used": bar_used(row)} for row in rows]
    if details:
        render_table(out, f"lnbench verify on {device_name}", RESULT_COLUMNS, shown)
    else:
        render_table(out, f"lnbench verify on {device_name}: summary (every row: --details)", SUMMARY_COLUMNS,
                     summary_rows(shown))
        look = [row for row in shown if worth_a_look(row)]
        if look:
            render_table(out, "FAIL and error rows, and rows within 10% of their bar", RESULT_COLUMNS, look)
    why = by_rule(rows)
    if why:
        render_table(out, "Why: the pattern each FAIL/error row's numbers fit (each row's in the CSV/JSON `diagnosis`)",
                     WHY_COLUMNS, why)
    for row in rows:
        if row.detail and row.status in ("FAIL", "error"):
            out.print(f"[red]{row.backend} {row.case} {row.dtype} {row.shape} "
                      f"{row.tensor}:[/red] {row.detail}")
